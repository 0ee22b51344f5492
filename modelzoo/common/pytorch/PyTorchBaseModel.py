"""Model Zoo 1.8 path of `PyTorchBaseModel` (`cstorch.trainer.legacy.base_model`)."""
from cstorch.trainer.legacy.base_model import PyTorchBaseModel

__all__ = ["PyTorchBaseModel"]
