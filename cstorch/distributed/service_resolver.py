"""`service_resolver()`: which tasks of the run stream inputs and which receive outputs
(the real `cerebras.pytorch.distributed.service_resolver`).

`BaseServiceResolver` answers from the cluster of the calling code
(`cluster_resolver.ClusterResolver`, derived from the streaming context):
`streamer_ordinals()` are the ranks of the WORKER tasks (the data workers, seen from
inside one), `receiver_ordinals()` those of the MASTER task (the training loop, seen
from outside the workers); `cluster_spec` and `cluster_resolver` are the cluster and
its resolver; `setup()` has nothing to do. So `get_ordinal() in streamer_ordinals()`
is `is_streamer()` and `get_ordinal() in receiver_ordinals()` is `is_receiver()`, and
`cluster_spec.num_tasks()` is `num_tasks()`. The real system's resolver reads the
appliance's cluster details instead; here the data workers are threads of the
training process.
"""
from typing import List

from .cluster_resolver import ClusterResolver, ClusterSpec, TaskRole


class BaseServiceResolver:
    """The streaming and receiving tasks of the cluster of the calling code."""

    def __init__(self):
        self._resolver = ClusterResolver()

    def streamer_ordinals(self) -> List[int]:
        """The ranks of the tasks that stream inputs."""
        return [task.rank for task in self.cluster_spec.filter_tasks_by_role(TaskRole.WORKER)]

    def receiver_ordinals(self) -> List[int]:
        """The ranks of the tasks that receive the step's outputs."""
        return [task.rank for task in self.cluster_spec.filter_tasks_by_role(TaskRole.MASTER)]

    def setup(self):
        """Nothing to set up here."""

    @classmethod
    def get_resolver(cls) -> "BaseServiceResolver":
        """The resolver for the calling code."""
        return BaseServiceResolver()

    @property
    def cluster_resolver(self) -> ClusterResolver:
        return self._resolver

    @property
    def cluster_spec(self) -> ClusterSpec:
        return self._resolver.cluster_spec()


def service_resolver() -> BaseServiceResolver:
    """The service resolver of the calling code."""
    return BaseServiceResolver.get_resolver()


__all__ = ["BaseServiceResolver", "service_resolver"]
