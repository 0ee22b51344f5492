"""Model Zoo 1.8 path of `PyTorchRunner` (`cstorch.trainer.legacy.device_runners`)."""
from cstorch.trainer.legacy.device_runners import PyTorchRunner

__all__ = ["PyTorchRunner"]
