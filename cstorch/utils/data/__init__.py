from .data_executor import DataExecutor, current_executor
from .dataloader import DataLoader, RestartableDataLoader

__all__ = ["DataLoader", "DataExecutor", "RestartableDataLoader", "current_executor"]
