from .cluster_config import ClusterConfig, MountDir, NotificationTarget
from ..unsupported import module_getattr
from .streaming import (get_ordinal, get_streaming_batch_size, get_streaming_rank, is_master_ordinal, is_receiver,
                        is_streamer, num_receivers, num_streamers, num_tasks)
from .worker_state import DataLoaderCheckpoint, get_worker_state

__all__ = ["ClusterConfig", "MountDir", "NotificationTarget", "DataLoaderCheckpoint", "get_worker_state",
           "get_ordinal", "get_streaming_batch_size", "get_streaming_rank", "is_master_ordinal", "is_streamer",
           "num_streamers", "num_tasks", "is_receiver", "num_receivers"]

__getattr__ = module_getattr(__name__)
