"""Model Zoo 1.8 path of `PyTorchRunner` (`cstorch.legacy18.runners`)."""
from cstorch.legacy18.runners import PyTorchRunner

__all__ = ["PyTorchRunner"]
