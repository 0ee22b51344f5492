"""Model Zoo 1.8 path of `PyTorchCSCompiler` (`cstorch.trainer.device_runners`)."""
from cstorch.trainer.device_runners import PyTorchCSCompiler

__all__ = ["PyTorchCSCompiler"]
