"""Model Zoo 1.8 path of `PyTorchCSRunner` (`cstorch.legacy18.runners`)."""
from cstorch.legacy18.runners import PyTorchCSRunner

__all__ = ["PyTorchCSRunner"]
