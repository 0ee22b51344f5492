"""Stand-in for the real system's compiled core library (`cerebras_pytorch_lib`, the
lazy-tensor backend and appliance client): only what model code calls.

* `set_attribute(tensor, attribute, value)`: on the wafer, attaches a compiler
  attribute (a bool, int, float, str, list or dict) to the IR node that produces
  `tensor`; the Model Zoo uses it to name tensors for numeric checks. There is no IR
  here: the call checks its arguments and does nothing, the tensor is unchanged.

Any other name of the library raises `UnsupportedAPIError` with the reason of
`cerebras.pytorch.cerebras_pytorch_lib` in `cstorch.unsupported`.
"""
from typing import Union

import torch

from ..unsupported import REAL, UNSUPPORTED, UnsupportedAPIError

_ATTRIBUTE_VALUES = (bool, int, float, str, list, dict)


def set_attribute(tensor: torch.Tensor, attribute: str, value: Union[bool, int, float, str, list, dict]) -> None:
    """Attach `attribute` = `value` to the op producing `tensor` (nothing here; see the
    module's doc). Wrong argument types are a TypeError."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"set_attribute() takes a tensor, got {type(tensor).__name__}")
    if not isinstance(attribute, str):
        raise TypeError(f"The attribute name must be a str, got {type(attribute).__name__}")
    if not isinstance(value, _ATTRIBUTE_VALUES):
        raise TypeError(f"The value of attribute {attribute!r} must be one of "
                        f"{[t.__name__ for t in _ATTRIBUTE_VALUES]}, got {type(value).__name__}")


def __getattr__(name: str):
    if not name.startswith("_"):
        raise UnsupportedAPIError(f"{REAL}.lib.cerebras_pytorch_lib.{name} is not supported by cstorch. "
                                  f"{UNSUPPORTED[REAL + '.cerebras_pytorch_lib']}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["set_attribute"]
