"""`cstorch.utils` of the 1.8 API: `data.DataLoader`."""
from . import data

__all__ = ["data"]
