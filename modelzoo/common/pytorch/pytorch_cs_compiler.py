"""Model Zoo 1.8 path of `PyTorchCSCompiler` (`cstorch.trainer.legacy.device_runners`)."""
from cstorch.trainer.legacy.device_runners import PyTorchCSCompiler

__all__ = ["PyTorchCSCompiler"]
