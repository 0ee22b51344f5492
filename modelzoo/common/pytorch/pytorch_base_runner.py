"""Model Zoo 1.8 path of `PyTorchBaseRunner` (`cstorch.trainer.legacy.runner`)."""
from cstorch.trainer.legacy.runner import PyTorchBaseRunner

__all__ = ["PyTorchBaseRunner"]
