"""Model Zoo 1.8 path of `PyTorchCSRunner` (`cstorch.trainer.device_runners`)."""
from cstorch.trainer.device_runners import PyTorchCSRunner

__all__ = ["PyTorchCSRunner"]
