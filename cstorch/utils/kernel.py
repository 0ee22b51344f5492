"""`kernel_annotater(kernel)`: choose the wafer kernel for the ops of a function (the
real `cerebras.pytorch.utils.kernel`), e.g. `kernel_annotater("flash")(torch.matmul)`.

What differs from the wafer: XLA picks its own kernels here, so the decorator returns
the function unchanged (same outputs, same gradients). On the CSX backend the
annotation's config is still built and checked as on the real system (`kernel` must be
a str or None); on the CPU/GPU backends, as there, nothing is checked.
"""
from dataclasses import dataclass
from typing import Optional

from .._backend import use_cs
from ..core.annotation import AnnotationMode, create_annotation


@dataclass
class KernelConfig(AnnotationMode.Config):
    """The kernel annotation's config: the kernel's name (None: the default kernel)."""

    kernel: Optional[str] = None
    enable_fwd: bool = True
    enable_bwd: bool = True

    def __post_init__(self):
        if not isinstance(self.kernel, (str, type(None))):
            raise TypeError(f"Expected `kernel` to be {str}, got {type(self.kernel)}.")


def get_attribute(config: KernelConfig, is_backward: bool) -> AnnotationMode.Attribute:
    """The `kernel` attribute of the annotated ops."""
    return AnnotationMode.Attribute("kernel", config.kernel)


def kernel_annotater(kernel: Optional[str] = None):
    """A decorator that asks for `kernel` for the ops of the function it wraps; here it
    returns the function unchanged."""
    if not use_cs():
        return lambda fn: fn
    return create_annotation(KernelConfig, get_attribute, kernel=kernel)


__all__ = ["KernelConfig", "get_attribute", "kernel_annotater"]
