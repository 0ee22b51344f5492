from .cluster_config import ClusterConfig, MountDir, NotificationTarget
from .worker_state import DataLoaderCheckpoint, get_worker_state

__all__ = ["ClusterConfig", "MountDir", "NotificationTarget", "DataLoaderCheckpoint", "get_worker_state"]
