"""The names of `cerebras.pytorch` 2.10 that cstorch deliberately does not provide.

This is the one list of exceptions to the API inventory (`tests/api/inventory_2_10.json`,
checked by `tests/api/test_inventory.py`). Each entry says what the real system does with
the name and what to do here. Using one (importing it, or reading it from its module)
raises `UnsupportedAPIError` with that text; it is never an AttributeError. A key ending
in `.*` covers a whole module: the module imports, and each of its real names (listed in
`MODULE_NAMES`) raises; any other name is an ordinary AttributeError.
"""
from __future__ import annotations

from cstorch_jax import CstorchError

REAL = "cerebras.pytorch"

_MESH_HINT = ("Here `ClusterConfig(num_csx=N)` runs the step data-parallel on a mesh of N devices, with the "
              "collectives inserted by XLA.")

UNSUPPORTED: dict[str, str] = {
    f"{REAL}.sparse.*": (
        "Weight sparsity: the real system keeps masks for the selected weights (Static, GMP, SET, RigL, Group, "
        "`sparse.configure`) and the wafer skips the zeroed weights. Sparse training is out of scope here: train "
        "dense (remove the sparsity configuration), or keep a mask and apply it with torch.where in the step. "
        "(The algorithm classes exist, with their real constructors, for code that only names them; making one "
        "raises this error.)"),
    f"{REAL}.nn.SelectiveGrad": (
        "Selective gradient updates: the real system masks each weight's gradient to a chosen subset (a sparsity "
        "feature of the wafer). Out of scope here, as cstorch.sparse: multiply `p.grad` by a mask in the step."),
    f"{REAL}.mesh.*": (
        "The multi-box sharding API: the real system places tensors and collectives on named boxes of a wafer "
        "cluster (Box, Mesh, shard, replicate, all_gather, ...). " + _MESH_HINT),
    **{f"{REAL}.nn.functional.{name}": (
        f"{name} is the wafer's kernel for moving tensors between boxes of a mesh (see cstorch.mesh). " + _MESH_HINT)
       for name in ("CSXD2DTransfer", "CSXM2MTransfer", "CSXMeshAllSlice", "CSXMeshAllGather", "CSXMeshShard")},
    f"{REAL}.experimental.*": (
        "Experimental wafer features: implicit autoregressive loops run on the wafer (start_implicit_loop, "
        "update_implicit_loop, get_loop_iteration_slice) and weight compression formats (Compression). Here write "
        "the generation loop in Python around a compiled step, one token per step. (Traced-tensor listeners, "
        "experimental.listener, are accepted and never called.)"),
    f"{REAL}.profiler.*": (
        "The wafer's per-operation profiler (ProfilerRegistry, profile, schedule, tensorboard_trace_handler) "
        "records kernel timings on the system. Here `step.report` gives the compiled program's cost, memory and "
        "op histogram, `executor.profiler` / `executor.pipeline_stats` the run's rates, and jax.profiler "
        "traces XLA."),
    f"{REAL}.core.*": (
        "The internals of the real lazy-tensor backend (its compile, device and appliance modules). Use the "
        "public names instead: cstorch.compile, cstorch.trace, cstorch.backend, ... (Op annotations, "
        "core.annotation, are accepted and have no effect.)"),
    f"{REAL}.cirh": (
        "The wafer's own op namespace (torch.ops.cirh), emitted by the real system's kernels. There are no CIRH "
        "ops here: write the computation with torch ops (the cstorch.nn.functional helpers do)."),
    f"{REAL}.cerebras_pytorch_lib": (
        "The real system's compiled core library (lazy tensors, appliance client). There is none here: the "
        "engine is cstorch_jax."),
    f"{REAL}.utils.benchmark.*": (
        "The real system's benchmark_dataloader measures a dataloader alone (time per batch, memory and I/O profilers, a pandas "
        "report). Here iterate a DataExecutor over the loader and read `executor.pipeline_stats` (loader time, "
        "queue wait, batches per second)."),
    **{f"{REAL}.distributed.{name}": (
        f"In the real system {name} belongs to the appliance's worker nodes (their SSD cache under /n0/cache, the "
        f"worker state the appliance restores). Data workers here are threads of the training process: use "
        f"num_streamers(), get_streaming_rank(), get_ordinal(), is_streamer() and service_resolver().")
       for name in ("WorkerState", "hit_worker_cache_limit", "SSD_LIMIT", "WORKER_CACHE_ROOT")},
    f"{REAL}.storage.to_deferred": (
        "The real to_deferred wraps tensors as lazily copied appliance tensors. Tensors here are plain torch tensors "
        "(cstorch.load already reads H5 checkpoints lazily): use the tensors as they are."),
}


#: the real names of the modules excepted as a whole (`<module>.*` above)
MODULE_NAMES: dict[str, tuple] = {
    f"{REAL}.sparse": ("configure", "map_sparsity_algorithm", "utils", "dynamic", "gmp", "group", "init",
                       "rigl", "set", "static"),
    f"{REAL}.mesh": ("Box", "BoxDeviceType", "Mesh", "Placement", "Replicate", "Shard", "ShardingSpec", "all_gather",
                     "all_slice", "d2d_transfer", "distribute_tensor", "m2m_transfer", "replicate", "shard",
                     "sharding_spec", "api", "collectives", "constants", "mesh", "placement", "spec"),
    f"{REAL}.experimental": ("Compression", "get_loop_iteration_slice", "start_implicit_loop",
                             "update_implicit_loop", "compression"),
    f"{REAL}.profiler": ("ProfilerRegistry", "profile", "schedule", "tensorboard_trace_handler"),
    f"{REAL}.core": ("appliance", "appliance_utils", "compile", "constants", "device",
                     "function_mode", "modes", "name_scope", "tensor"),
    f"{REAL}.utils.benchmark": ("benchmark_dataloader", "utils"),
}


class UnsupportedAPIError(CstorchError, NotImplementedError):
    """A name of the real API that cstorch does not provide (see cstorch.unsupported)."""


def real_name(module: str, name: str = "") -> str:
    """`cstorch.x` -> `cerebras.pytorch.x` (and the name appended)."""
    full = REAL + module[len("cstorch"):] if module.startswith("cstorch") else module
    return f"{full}.{name}" if name else full


def reason(qualified: str) -> str | None:
    """Why the real name `qualified` is not provided (None when it is not listed)."""
    if qualified in UNSUPPORTED:
        return UNSUPPORTED[qualified]
    module, name = qualified.rsplit(".", 1)
    if name in MODULE_NAMES.get(module, ()):
        return UNSUPPORTED[f"{module}.*"]
    return None


def error(qualified: str) -> UnsupportedAPIError:
    return UnsupportedAPIError(f"{qualified} is not supported by cstorch. {reason(qualified)}")


def module_getattr(module: str):
    """A module-level `__getattr__` that raises the listed names' errors (and the usual
    AttributeError for anything else).

    Args:
        module: the module's name (`__name__`).
    """

    def __getattr__(name: str):
        if not name.startswith("_"):
            qualified = real_name(module, name)
            if reason(qualified) is not None:
                raise error(qualified)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


__all__ = ["UNSUPPORTED", "UnsupportedAPIError", "reason", "module_getattr"]
