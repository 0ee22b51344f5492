"""Model Zoo 1.8 path of `PyTorchCSCompiler` (`cstorch.legacy18.runners`)."""
from cstorch.legacy18.runners import PyTorchCSCompiler

__all__ = ["PyTorchCSCompiler"]
