"""Model Zoo 1.8 path of `PyTorchCSRunner` (`cstorch.trainer.legacy.device_runners`)."""
from cstorch.trainer.legacy.device_runners import PyTorchCSRunner

__all__ = ["PyTorchCSRunner"]
