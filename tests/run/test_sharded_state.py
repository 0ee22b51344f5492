"""The sharded-state mode: `cstorch.backends.csx.cluster.shard_state = True` with
`ClusterConfig(num_csx=N)` splits every parameter, buffer and optimizer-state tensor
over the N devices (FSDP / ZeRO-3).

The multi-device checks run in fresh processes (tests/run/sharded_state_checks.py): on 4
host devices a tiny GPT trained 10 AdamW steps equals the one-device run with a quarter
of the state per device; its H5 checkpoint resumes on 4 devices (bit for bit) and on
one; its orbax checkpoint, written from the device shards, restores on another device
count; and (slow) the same run as two processes of two devices.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import cstorch
import cstorch_jax
from cstorch_jax import sharding
from cstorch_jax.explore import describe_sharding

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "tests" / "run" / "sharded_state_checks.py"


def _env(devices: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CSTORCH_")}
    env["CSTORCH_CACHE"] = "0"  # as in every test (tests/conftest.py); the cache check turns it on itself
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return env


def _run(cmd, env, timeout=900) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\nstdout:\n{proc.stdout[-5000:]}\nstderr:\n{proc.stderr[-5000:]}"
    return proc.stdout


@pytest.fixture(autouse=True)
def default_flags():
    yield
    cstorch.backends.csx.cluster.shard_state = cstorch.backends.DEFAULT


FOUR_DEVICE_CHECKS = ["same_as_one_device", "h5_resume", "orbax_written_from_shards"]


def test_four_devices():
    """Every check of tests/run/sharded_state_checks.py, in one process with 4 host devices."""
    out = _run([sys.executable, str(CHECKS), *FOUR_DEVICE_CHECKS], _env(4))
    for check in FOUR_DEVICE_CHECKS:
        assert f"ok {check}" in out, out


@pytest.mark.slow
def test_two_processes_of_two_devices(tmp_path):
    """2 processes x 2 devices, sharded over all 4: the one-device run's losses and
    parameters; every process wrote its own shards of the orbax checkpoint, which holds
    the bits of the gathered H5 file."""
    out = _run([sys.executable, "-m", "cstorch.distributed.launch", "--num-processes", "2",
                "--devices-per-process", "2", str(CHECKS), "two_processes", str(tmp_path)], _env(2))
    assert "[p0] ok two_processes" in out and "[p1] ok two_processes" in out, out
    sys.path.insert(0, str(CHECKS.parent))
    try:
        import sharded_state_checks as checks
    finally:
        sys.path.remove(str(CHECKS.parent))
    result = torch.load(tmp_path / "result.pt")
    one = checks.Run(1, False, checks.batches())
    checks.close(one.losses, result["losses"], "losses")
    checks.close(one.state, result["state"], "state")
    for process in (0, 1):
        assert any((tmp_path / "orbax" / "arrays" / f"ocdbt.process_{process}").iterdir()), process
    h5, orbax = checks._flat(cstorch.load(str(tmp_path / "state.mdl"))), checks._flat(
        cstorch.load(str(tmp_path / "orbax")))
    assert h5.keys() == orbax.keys()
    for k, v in h5.items():
        assert torch.equal(torch.as_tensor(v), torch.as_tensor(orbax[k])), k


def test_compile_cache_keeps_sharded_and_replicated_programs_apart(tmp_path):
    """With the compile cache on (in tmp_path), on 4 host devices: a replicated run, a
    sharded run, then both again loaded from the cache; each equals eager torch, and the
    sharded program is never the replicated one's cache entry (nor the reverse)."""
    out = _run([sys.executable, str(CHECKS), "compile_cache", str(tmp_path)], _env(4))
    assert "ok compile_cache" in out, out


# -- one process: the pieces --------------------------------------------------------------
@pytest.mark.parametrize("shape, n, dim", [
    ((256, 32), 4, 0), ((3, 8), 4, 1), ((2, 8), 4, 1), ((3, 5), 4, None), ((), 4, None), ((8,), 1, None),
    ((4, 4), 4, 0), ((0, 8), 4, 1),
])
def test_the_rule_splits_the_first_dimension_the_devices_divide(shape, n, dim):
    assert sharding.shard_dim(shape, n) == dim
    spec = sharding.partition_spec(shape, n, "data")
    assert tuple(spec) == (() if dim is None else (*([None] * dim), "data"))


