"""Model Zoo 1.8 path of `PyTorchRunner` (`cstorch.trainer.device_runners`)."""
from cstorch.trainer.device_runners import PyTorchRunner

__all__ = ["PyTorchRunner"]
