"""`save_sharded(state_dict, directory)`: an orbax checkpoint written from the devices.

`cstorch.save` writes one H5 file, so in a run whose state is split over the devices
(`cstorch.backends.csx.cluster.shard_state`) it first gathers every tensor into the
host. `save_sharded` writes the cstorch orbax directory instead (the format of
`cstorch.checkpoint.to_orbax`, which `cstorch.load` and `from_orbax` read) straight
from the device arrays: orbax writes each array's slices from the process whose
devices hold them, and nothing is gathered. A tensor of `state_dict` that is (a
`detach()`ed view of) state the devices hold is written this way; every other value
as `cstorch.save` would write it, from the host. Outside a CSX run everything comes
from the host. In a multi-process run every process must call it (orbax coordinates
the processes; the directory must be on storage they share).

Restoring: `cstorch.load(directory)` reads each array whole, whatever mesh wrote it,
so a run of any device count loads it; the next step uploads each device's slice.
"""
from __future__ import annotations

import os

import torch.utils._pytree as pytree

from .._backend import backend
from ..storage.layout import TENSOR, flat_keys, layout_of
from ..storage.orbax_dir import write_orbax


def save_sharded(state_dict, directory) -> None:
    """Write `state_dict` as a new cstorch orbax directory, tensors the devices hold
    written from their device shards (see the module docstring). cstorch only.

    Args:
        state_dict: the state to write (nested dicts, lists and tuples of tensors and other values).
        directory: the new directory (it must not exist).

    Differences from the real system:
        Call it in the loop body between steps (a checkpoint closure has already
        brought the state to the host) and in every process. Tensors the devices do not
        hold, or hold as another dtype (int64 computed as int32), come from the host.
        `cstorch.load` reads each array whole into the host;
        `cstorch_jax.orbax.load_arrays(dir, shardings)` restores arrays straight onto any
        mesh's shardings, which runs do not use yet (between runs the host tensors are
        the truth).
    """
    directory = os.fspath(directory)
    if os.path.exists(directory):
        raise FileExistsError(f"Checkpoint at '{directory}' already exists. Please delete the checkpoint and run "
                              f"again.")
    layout = layout_of(state_dict)
    leaves, spec = pytree.tree_flatten(state_dict)
    by_key = dict(zip(flat_keys(spec), leaves))
    tensors = [e for e in layout.entries if e.kind == TENSOR]
    b = backend()
    arrays = (b.run.device_copies_for_writing([by_key[e.key] for e in tensors]) if b is not None and b.is_csx
              else [None] * len(tensors))
    for entry, array in zip(tensors, arrays):
        if array is not None:
            entry.payload = lambda a=array: a
    write_orbax(layout, directory)
