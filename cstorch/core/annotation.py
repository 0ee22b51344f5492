"""Op annotations (`cerebras.pytorch.core.annotation`): `AnnotationMode`, `annotate` and
`create_annotation`, the machinery behind the real system's `pol`, kernel, KV-group,
recompute and named-matmul annotations.

On the wafer an annotation attaches an attribute (`AnnotationMode.Attribute(name,
value)`) to every IR node the wrapped code creates, forward and backward, and the
compiler reads it (which kernel to use, which region to recompute, ...). It never
changes what is computed.

What differs from the wafer: there is no IR to annotate here (XLA picks kernels and
rematerialisation itself), so an annotation is accepted, its config is built and
checked as on the real system (`annotation_config(**kwargs)`, with its own
`__post_init__` checks), and the decorator `create_annotation(...)` returns gives the
function back unchanged: the same numbers and the same gradients as without it.
`AnnotationMode` is kept as the base class its subclasses and config dataclasses
(`class MyConfig(AnnotationMode.Config)`) derive from; as a context manager it only
swaps the active config of its class.
"""
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence


class AnnotationMode(ABC):
    """The base of an annotation: its `Config` (a dataclass with `enable_fwd` and
    `enable_bwd`, extended by each annotation), its `Attribute` and the active config of
    the subclass (`config`). Entering an instance makes its config the active one until
    exit; the attribute is never applied (there is no IR here)."""

    @dataclass
    class Config:
        """Base class of an annotation's config: whether it applies to the forward and
        the backward ops."""

        enable_fwd: bool
        enable_bwd: bool

    @dataclass
    class Attribute:
        """An annotation attribute: its name and value (None: nothing to annotate)."""

        name: str
        value: Optional[Any]

    def __init__(self, config: "AnnotationMode.Config"):
        super().__init__()
        self.local_config = config

    @property
    @abstractmethod
    def config(self):
        """The active config of this annotation class (None outside any instance)."""

    @config.setter
    @abstractmethod
    def config(self, config: "AnnotationMode.Config"):
        """Set the active config."""

    @abstractmethod
    def get_attribute(self, config: "AnnotationMode.Config", is_backward: bool = False):
        """The `Attribute` this annotation puts on the ops of the forward or backward pass."""

    def enable_annotation(self, attr: "AnnotationMode.Attribute", is_backward: bool, enable_fwd: bool,
                          enable_bwd: bool):
        """Start annotating new ops with `attr` (the wafer's IR; nothing here)."""

    def disable_annotation(self, attr: "AnnotationMode.Attribute"):
        """Stop annotating new ops with `attr` (nothing here)."""

    def hook_tensor_grad_fn(self, arg: Any, grad_fns: list):
        """Hook the backward ops of the tensor `arg` (nothing here)."""

    def enable_bwd_annotation(self, args: Sequence[Any] = (), kwargs: Optional[Dict] = None):
        """Hook the backward ops of the tensors in `args`/`kwargs` (none here): the
        `grad_fn`s hooked, an empty list."""
        return []

    def __enter__(self):
        self.orig_config = self.config
        self.config = self.local_config
        return self

    def __exit__(self, *args, **kwargs):
        self.config = self.orig_config


def annotate(annotation_mode: AnnotationMode):
    """A decorator that runs a function under `annotation_mode`. Here it returns the
    function itself: the annotation has nothing to apply to (see the module's doc)."""
    if not isinstance(annotation_mode, AnnotationMode):
        raise TypeError(f"annotate() takes an AnnotationMode, got {type(annotation_mode).__name__}")
    return lambda fn: fn


#: the AnnotationMode class made for each config class (one active config per annotation kind)
annotation_registry: Dict[type, type] = {}


def _mode_class(annotation_config: type) -> type:
    if annotation_config not in annotation_registry:

        class GenericAnnotationMode(AnnotationMode):
            _annotation_config: Optional[AnnotationMode.Config] = None

            def __init__(self, config: AnnotationMode.Config, get_attribute_fn: Callable):
                super().__init__(config)
                self.get_attribute_fn = get_attribute_fn

            @property
            def config(self):
                return type(self)._annotation_config

            @config.setter
            def config(self, config: AnnotationMode.Config):
                type(self)._annotation_config = config

            def get_attribute(self, config: AnnotationMode.Config, is_backward: bool):
                return self.get_attribute_fn(config, is_backward)

        annotation_registry[annotation_config] = GenericAnnotationMode
    return annotation_registry[annotation_config]


def create_annotation(annotation_config: type, get_attribute_fn: Callable, **kwargs):
    """The decorator of an annotation: `annotation_config(**kwargs)` is its config (a
    subclass of `AnnotationMode.Config`; wrong arguments raise as they do on the real
    system), `get_attribute_fn(config, is_backward)` gives its `Attribute`. The
    decorator returns the decorated function unchanged here."""
    if not (isinstance(annotation_config, type) and issubclass(annotation_config, AnnotationMode.Config)):
        raise TypeError(f"create_annotation() takes a subclass of AnnotationMode.Config, got {annotation_config!r}")
    if not callable(get_attribute_fn):
        raise TypeError(f"get_attribute_fn must be callable as get_attribute_fn(config, is_backward), got "
                        f"{type(get_attribute_fn).__name__}")
    return annotate(_mode_class(annotation_config)(annotation_config(**kwargs), get_attribute_fn))


__all__ = ["AnnotationMode", "annotate", "annotation_registry", "create_annotation"]
