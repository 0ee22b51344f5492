"""Where the arrays of a run live: one device, or a data-parallel mesh of several.

`SingleDevice()` keeps everything on JAX's default device. `DataParallel(n)` is a
one-axis `jax.sharding.Mesh` ("data") over the first n devices of the (possibly
multi-process) JAX runtime: every state array (parameters, buffers, optimizer state,
the RNG key) and every scalar input is replicated on all n devices; every batch
tensor with at least one dimension is split on dim 0 into n equal slices. The compiled
step then computes on the whole global batch, and XLA inserts the cross-device
reductions that make its result the one-device result up to float summation order.
`FullyShardedDataParallel(n)` splits the batch the same way and also splits every
state tensor over the same devices by the rule of `sharding.py` (FSDP / ZeRO-3): each
device holds 1/n of the state, and XLA inserts the all-gathers and reduce-scatters.

In a multi-process run every process passes the same global host batch and uploads
only the slices of its own devices; replicated values are read back from a local copy,
split ones are gathered first (a collective: every process reads the same arrays in
the same order).
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import jax
import numpy as np
import torch
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import sharding
from .dtypes import host_array


class Placement:
    """Copies host values to the devices of a run (fresh arrays, never aliasing torch
    memory); subclasses say which devices and how values are split."""

    num_devices = 1

    @functools.cached_property
    def platform(self) -> str:
        """The platform of the run's devices ("cpu", "gpu", ...)."""
        return jax.devices()[0].platform

    @property
    def devices(self) -> list:
        """The devices the run's programs execute on, in mesh order."""
        raise NotImplementedError

    def state_sharding(self, shape: tuple = ()):
        """The sharding of a state tensor of `shape`; with no shape, that of a 0-d value
        (hyper-parameters, the RNG key and the step's outputs are replicated). None: the
        default device."""
        raise NotImplementedError

    def batch_shardings(self, shapes: Sequence[tuple], names: Sequence[str]) -> list:
        raise NotImplementedError

    def put(self, hosts: Sequence[np.ndarray], shardings: Sequence) -> list:
        raise NotImplementedError

    def put_state(self, hosts: Sequence[np.ndarray]) -> list:
        return self.put(hosts, [self.state_sharding(h.shape) for h in hosts])

    def state_arrays(self, tensors: Sequence[torch.Tensor], names: Sequence[str]) -> list:
        """Device copies of state or scalar tensors, placed by `state_sharding`."""
        return self.put_state([host_array(t, n) for t, n in zip(tensors, names)])

    def to_host(self, arrays: Sequence[jax.Array]) -> list[np.ndarray]:
        """Host copies of device arrays (all transfers started before waiting for one)."""
        for a in arrays:
            if isinstance(a, jax.Array):
                a.copy_to_host_async()
        return [np.asarray(a) for a in arrays]

    def batch_arrays(self, tensors: Sequence[torch.Tensor], names: Sequence[str]) -> list:
        """Copies of batch tensors, split as the compiled step expects them."""
        return self.put_batch([host_array(t, n) for t, n in zip(tensors, names)], names)

    def put_batch(self, hosts: Sequence[np.ndarray], names: Sequence[str]) -> list:
        return self.put(hosts, self.batch_shardings([h.shape for h in hosts], names))


class SingleDevice(Placement):
    """Everything on JAX's default device (no explicit shardings)."""

    @property
    def devices(self) -> list:
        return jax.devices()[:1]

    def state_sharding(self, shape: tuple = ()):
        return None

    def batch_shardings(self, shapes: Sequence[tuple], names: Sequence[str]) -> list:
        return [None] * len(shapes)

    def put(self, hosts: Sequence[np.ndarray], shardings: Sequence) -> list:
        return jax.device_put(list(hosts))

    def put_batch(self, hosts: Sequence[np.ndarray], names: Sequence[str]) -> list:
        """On a CPU device the fresh host copies themselves: the compiled step takes numpy
        inputs in its C++ call path, which costs less per step than a Python
        `jax.device_put` (0.1-0.6 ms on a 2-core CPU, most of an MLP step's overhead)."""
        if self.platform == "cpu":
            return list(hosts)
        return super().put_batch(hosts, names)

    def __repr__(self) -> str:
        return "SingleDevice()"


