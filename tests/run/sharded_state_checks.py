"""Checks of the sharded-state mode (`cstorch.backends.csx.cluster.shard_state`) that
need several JAX devices, run by tests/run/test_sharded_state.py in fresh processes:

    python tests/run/sharded_state_checks.py <check> [<check> ...]                  # 4 host devices
    python tests/run/sharded_state_checks.py compile_cache CACHE_DIR                 # 4 host devices
    python -m cstorch.distributed.launch --num-processes 2 --devices-per-process 2 \\
        tests/run/sharded_state_checks.py two_processes OUT_DIR                     # 2 x 2 devices

Each check raises (exit status 1) when it fails and prints "ok <check>" when it holds.
The model is the GPT of examples/gpt.py, tiny (1 block, d 32), trained with AdamW.
"""
from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

import cstorch
import cstorch_jax
from cstorch._backend import _reset_backend

ROOT = Path(__file__).resolve().parents[2]
SEQ, D_MODEL, HEADS, LAYERS, BATCH = 16, 32, 2, 1, 8
STEPS, SAVE_AT = 10, 5  # train 10 steps; checkpoints hold the state after step 5
TOL = 1e-5
MEMORY_BOUND = 0.25 * 1.05  # sharded state bytes per device / replicated, on 4 devices


def _gpt_module():
    spec = importlib.util.spec_from_file_location("examples_gpt", ROOT / "examples" / "gpt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GPT = _gpt_module()


def batches(n: int = STEPS, seed: int = 0) -> list:
    """Random bytes, each to be followed by the next byte value (learnable in a few steps)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randint(0, 256, (BATCH, SEQ), generator=g)
        out.append((x, (x + 1) % 256))
    return out


def gpt_step(num_csx: int, shard: bool):
    """A fresh CSX backend on num_csx devices (state split when `shard`), the tiny GPT,
    its AdamW and the traced training step."""
    _reset_backend()
    cstorch.backends.csx.cluster.shard_state = shard
    backend = cstorch.backend("CSX", cluster_config=cstorch.distributed.ClusterConfig(num_csx=num_csx))
    torch.manual_seed(0)
    model = GPT.ByteGPT(SEQ, D_MODEL, HEADS, LAYERS)
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    @cstorch.trace
    def step(x, y):
        loss = compiled(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return backend, model, opt, step


class Run:
    """One CSX run of the tiny GPT: per-step losses, the final state (model and AdamW,
    cloned), the traced step, and what the run saw on its devices."""

    def __init__(self, num_csx: int, shard: bool, data: list, resume_from=None, save_to=None):
        backend, model, opt, step = gpt_step(num_csx, shard)
        if resume_from is not None:
            saved = cstorch.load(str(resume_from))
            model.load_state_dict(saved["model"])
            opt.load_state_dict(saved["optimizer"])

        self.losses: list[float] = []

        @cstorch.step_closure
        def record(loss):
            self.losses.append(loss.item())

        loader = cstorch.utils.data.DataLoader(lambda: data)
        for i, (x, y) in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=len(data))):
            record(step(x, y))
            if i == 0:  # what this process's devices hold of the embedding (the next step donates the array)
                backend.run.window.launch()  # on one device the step waits in its window until launched
                (emb,) = backend.run.device_state.device_arrays([model.tok.weight])
                self.embedding = (emb.is_fully_addressable, [tuple(s.data.shape) for s in emb.addressable_shards])
            if save_to is not None and i + 1 == SAVE_AT:
                state = {"model": model.state_dict(), "optimizer": opt.state_dict()}
                # from the devices' shards first (nothing gathered), then the H5 file (gathered)
                self.written_from_device = backend.run.device_copies_for_writing([state["model"]["tok.weight"]])
                cstorch.checkpoint.save_sharded(state, save_to / "orbax")
                cstorch.save(state, str(save_to / "state.mdl"))
        self.state = {**{f"model.{k}": v.clone() for k, v in model.state_dict().items()},
                      **{f"optimizer.{i}.{k}": v.clone() for i, s in enumerate(opt.state.values())
                         for k, v in s.items()}}
        self.step = step


def close(a, b, what: str, tol: float = TOL) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), (a.keys(), b.keys())
        for k in a:
            close(a[k], b[k], f"{what} {k}", tol)
        return
    diff = (torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)).abs().max().item()
    assert diff <= tol, f"{what}: differs by {diff} > {tol}"


def identical(a: dict, b: dict, what: str) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{what} {k} differs"


def replicated_report(num_csx: int, data: list):
    """The StepReport of the same step compiled (not run) with replicated state."""
    return gpt_step(num_csx, False)[3].lower(*data[0])


def check_memory(sharded, replicated, n: int) -> None:
    """Per-device state bytes (XLA's argument and alias sizes) at most 1/n of the
    replicated program's + 5 %, and the placement table agrees with XLA's sizes."""
    ms, mr = sharded.memory, replicated.memory
    assert ms.num_devices == mr.num_devices == n
    inputs = [s for _, s in sharded.inputs]
    batch_bytes = sum(int(np.prod(s.shape)) * 4 for s in inputs if s.shape) // n  # int64 batches are int32
    other = 4 * sum(1 for s in inputs if not s.shape) + 8  # 0-d hyper-parameters and the RNG key, replicated
    for m in (ms, mr):
        assert m.argument_bytes == m.state_bytes + batch_bytes + other, (m, batch_bytes, other)
        assert m.alias_bytes == m.donated_bytes  # the update happens in place, slice by slice
    assert ms.state_bytes <= mr.state_bytes * MEMORY_BOUND * 4 / n, (ms.state_bytes, mr.state_bytes)
    assert ms.alias_bytes <= mr.alias_bytes * MEMORY_BOUND * 4 / n, (ms.alias_bytes, mr.alias_bytes)
    state = ms.state
    assert state.layout_of("model.tok.weight") == f"split dim 0 / {n}"
    assert state.layout_of("optimizer0.state.0.exp_avg") == f"split dim 0 / {n}"
    assert state.layout_of("optimizer0.state.0.step") == "replicated"
    assert mr.state.split == 0
    for name, spec, where, _ in state.rows:  # every dimension here is a multiple of 4: only 0-d tensors stay whole
        assert (where == "replicated") == spec.endswith("[]"), (name, spec, where)
    summary = sharded.summary().as_dict()
    assert summary["devices"] == str(n) and "split" in summary["state placement"]


def _runs(tmp: Path) -> dict:
    data = batches()
    (tmp / "one").mkdir()
    (tmp / "sharded").mkdir()
    return {"data": data, "one": Run(1, False, data, save_to=tmp / "one"),
            "sharded": Run(4, True, data, save_to=tmp / "sharded")}


_CACHE: dict = {}


def runs() -> dict:
    if not _CACHE:
        _CACHE["tmp"] = Path(tempfile.mkdtemp())
        _CACHE.update(_runs(_CACHE["tmp"]))
    return _CACHE


# -- the checks ----------------------------------------------------------------------------
def check_same_as_one_device():
    """10 AdamW steps on 4 devices with sharded state equal the one-device run; each
    device holds a quarter of the state (XLA's memory analysis), the program gathers
    the weights, and every device really holds only its slice."""
    r = runs()
    one, sharded = r["one"], r["sharded"]
    assert len(sharded.losses) == STEPS
    close(one.losses, sharded.losses, "losses")
    close(one.state, sharded.state, "state")
    assert sharded.losses[-1] < sharded.losses[0] - 0.1, sharded.losses
    check_memory(sharded.step.report, replicated_report(4, r["data"]), 4)
    hlo = sharded.step.executable.compiled.as_text()
    assert "all-gather" in hlo, "no all-gather in the sharded program"
    assert sharded.embedding == (True, [(64, D_MODEL)] * 4)


def check_h5_resume():
    """The sharded run's H5 checkpoint (gathered) resumes on 4 sharded devices bit for
    bit; a one-device run's resumes on one device bit for bit. Across device counts
    (the sharded checkpoint on one device, the one-device checkpoint sharded) a resumed
    run is the other run within 1e-5: the reductions sum in another order."""
    r = runs()
    tmp, rest = r["tmp"], r["data"][SAVE_AT:]
    sharded, one = r["sharded"], r["one"]
    again = Run(4, True, rest, resume_from=tmp / "sharded" / "state.mdl")
    assert again.losses == sharded.losses[SAVE_AT:], (again.losses, sharded.losses[SAVE_AT:])
    identical(again.state, sharded.state, "resumed on 4 devices:")
    again_one = Run(1, False, rest, resume_from=tmp / "one" / "state.mdl")
    assert again_one.losses == one.losses[SAVE_AT:], (again_one.losses, one.losses[SAVE_AT:])
    identical(again_one.state, one.state, "resumed on one device:")
    on_one = Run(1, False, rest, resume_from=tmp / "sharded" / "state.mdl")
    close(on_one.losses, sharded.losses[SAVE_AT:], "losses resumed on one device")
    close(on_one.state, sharded.state, "state resumed on one device")
    back = Run(4, True, rest, resume_from=tmp / "one" / "state.mdl")
    close(back.losses, one.losses[SAVE_AT:], "losses of a one-device checkpoint resumed sharded")
    close(back.state, one.state, "state of a one-device checkpoint resumed sharded")


def check_orbax_written_from_shards():
    """`save_sharded` wrote the devices' arrays (split over 4 devices) and holds the
    same bits as the gathered H5 file; `cstorch.load` reads it on this one process,
    and the engine restores it split over 2 devices."""
    r = runs()
    tmp = r["tmp"]
    (array,) = r["sharded"].written_from_device
    assert array is not None and len(array.sharding.device_set) == 4 and not array.sharding.is_fully_replicated
    h5 = cstorch.load(str(tmp / "sharded" / "state.mdl"))
    orbax = cstorch.load(str(tmp / "sharded" / "orbax"))
    flat_h5, flat_orbax = _flat(h5), _flat(orbax)
    assert flat_h5.keys() == flat_orbax.keys()
    for k, v in flat_h5.items():
        assert torch.equal(torch.as_tensor(v), torch.as_tensor(flat_orbax[k])), k
    two = cstorch_jax.FullyShardedDataParallel(2)
    names = [k for k, v in flat_h5.items() if isinstance(v, torch.Tensor) and v.dtype == torch.float32]
    shardings = {k: two.state_sharding(tuple(flat_h5[k].shape)) for k in names}
    restored, _ = cstorch_jax.orbax.load_arrays(str(tmp / "sharded" / "orbax"), shardings)
    for k in names:
        a = restored[k]
        assert a.sharding == shardings[k], k
        assert np.array_equal(np.asarray(a), flat_h5[k].numpy()), k
    emb = restored["model.tok.weight"]
    assert [s.data.shape for s in emb.addressable_shards] == [(128, D_MODEL)] * 2
    # the RNG key (uint32[2]) is no state tensor: replicated, though 2 devices divide its length
    assert cstorch_jax.DeviceState(0, two).rng_key.sharding.is_fully_replicated


def _flat(state: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in state.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, f"{key}."))
        elif isinstance(v, list):
            out.update(_flat(dict(enumerate(v)), f"{key}."))
        else:
            out[key] = v.clone() if isinstance(v, torch.Tensor) else v
    return out


def check_two_processes(out_dir: str):
    """Run as 2 processes x 2 devices: the same 10 steps, each process holding only its
    devices' slices; process 0 writes the losses and state, every process writes its
    shards of the orbax checkpoint; the test compares them with a one-device run."""
    out = Path(out_dir)
    data = batches()
    sharded = Run(4, True, data, save_to=out)
    assert sharded.embedding == (False, [(64, D_MODEL)] * 2)
    check_memory(sharded.step.report, replicated_report(4, data), 4)
    if cstorch_jax.process_index() == 0:
        torch.save({"losses": sharded.losses, "state": sharded.state}, out / "result.pt")


def check_compile_cache(cache_dir: str):
    """The compile cache on (in `cache_dir`), 4 host devices: a small MLP trained 3 AdamW
    steps with replicated state on 4 devices, with sharded state on 4, on one device,
    then all three again. The first three compile (the sharded program is not the
    replicated one's entry: the key names the placement); the last three load their own
    entries (the one-device program onto one device, not the process's 4) and repeat
    their first run bit for bit; every run equals eager torch, and only the sharded runs'
    weights are split over the devices."""
    from cstorch_jax import compile_cache

    compile_cache.configure(cache_dir, enabled=True)
    g = torch.Generator().manual_seed(3)
    data = [(torch.randn(8, 8, generator=g), torch.randn(8, 4, generator=g)) for _ in range(3)]
    eager = MLPRun("CPU", 1, False, data)
    first = {}
    for from_cache in (False, True):
        for num_csx, shard in ((4, False), (4, True), (1, False)):
            run = MLPRun("CSX", num_csx, shard, data)
            what = f"num_csx={num_csx}, shard_state={shard}, from the cache: {from_cache}"
            assert run.from_cache == from_cache, what
            assert run.weight_split == (shard and num_csx > 1), what
            close(eager.losses, run.losses, f"losses, {what}")
            close(eager.state, run.state, f"state, {what}")
            if from_cache:
                assert run.losses == first[num_csx, shard].losses, what
                identical(run.state, first[num_csx, shard].state, what)
            first.setdefault((num_csx, shard), run)


class MLPRun:
    """A 2-layer MLP trained with AdamW on `data` (every dimension a multiple of 4) on
    the CPU backend or on `num_csx` CSX devices: the losses, the final state, and for CSX
    whether the step came from the compile cache and whether the first weight is split."""

    def __init__(self, backend_type: str, num_csx: int, shard: bool, data: list):
        _reset_backend()
        cstorch.backends.csx.cluster.shard_state = shard
        if backend_type == "CSX":
            backend = cstorch.backend("CSX", cluster_config=cstorch.distributed.ClusterConfig(num_csx=num_csx))
        else:
            backend = cstorch.backend("CPU")
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
        compiled = cstorch.compile(model, backend)
        opt = cstorch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)

        @cstorch.trace
        def step(x, y):
            loss = torch.nn.functional.mse_loss(compiled(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        self.losses: list[float] = []

        @cstorch.step_closure
        def record(loss):
            self.losses.append(loss.item())

        loader = cstorch.utils.data.DataLoader(lambda: data)
        for i, (x, y) in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=len(data))):
            record(step(x, y))
            if backend_type == "CSX" and i == len(data) - 1:  # the device state is read back after the loop
                self.from_cache = step.executable.from_cache
                (w,) = backend.run.device_state.device_arrays([model[0].weight])
                self.weight_split = not w.sharding.is_fully_replicated
        self.state = {**{f"model.{k}": v.clone() for k, v in model.state_dict().items()},
                      **{f"optimizer.{i}.{k}": v.clone() for i, s in enumerate(opt.state.values())
                         for k, v in s.items()}}
        _reset_backend()
        cstorch.backends.csx.cluster.shard_state = False


CHECKS = {name.removeprefix("check_"): fn for name, fn in globals().items() if name.startswith("check_")}

if __name__ == "__main__":
    name, *args = sys.argv[1:] if len(sys.argv) > 1 else [""]
    if name in ("two_processes", "compile_cache"):  # checks that take a directory
        CHECKS[name](*args)
        print(f"ok {name}", flush=True)
    else:
        for name in sys.argv[1:]:
            CHECKS[name]()
            print(f"ok {name}", flush=True)
