"""`groups_annotater(num_kv_groups)`: tell the wafer's attention kernels how many key/value
groups the wrapped ops use (grouped-query attention; the real
`cerebras.pytorch.utils.num_kv_groups`).

What differs from the wafer: the number only guides the wafer's kernel choice, so here
the decorator returns the function unchanged (same outputs, same gradients). On the
CSX backend the config is still built and checked as on the real system
(`num_kv_groups` must be an int or None); on the CPU/GPU backends, as there, nothing is
checked.
"""
from dataclasses import dataclass
from typing import Optional

from .._backend import use_cs
from ..core.annotation import AnnotationMode, create_annotation


@dataclass
class GroupsConfig(AnnotationMode.Config):
    """The KV-groups annotation's config (None: not grouped)."""

    num_kv_groups: Optional[int] = None
    enable_fwd: bool = True
    enable_bwd: bool = True

    def __post_init__(self):
        if not isinstance(self.num_kv_groups, (int, type(None))):
            raise TypeError(f"Expected `num_kv_groups` to be {int}, got {type(self.num_kv_groups)}.")


def get_attribute(config: GroupsConfig, is_backward: bool) -> AnnotationMode.Attribute:
    """The `num_kv_groups` attribute of the annotated ops."""
    return AnnotationMode.Attribute("num_kv_groups", config.num_kv_groups)


def groups_annotater(num_kv_groups: Optional[int] = None):
    """A decorator that records `num_kv_groups` on the ops of the function it wraps;
    here it returns the function unchanged."""
    if not use_cs():
        return lambda fn: fn
    return create_annotation(GroupsConfig, get_attribute, num_kv_groups=num_kv_groups)


__all__ = ["GroupsConfig", "get_attribute", "groups_annotater"]