class DataParallel(Placement):
    """Batch split on dim 0 over `num_devices` devices, everything else replicated."""

    AXIS = "data"

    def __init__(self, num_devices: int):
        devices = jax.devices()
        if not isinstance(num_devices, int) or num_devices < 1:
            raise ValueError(f"DataParallel needs a positive number of devices, got {num_devices!r}")
        if num_devices > len(devices):
            hint = ("Set XLA_FLAGS=--xla_force_host_platform_device_count=N in the environment before JAX is "
                    "imported to get N CPU devices." if devices[0].platform == "cpu" else "")
            raise ValueError(
                f"num_csx={num_devices} asks for {num_devices} devices, but the JAX runtime has only "
                f"{len(devices)} ({devices[0].platform}) device(s). Ask for at most {len(devices)}. {hint}".rstrip()
            )
        if jax.process_count() > 1 and num_devices != len(devices):
            raise ValueError(
                f"num_csx={num_devices} in a run of {jax.process_count()} processes: a multi-process run uses "
                f"every device of every process, so num_csx must be {len(devices)}."
            )
        self.num_devices = num_devices
        self.mesh = Mesh(np.array(devices[:num_devices]), (self.AXIS,))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self.split = NamedSharding(self.mesh, PartitionSpec(self.AXIS))

    @property
    def devices(self) -> list:
        return list(self.mesh.devices.flat)

    def state_sharding(self, shape: tuple = ()) -> NamedSharding:
        return self.replicated

    def batch_sharding(self, shape: tuple, name: str) -> NamedSharding:
        """Split on dim 0 for a tensor with dimensions; replicated for a scalar. A dim 0
        that the devices cannot share equally is an error."""
        if len(shape) == 0:
            return self.replicated
        rows = shape[0]
        if rows % self.num_devices:
            lower = rows // self.num_devices * self.num_devices
            upper = math.ceil(rows / self.num_devices) * self.num_devices
            sizes = f"{lower} or {upper}" if lower else f"{upper}"
            raise ValueError(
                f"{name} has batch size {rows} (dim 0 of shape {list(shape)}), which the {self.num_devices} "
                f"devices of num_csx={self.num_devices} cannot split equally. The global batch must be a multiple "
                f"of num_csx: use a batch size of {sizes}, or fewer devices."
            )
        return self.split

    def batch_shardings(self, shapes: Sequence[tuple], names: Sequence[str]) -> list[NamedSharding]:
        return [self.batch_sharding(s, n) for s, n in zip(shapes, names)]

    def put(self, hosts: Sequence[np.ndarray], shardings: Sequence[NamedSharding]) -> list:
        if jax.process_count() == 1:
            return jax.device_put(list(hosts), list(shardings))
        # each process uploads only the slices of its own devices
        return [jax.make_array_from_callback(h.shape, s, lambda index, h=h: h[index])
                for h, s in zip(hosts, shardings)]

    def to_host(self, arrays: Sequence[jax.Array]) -> list[np.ndarray]:
        """Host copies; an array split over several processes is first gathered onto
        every device of the mesh, one array at a time (so the extra device memory is
        one whole tensor), which is a collective: every process must ask for the same
        arrays in the same order."""
        return super().to_host([a if a.is_fully_addressable or a.is_fully_replicated else _gather(a, self.replicated)
                                for a in arrays])

    def __repr__(self) -> str:
        return f"DataParallel({self.num_devices})"


class FullyShardedDataParallel(DataParallel):
    """The batch split on dim 0 as in `DataParallel`, and every state tensor split over
    the same devices along the dimension `sharding.shard_dim` picks (replicated when
    no dimension divides evenly): each device holds 1/n of the parameters, buffers and
    optimizer state (FSDP / ZeRO-3). One mesh axis serves both splits: a second
    (model) axis would add tensor parallelism, which a rule that sees only shapes
    cannot choose well, and would not lower the state bytes per device further."""

    def state_sharding(self, shape: tuple = ()) -> NamedSharding:
        spec = sharding.partition_spec(shape, self.num_devices, self.AXIS)
        return self.replicated if spec == PartitionSpec() else NamedSharding(self.mesh, spec)

    def __repr__(self) -> str:
        return f"FullyShardedDataParallel({self.num_devices})"


@functools.lru_cache(maxsize=None)
def _replicate(target: NamedSharding):
    return jax.jit(lambda x: x, out_shardings=target)


def _gather(array: jax.Array, replicated: NamedSharding) -> np.ndarray:
    """This process's copy of the whole of an array split over several processes."""
    return np.asarray(_replicate(replicated)(array).addressable_data(0))


def join_processes(coordinator_address: str, num_processes: int, process_id: int) -> None:
    """Join a multi-process JAX runtime: process `process_id` of `num_processes`, with
    the coordinator service at `coordinator_address` ("host:port", started by process
    0). Must run before JAX creates any array. Afterwards `jax.devices()` lists the
    devices of every process."""
    if not 0 <= process_id < num_processes:
        raise ValueError(f"process_id must be in [0, {num_processes}), got {process_id}")
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id)


def process_index() -> int:
    """This process's index in a multi-process run (0 in a single-process run)."""
    return jax.process_index()
