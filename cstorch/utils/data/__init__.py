from .data_executor import DataExecutor, current_executor
from .dataloader import DataLoader

__all__ = ["DataLoader", "DataExecutor", "current_executor"]
