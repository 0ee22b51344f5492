from .cluster_config import ClusterConfig, MountDir, NotificationTarget

__all__ = ["ClusterConfig", "MountDir", "NotificationTarget"]
