from . import dataloader, utils
from .data_executor import DataExecutor, current_executor
from .dataloader import DataLoader, RestartableDataLoader
from .dataset import SyntheticDataset
from .sampler import DistributedSampler
from .utils import Schedule, compute_num_steps

__all__ = [
    "DataLoader",
    "DataExecutor",
    "DistributedSampler",
    "RestartableDataLoader",
    "Schedule",
    "SyntheticDataset",
    "compute_num_steps",
    "current_executor",
]
