"""Device-resident state shared by the compiled steps of a run.

During a run the device copy of every state tensor (parameters, buffers, optimizer
state) is the truth: executables read and donate it step after step without touching
the host. `sync_to_host()` writes it back into the torch tensors (at checkpoints and
at the end of a run); `reset()` drops it so the next run uploads the host values.

A host edit between steps takes effect: each device copy remembers the torch tensor's
version counter (`_version`) from when host and device last agreed (the upload, or a
`sync_to_host`, whose own write is not an edit); a tensor written on the host since
then (an in-place op, a `load_state_dict`) is uploaded again by the next `arrays()`.
A write to a tensor whose device copy was newer than the host's (the write would have
used stale values) is refused: the facade syncs such tensors before host code touches
them.
The RNG key lives here too and is never reset by a run boundary. The placement
(`SingleDevice`, `DataParallel` or `FullyShardedDataParallel`) decides on which devices
the arrays live and how each is split; `device_arrays` hands the current device copies
to code that writes them without a host copy (a sharded orbax checkpoint).
"""
from __future__ import annotations

from typing import Optional, Sequence

import jax
import numpy as np
import torch

from .capture import TensorSpec
from .dtypes import host_dtype, to_torch
from .errors import CstorchError, StaticGraphError
from .executable import KEY_AVAL
from .lazy_tensor import LazyTensor
from .placement import SingleDevice
from .stacked_state import value


class DeviceState:
    def __init__(self, seed: int = 0, placement=None):
        self.placement = placement or SingleDevice()
        # id(tensor) -> (its device array, the tensor's _version when host and device last agreed)
        self._copies: dict[int, tuple[jax.Array, int]] = {}
        self._tensors: dict[int, torch.Tensor] = {}
        self._dirty: set[int] = set()
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        self.set_rng_state(np.asarray(jax.random.key_data(jax.random.key(seed))))

    def arrays(self, tensors: Sequence[torch.Tensor], specs: Sequence[TensorSpec], names: Sequence[str]):
        """Device arrays of host tensors: uploaded on first use in a run, and again after
        a host write (see the module docstring); the tensors to upload are checked first
        and copied in one transfer (a run's first step uploads every state tensor)."""
        out = []
        uploads = []  # (position in out, tensor, name)
        copies = self._copies
        for t, spec, name in zip(tensors, specs, names):
            copy = copies.get(id(t))
            if copy is None or copy[1] != t._version:
                self._check_upload(t, spec, name, stale_host=copy is not None and id(t) in self._dirty)
                uploads.append((len(out), t, name))
                out.append(None)
            else:
                out.append(copy[0])
        if uploads:
            arrays = self.placement.state_arrays([t for _, t, _ in uploads], [name for _, _, name in uploads])
            for (i, t, _), array in zip(uploads, arrays):
                copies[id(t)] = (array, t._version)
                self._tensors[id(t)] = t
                out[i] = array
        return out

    @staticmethod
    def _check_upload(t: torch.Tensor, spec: TensorSpec, name: str, stale_host: bool) -> None:
        if stale_host:
            raise CstorchError(
                f"state tensor {name} was written on the host while the device held newer values, so the write "
                f"used stale ones. Between steps, edit state from the thread that runs the steps, or sync the "
                f"state to the host before editing it from elsewhere."
            )
        got = TensorSpec.of(t)
        if got != spec:
            raise StaticGraphError(
                f"state tensor {name} was compiled as {spec} and is now {got}; a compiled step cannot change the "
                f"shape or dtype of its state."
            )

    def update(self, tensors: Sequence[torch.Tensor], arrays: Sequence) -> None:
        """Record new device values, arrays or rows of stacked arrays (`stacked_state.Row`):
        the host copies are now stale."""
        copies = self._copies
        for t, a in zip(tensors, arrays):
            key = id(t)
            copies[key] = (a, copies[key][1])
            self._dirty.add(key)

    def rng_state(self) -> np.ndarray:
        """The key the next step draws from, as raw uint32 key data (waits for the device)."""
        return np.array(self.rng_key, dtype=np.uint32)

    def set_rng_state(self, state: np.ndarray) -> None:
        state = np.asarray(state)
        want = KEY_AVAL.shape
        if state.shape != want or state.dtype.kind not in "ui":
            raise ValueError(
                f"An XLA RNG state is uint32 key data of shape {list(want)}, got {state.dtype} of shape "
                f"{list(state.shape)}; pass what cstorch.get_rng_state() returned on a CSX backend."
            )
        # replicated whatever the placement's rule says of a (2,)-shaped state tensor
        (self.rng_key,) = self.placement.put([state.astype(np.uint32)], [self.placement.state_sharding()])

    def sync_to_host(self, tensors: Optional[Sequence[torch.Tensor]] = None) -> None:
        """Copy every changed device value (or only those of `tensors`) into its torch
        tensor (waits for the device)."""
        keys = set(self._dirty) if tensors is None else {id(t) for t in tensors} & self._dirty
        # in upload order, the same in every process (gathering split arrays is a collective)
        keys = [key for key in self._tensors if key in keys]
        hosts = self.placement.to_host([value(self._copies[key][0]) for key in keys])
        with torch.no_grad():
            for key, host in zip(keys, hosts):
                t, array = self._tensors[key], self._copies[key][0]
                t.copy_(to_torch(host, t.dtype))
                self._copies[key] = (array, t._version)  # a read, not an edit
        self._dirty -= set(keys)

    def device_arrays(self, tensors: Sequence[torch.Tensor]) -> list[Optional[jax.Array]]:
        """The current device copy of each host tensor, or None where the device holds
        none. A tensor is matched by its memory (storage, offset, shape, strides,
        dtype), so a `detach()`ed view in a `state_dict()` finds the state tensor it
        views. An array is given only where it holds the tensor's dtype (an int64
        tensor is computed as int32: None)."""
        held = {_memory_of(t): key for key, t in self._tensors.items()}
        out = []
        for t in tensors:
            key = None if isinstance(t, LazyTensor) else held.get(_memory_of(t))  # a lazy tensor has no memory
            copy = self._copies.get(key) if key is not None else None
            out.append(value(copy[0]) if copy is not None and copy[0].dtype == host_dtype(t.dtype) else None)
        return out

    @property
    def tensors(self) -> list[torch.Tensor]:
        """The host tensors whose device copies this state holds, in upload order."""
        return list(self._tensors.values())

    def forget(self, tensors: Sequence[torch.Tensor]) -> None:
        """Drop the device copies of `tensors`: the next step uploads their host values."""
        for t in tensors:
            self._copies.pop(id(t), None)
            self._tensors.pop(id(t), None)
            self._dirty.discard(id(t))

    def reset(self) -> None:
        """Forget device copies; the host tensors become the truth again. The values only
        the device holds must have been brought to the host first (`sync_to_host`, which
        the run's write-back calls): dropping them is refused."""
        if self._dirty:
            raise CstorchError(
                f"DeviceState.reset() would drop the device's newer values of {len(self._dirty)} state tensor(s); "
                f"call sync_to_host() first."
            )
        self._copies.clear()
        self._tensors.clear()


def _memory_of(t: torch.Tensor) -> tuple:
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)
