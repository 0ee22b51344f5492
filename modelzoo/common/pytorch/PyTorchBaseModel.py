"""Model Zoo 1.8 path of `PyTorchBaseModel` (`cstorch.legacy18.runners`)."""
from cstorch.legacy18.runners import PyTorchBaseModel

__all__ = ["PyTorchBaseModel"]
