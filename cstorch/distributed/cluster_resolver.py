"""The tasks of a run as the real `cerebras.pytorch.distributed.cluster_resolver`
describes them: `TaskRole`, `TaskSpec`, `ClusterSpec` and `ClusterResolver`.

`TaskSpec(rank, local_rank, wse_id, node_name, roles=None)` is one task and
`ClusterSpec(tasks, rank, num_csx, num_workers_per_csx)` the cluster seen from the task
`rank`; both are dataclasses that check their fields when made (ValueError where the
real ones assert: negative ranks or ids, an empty node name, no tasks, a rank out of
range, task ranks other than 0..n-1, a negative worker count). Model code also builds
them itself, to describe a run that is not on a Cerebras cluster (the Model Zoo's
`cluster_config()` does so for one process or for torch.distributed).

`ClusterResolver().cluster_spec()` is the cluster of the calling code, derived from its
streaming context (`cstorch.distributed.streaming`), so that it agrees with
`num_tasks()`, `get_ordinal()`, `is_streamer()` and `is_receiver()`:

* inside data worker `w` of `W` (the threads that run `input_fn`, see
  `cstorch.utils.data.dataloader`): `W` tasks of role WORKER, ranks 0..W-1, the calling
  task `w`; `num_csx` is 1 and `num_workers_per_csx` is `W` (every worker streams whole
  global batches, which the engine then shards over the devices, so the stream feeds
  one system);
* elsewhere (the training loop): one task of role MASTER, rank 0, `num_csx` 1 and no
  workers, as the real resolver of the user node says.

Node names are "unknown", as the real resolvers give them.
"""
from dataclasses import dataclass
from enum import Enum
from typing import List, Optional

from .streaming import get_ordinal, is_streamer, num_tasks

_NODE = "unknown"


class TaskRole(Enum):
    """The roles of a task."""

    MASTER = "master"
    WORKER = "worker"


@dataclass
class TaskSpec:
    """One task: its global rank, its rank among the tasks of its system, the system's id,
    its node's name and its roles."""

    rank: int
    local_rank: int
    wse_id: int
    node_name: str
    roles: List[TaskRole] = None

    def __post_init__(self) -> None:
        for field in ("rank", "local_rank", "wse_id"):
            if getattr(self, field) < 0:
                raise ValueError(f"TaskSpec.{field} must be a non-negative integer, got {getattr(self, field)}")
        if not self.node_name:
            raise ValueError("TaskSpec.node_name must not be empty.")


@dataclass
class ClusterSpec:
    """The tasks of a cluster, the rank of the calling task, the number of systems and
    of worker tasks per system."""

    tasks: List[TaskSpec]
    rank: int
    num_csx: int
    num_workers_per_csx: int

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("A cluster must have at least one task.")
        if not 0 <= self.rank < len(self.tasks):
            raise ValueError(f"Invalid rank {self.rank} for a cluster of {len(self.tasks)} tasks.")
        given = [task.rank for task in self.tasks]
        if given != list(range(len(self.tasks))):
            raise ValueError(f"Expected task ranks to be {list(range(len(self.tasks)))}, but got {given}")
        if self.num_workers_per_csx < 0:
            raise ValueError(f"num_workers_per_csx must be a non-negative integer, got {self.num_workers_per_csx}")

    def num_tasks(self) -> int:
        """The number of tasks in the cluster."""
        return len(self.tasks)

    def task(self, rank: Optional[int] = None) -> TaskSpec:
        """The task of `rank` (default: the calling task's). A rank out of range is a ValueError."""
        if rank is None:
            rank = self.rank
        if not 0 <= rank < self.num_tasks():
            raise ValueError(f"Invalid task rank {rank}. Available ranks are: {list(range(self.num_tasks()))}.")
        return self.tasks[rank]

    def filter_tasks_by_role(self, role: TaskRole) -> List[TaskSpec]:
        """The tasks that have `role`."""
        return [task for task in self.tasks if role in (task.roles or ())]


def current_cluster_spec() -> ClusterSpec:
    """The cluster of the calling code (see the module's doc)."""
    if is_streamer():
        count = num_tasks()
        tasks = [TaskSpec(i, i, 0, _NODE, roles=[TaskRole.WORKER]) for i in range(count)]
        return ClusterSpec(tasks, get_ordinal(), 1, count)
    return ClusterSpec([TaskSpec(0, 0, 0, _NODE, roles=[TaskRole.MASTER])], 0, 1, 0)


class ClusterResolver:
    """The cluster of the calling code and questions about it."""

    def cluster_spec(self) -> ClusterSpec:
        """The cluster, as seen from the calling code now."""
        return current_cluster_spec()

    @property
    def num_tasks(self) -> int:
        """The number of tasks in the cluster."""
        return self.cluster_spec().num_tasks()

    @property
    def rank(self) -> int:
        """The calling task's rank."""
        return self.cluster_spec().rank

    @property
    def task(self) -> TaskSpec:
        """The calling task."""
        return self.cluster_spec().task()

    @property
    def master_task(self) -> TaskSpec:
        """The one MASTER task (a ValueError where the cluster, as seen from a data
        worker, has none or several)."""
        masters = self.get_task(TaskRole.MASTER)
        if len(masters) != 1:
            raise ValueError(f"Expected one master task, found {len(masters)}.")
        return masters[0]

    def get_task(self, role: TaskRole) -> List[TaskSpec]:
        """The tasks that have `role`."""
        return self.cluster_spec().filter_tasks_by_role(role)

    def assumes_role(self, role: TaskRole, rank: Optional[int] = None) -> bool:
        """Whether the task of `rank` (default: the calling one) has `role`."""
        return role in (self.cluster_spec().task(rank).roles or ())


__all__ = ["TaskRole", "TaskSpec", "ClusterSpec", "ClusterResolver", "current_cluster_spec"]
