"""Model Zoo 1.8 path of `PyTorchBaseModel` (`cstorch.trainer.base_model`)."""
from cstorch.trainer.base_model import PyTorchBaseModel

__all__ = ["PyTorchBaseModel"]
