"""Model Zoo 1.8 path of `PyTorchBaseRunner` (`cstorch.trainer.runner`)."""
from cstorch.trainer.runner import PyTorchBaseRunner

__all__ = ["PyTorchBaseRunner"]
