"""Multi-process (multi-host) runs.

A run of P processes is described by the environment of each process:

    CSTORCH_NUM_PROCESSES=P   CSTORCH_PROCESS_ID=<0..P-1>

and the coordinator's address, `ClusterConfig(mgmt_address="host:port")` (or, when the
config has none, `CSTORCH_COORDINATOR_ADDRESS`); process 0 serves it. Creating the
CSX backend joins the processes with `jax.distributed.initialize`; afterwards the
data-parallel mesh spans the devices of every process, so `num_csx` must be their
total. Every process runs the same script on the same global batches; each uploads
only its devices' slices, and every process sees the (replicated) step outputs.

`python -m cstorch.distributed.launch` starts such a run on one machine (loopback).

Differences from the real system:
    Every process runs the script on the same global batches and uploads only its
    devices' slices. Step closures run in every process, and `cstorch.save` writes
    only on process 0. `num_csx` is the total device count of all processes.
"""
from __future__ import annotations

import os

import cstorch_jax

from .cluster_config import ClusterConfig

ENV_NUM_PROCESSES = "CSTORCH_NUM_PROCESSES"
ENV_PROCESS_ID = "CSTORCH_PROCESS_ID"
ENV_COORDINATOR = "CSTORCH_COORDINATOR_ADDRESS"

_joined: tuple | None = None


def _env_int(name: str) -> int:
    raw = os.environ[name]
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"The environment variable {name} must be an integer, got {raw!r}") from None


def join_from_environment(cfg: ClusterConfig) -> None:
    """Join the multi-process run the environment describes; nothing for one process."""
    global _joined
    if ENV_NUM_PROCESSES not in os.environ:
        return
    num_processes = _env_int(ENV_NUM_PROCESSES)
    if num_processes < 1:
        raise ValueError(f"{ENV_NUM_PROCESSES} must be >= 1, got {num_processes}")
    if num_processes == 1:
        return
    if ENV_PROCESS_ID not in os.environ:
        raise ValueError(f"{ENV_NUM_PROCESSES}={num_processes} is set but {ENV_PROCESS_ID} is not: give every "
                         f"process its index 0..{num_processes - 1}.")
    process_id = _env_int(ENV_PROCESS_ID)
    coordinator = cfg.mgmt_address or os.environ.get(ENV_COORDINATOR)
    if not coordinator:
        raise ValueError(
            f"A run of {num_processes} processes needs a coordinator address: set "
            f"ClusterConfig(mgmt_address='host:port') (process 0's host and a free port) or {ENV_COORDINATOR}."
        )
    want = (coordinator, num_processes, process_id)
    if _joined is not None:
        if _joined != want:
            raise RuntimeError(f"This process already joined the run {_joined} (coordinator, processes, id); a "
                               f"process can join only one multi-process run.")
        return
    cstorch_jax.join_processes(coordinator, num_processes, process_id)
    _joined = want


def process_index() -> int:
    """This process's index in the run (0 when there is one process)."""
    return cstorch_jax.process_index() if _joined is not None else 0


def process_count() -> int:
    """The number of processes of the run (1 when there is one process)."""
    return _joined[1] if _joined is not None else 1


def is_main_process() -> bool:
    return process_index() == 0


def get_rank() -> int:
    """This process's rank in the run: its `CSTORCH_PROCESS_ID` once the CSX backend has
    joined a multi-process run, else 0. (The real package has no such function in
    `cerebras.pytorch.distributed`; Model Zoo code calls it there for a run of several
    processes.)"""
    return process_index()


def get_world_size() -> int:
    """The number of processes of the run: `CSTORCH_NUM_PROCESSES` once the CSX backend
    has joined a multi-process run, else 1."""
    return process_count()
