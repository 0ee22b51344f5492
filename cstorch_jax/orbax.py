"""Flat numpy checkpoints in an orbax-checkpoint directory.

`save_arrays(directory, arrays, metadata)` writes a dict `{name: np.ndarray}` as the
orbax item "arrays" (a PyTree checkpoint: one tensorstore array per name, any numpy
dtype including bfloat16, bool and int64, values kept bit-exact) and a JSON-able dict
as the item "metadata". `load_arrays(directory)` returns both, arrays as numpy with
their saved dtypes. Orbax cannot store zero-size arrays: callers keep those in the
metadata.

A value may also be a `jax.Array` split over the devices of a mesh: orbax then writes
each slice from the process that holds it (every process of a multi-process run calls
`save_arrays`). `load_arrays(directory, shardings={name: sharding})` restores those
names as `jax.Array`s placed by the given shardings, on any mesh (another device count
than the writer's included): each process reads only its devices' slices.
"""
from __future__ import annotations

import os

import numpy as np

ARRAYS = "arrays"
METADATA = "metadata"


def _checkpointer():
    import orbax.checkpoint as ocp

    return ocp, ocp.Checkpointer(ocp.CompositeCheckpointHandler())


def save_arrays(directory: str, arrays: dict[str, np.ndarray], metadata: dict) -> None:
    """Write a new orbax checkpoint at `directory` (which must not exist)."""
    directory = os.path.abspath(os.fspath(directory))
    if os.path.exists(directory):
        raise FileExistsError(f"Checkpoint at '{directory}' already exists. Please delete the checkpoint and run "
                              f"again.")
    for name, a in arrays.items():
        if a.size == 0:
            raise ValueError(f"orbax cannot store the zero-size array {name!r}; keep its shape in the metadata.")
    ocp, ckptr = _checkpointer()
    items = {METADATA: ocp.args.JsonSave({"array_names": sorted(arrays), "metadata": metadata})}
    if arrays:
        items[ARRAYS] = ocp.args.PyTreeSave(dict(arrays))
    ckptr.save(directory, ocp.args.Composite(**items))


def load_arrays(directory: str, shardings: dict | None = None) -> tuple[dict, dict]:
    """(arrays, metadata) of a checkpoint of `save_arrays`: numpy arrays, except the
    names in `shardings`, restored as jax.Arrays with those shardings."""
    shardings = shardings or {}
    directory = os.path.abspath(os.fspath(directory))
    ocp, ckptr = _checkpointer()
    present = set(os.listdir(directory))
    if METADATA not in present:
        raise RuntimeError(f"'{directory}' is not an orbax checkpoint written by cstorch (it has no "
                           f"'{METADATA}' item).")
    stored = ckptr.restore(directory, ocp.args.Composite(**{METADATA: ocp.args.JsonRestore()}))[METADATA]
    names = stored["array_names"]
    if not names:
        return {}, stored["metadata"]
    unknown = sorted(set(shardings) - set(names))
    if unknown:
        raise KeyError(f"'{directory}' holds no arrays named {unknown}; it holds {names}.")
    restore = {n: ocp.ArrayRestoreArgs(sharding=shardings[n]) if n in shardings
               else ocp.RestoreArgs(restore_type=np.ndarray) for n in names}
    out = ckptr.restore(directory, ocp.args.Composite(**{ARRAYS: ocp.args.PyTreeRestore(restore_args=restore)}))
    return {n: out[ARRAYS][n] if n in shardings else np.asarray(out[ARRAYS][n]) for n in names}, stored["metadata"]