def test_one_device_ignores_the_flag_and_reports_one_device():
    cstorch.backends.csx.cluster.shard_state = True
    backend = cstorch.backend("CSX")
    assert isinstance(backend.placement, cstorch_jax.SingleDevice) and backend.shard_state
    model = torch.nn.Linear(4, 2)
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)

    @cstorch.trace
    def step(x):
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    mem = step.lower(torch.ones(2, 4)).memory
    assert mem.num_devices == 1 and mem.state.split == 0
    assert mem.state.layout_of("model.weight") == "one device"
    # weight and bias, and the param group's lr and weight decay (0-d float32 state tensors)
    assert mem.state_bytes == (4 * 2 + 2 + 2) * 4 and "model.weight" in repr(mem.state)
    assert "<details>" in mem._repr_html_()


def test_the_flag_is_a_bool_read_when_the_backend_is_made():
    with pytest.raises(ValueError, match="shard_state must be True or False, got 1"):
        cstorch.backends.csx.cluster.shard_state = 1
    cstorch.backend("CSX")
    cstorch.backends.csx.cluster.shard_state = False  # the value the backend has: fine
    with pytest.raises(RuntimeError, match="read when the CSX backend is created"):
        cstorch.backends.csx.cluster.shard_state = True
    assert cstorch.backends.csx.cluster.shard_state is False


def test_describe_sharding_names_the_split_dimensions():
    class Split:
        num_devices = 4

        def __init__(self, local):
            self.local = local

        def shard_shape(self, shape):
            return self.local

    assert describe_sharding(Split((64, 32)), (256, 32)) == "split dim 0 / 4"
    assert describe_sharding(Split((256, 32)), (256, 32)) == "replicated"
    assert describe_sharding(Split((128, 16)), (256, 32)) == "split dim 0 / 2, dim 1 / 2"


def test_save_sharded_without_a_run_writes_the_host_values(tmp_path):
    """Off CSX (or between runs) every value comes from the host; the directory is the
    cstorch orbax format and is never overwritten."""
    cstorch.backend("CPU")
    model = torch.nn.Linear(3, 2)
    state = {"model": model.state_dict(), "step": 7, "name": "x"}
    cstorch.checkpoint.save_sharded(state, tmp_path / "ckpt")
    loaded = cstorch.load(str(tmp_path / "ckpt"))
    assert loaded["step"] == 7 and loaded["name"] == "x"
    for k, v in model.state_dict().items():
        assert torch.equal(loaded["model"][k], v), k
    with pytest.raises(FileExistsError, match="already exists"):
        cstorch.checkpoint.save_sharded(state, tmp_path / "ckpt")


def test_save_sharded_mid_run_writes_the_device_values(tmp_path):
    """On CSX between steps: views of the state the device holds are written from the
    device arrays, the rest (an int64 buffer computed as int32, a lazily loaded tensor,
    a fresh tensor) from the host; every value is the step's."""
    backend = cstorch.backend("CSX")
    model = torch.nn.BatchNorm1d(3)
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.5)
    cstorch.save({"w": torch.arange(4.0)}, str(tmp_path / "other.mdl"))
    lazy = cstorch.load(str(tmp_path / "other.mdl"))["w"]

    @cstorch.trace
    def step(x):
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    x = torch.tensor([[1.0, 2.0, 3.0], [3.0, 1.0, 0.0]])
    loader = cstorch.utils.data.DataLoader(lambda: [x, x])
    for i, batch in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=2)):
        step(batch)
        if i == 1:
            state = {"model": model.state_dict(), "lazy": lazy, "fresh": torch.ones(2)}
            arrays = backend.run.device_copies_for_writing(
                [state["model"]["weight"], state["model"]["num_batches_tracked"], lazy, state["fresh"]])
            assert [a is not None for a in arrays] == [True, False, False, False]
            cstorch.checkpoint.save_sharded(state, tmp_path / "mid")
    loaded = cstorch.load(str(tmp_path / "mid"))
    for k, v in model.state_dict().items():  # the host values after the run: the last step's
        assert torch.equal(loaded["model"][k], v), k
    assert loaded["model"]["num_batches_tracked"].item() == 2
    assert torch.equal(loaded["lazy"], torch.arange(4.0)) and torch.equal(loaded["fresh"], torch.ones(2))
