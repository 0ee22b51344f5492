"""Exceptions raised by the engine.

Every error says what was wrong and how to fix it; none is a silent fallback.
"""


class CstorchError(RuntimeError):
    """Base class of every error raised by cstorch and its engine."""


class StaticGraphError(CstorchError):
    """A call would need a different graph than the one compiled (shape, dtype,
    structure or a Python value changed). The compiled executable is immutable."""


class MaterializationError(CstorchError):
    """A traced tensor's value was read on the host while the step was being captured."""


class UnsupportedOpError(CstorchError, NotImplementedError):
    """The captured graph holds an ATen op that has no jax.numpy lowering, or a lowering
    cannot handle an argument value. `missing_ops` names the ops without a lowering."""

    def __init__(self, message: str, missing_ops: tuple[str, ...] = ()):
        super().__init__(message)
        self.missing_ops = tuple(missing_ops)


class UnsupportedDTypeError(CstorchError, TypeError):
    """A tensor dtype that the engine cannot represent exactly."""


class CaptureError(CstorchError):
    """The step could not be captured as one pure graph."""
