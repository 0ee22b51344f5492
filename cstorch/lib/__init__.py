"""`cstorch.lib`: the place of the real system's compiled core library,
`cerebras.pytorch.lib.cerebras_pytorch_lib`. There is none here; `cerebras_pytorch_lib`
is a module with the one function of it that model code calls (see its doc)."""
from . import cerebras_pytorch_lib

__all__ = ["cerebras_pytorch_lib"]
