"""`cstorch.distributed`: the cluster configuration, the data workers' streaming context,
the processes of a run and the task view of the real API. As in the real package, the
attribute `service_resolver` is the function, not the module of that name (see
cstorch/_shadowing.py)."""
from .._shadowing import shadow_submodules

shadow_submodules(__name__, "service_resolver")

from . import cluster_resolver  # noqa: E402
from .cluster_config import ClusterConfig, MountDir, NotificationTarget
from .cluster_resolver import TaskRole
from ..unsupported import module_getattr
from .processes import get_rank, get_world_size
from .service_resolver import BaseServiceResolver, service_resolver
from .streaming import (get_ordinal, get_streaming_batch_size, get_streaming_rank, is_master_ordinal, is_receiver,
                        is_streamer, num_receivers, num_streamers, num_tasks)
from .worker_state import DataLoaderCheckpoint, get_worker_state

__all__ = ["ClusterConfig", "MountDir", "NotificationTarget", "DataLoaderCheckpoint", "get_worker_state",
           "get_ordinal", "get_streaming_batch_size", "get_streaming_rank", "is_master_ordinal", "is_streamer",
           "num_streamers", "num_tasks", "is_receiver", "num_receivers", "get_rank", "get_world_size",
           "TaskRole", "BaseServiceResolver", "service_resolver", "cluster_resolver"]

__getattr__ = module_getattr(__name__)
