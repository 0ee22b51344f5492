"""ClusterConfig(num_csx=N): a data-parallel mesh gives the one-device run.

Multi-device checks run in fresh processes (JAX fixes its device count when it
starts): tests/run/multi_device_checks.py with 4 host devices, the GPT example on 1 and 4
devices, and the GPT example as two processes of 2 devices joined on loopback.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import cstorch
from cstorch.distributed import launch as launcher
from cstorch.distributed import processes

ROOT = Path(__file__).resolve().parents[2]
GPT = ROOT / "examples" / "gpt.py"
CHECKS = ROOT / "tests" / "run" / "multi_device_checks.py"
TOL = 1e-5


def _env(devices: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CSTORCH_")}
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return env


def _run(cmd, env, cwd, timeout=300):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-5000:]}"
    return proc.stdout


MULTI_DEVICE_CHECKS = ["same_as_one_device", "staged_batches", "indivisible_batch", "too_many_devices"]


def test_multi_device():
    """Every check of tests/run/multi_device_checks.py, in one process with 4 host devices."""
    out = _run([sys.executable, str(CHECKS), *MULTI_DEVICE_CHECKS], _env(4), ROOT)
    for check in MULTI_DEVICE_CHECKS:
        assert f"ok {check}" in out, out


GPT_ARGS = ["--steps", "8", "--batch-size", "8", "--seq", "32", "--d-model", "32", "--heads", "2",
            "--layers", "2", "--log-steps", "4"]


def _gpt_run(tmp_path, name, num_csx, devices, launch=None):
    report, final = tmp_path / f"{name}.json", tmp_path / f"{name}.pt"
    args = [str(GPT), *GPT_ARGS, "--num-csx", str(num_csx), "--report", str(report), "--save-final", str(final),
            "--checkpoint-steps", "8", "--out-dir", str(tmp_path / f"{name}_ckpt")]
    if launch:
        cmd = [sys.executable, "-m", "cstorch.distributed.launch", "--num-processes", str(launch),
               "--devices-per-process", str(devices), *args]
    else:
        cmd = [sys.executable, *args]
    out = _run(cmd, _env(devices), tmp_path)
    return json.loads(report.read_text())["losses"], torch.load(final), out


def _assert_same_run(a, b):
    (la, pa, _), (lb, pb, _) = a, b
    assert len(la) == len(lb) == 8
    assert max(abs(x - y) for x, y in zip(la, lb)) <= TOL, (la, lb)
    assert la[-1] < la[0] - 0.5, f"the GPT did not learn: {la}"
    assert pa.keys() == pb.keys()
    for k in pa:
        assert (pa[k] - pb[k]).abs().max().item() <= TOL, k


@pytest.fixture(scope="module")
def one_device_gpt(tmp_path_factory):
    return _gpt_run(tmp_path_factory.mktemp("gpt1"), "one", 1, 1)


def test_gpt_four_devices_match_one(one_device_gpt, tmp_path):
    four = _gpt_run(tmp_path, "four", 4, 4)
    assert "num_csx=4" in four[2]
    _assert_same_run(one_device_gpt, four)


@pytest.mark.slow
def test_gpt_two_processes_match_one(one_device_gpt, tmp_path):
    two = _gpt_run(tmp_path, "two", 4, 2, launch=2)
    out = two[2]
    for p in ("[p0] ", "[p1] "):  # both processes trained and saw the losses
        assert f"{p}trained 8 steps (CSX, num_csx=4)" in out, out
        assert f"{p}step 8: loss" in out, out
    _assert_same_run(one_device_gpt, two)
    # both processes called cstorch.save; process 0 wrote the one file, holding the final state
    (ckpt,) = (tmp_path / "two_ckpt").iterdir()
    assert ckpt.name == "checkpoint_8.mdl"
    saved = cstorch.load(str(ckpt))["model"]
    for k, v in two[1].items():
        assert torch.equal(saved[k], v), k


# -- one process: the pieces --------------------------------------------------------------
def test_staged_batch_is_used_only_while_unchanged():
    backend = cstorch.backend("CSX")
    model = torch.nn.Linear(3, 1, bias=False)
    torch.nn.init.ones_(model.weight)
    compiled = cstorch.compile(model, backend)

    @cstorch.trace
    def step(x):
        return compiled(x).sum()

    results = []

    @cstorch.step_closure
    def record(v):
        results.append(v.item())

    x = torch.tensor([1.0, 2.0, 3.0])
    loader = cstorch.utils.data.DataLoader(lambda: [x, x, x])
    for i, batch in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=3)):
        backend.run.stage_batch(batch)
        if i == 1:
            batch.mul_(10)  # changed after staging: the step must see the new values
        record(step(batch))
    assert results == [6.0, 60.0, 60.0]


def test_single_process_without_environment(monkeypatch):
    monkeypatch.delenv(processes.ENV_NUM_PROCESSES, raising=False)
    processes.join_from_environment(cstorch.distributed.ClusterConfig())
    assert processes.process_index() == 0 and processes.is_main_process()


@pytest.mark.parametrize("env, config, message", [
    ({"CSTORCH_NUM_PROCESSES": "2"}, {}, "CSTORCH_PROCESS_ID is not"),
    ({"CSTORCH_NUM_PROCESSES": "2", "CSTORCH_PROCESS_ID": "0"}, {}, "needs a coordinator address"),
    ({"CSTORCH_NUM_PROCESSES": "two"}, {}, "must be an integer, got 'two'"),
    ({"CSTORCH_NUM_PROCESSES": "0"}, {}, "must be >= 1"),
])
def test_process_environment_errors(monkeypatch, env, config, message):
    for k in (processes.ENV_NUM_PROCESSES, processes.ENV_PROCESS_ID, processes.ENV_COORDINATOR):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match=message):
        processes.join_from_environment(cstorch.distributed.ClusterConfig(**config))


def test_launcher_sets_the_environment_and_stops_the_others_on_failure(tmp_path, capfd):
    script = tmp_path / "worker.py"
    # process 1 fails only once process 0 has printed its line (on a loaded machine process 0 may
    # start later than process 1 ends, and the launcher stops it then: nothing would be printed)
    script.write_text(textwrap.dedent("""
        import os, pathlib, sys, time
        print("id", os.environ["CSTORCH_PROCESS_ID"], "of", os.environ["CSTORCH_NUM_PROCESSES"],
              "at", os.environ["CSTORCH_COORDINATOR_ADDRESS"], os.environ["XLA_FLAGS"], flush=True)
        printed = pathlib.Path(__file__).with_name("p0-printed")
        if os.environ["CSTORCH_PROCESS_ID"] == "1":
            deadline = time.monotonic() + 120
            while not printed.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            sys.exit(3)
        printed.touch()
        time.sleep(600)  # process 0 would wait forever for the failed one
    """))
    status = launcher.main(["--num-processes", "2", "--devices-per-process", "3", str(script)])
    out = capfd.readouterr().out
    assert status == 3
    for pid in (0, 1):
        assert f"[p{pid}] id {pid} of 2 at 127.0.0.1:" in out, out
    assert out.count("--xla_force_host_platform_device_count=3") == 2, out


def test_cpu_backend_ignores_num_csx():
    """The eager backends have no mesh: cluster_config is CSX-only."""
    b = cstorch.backend("CPU")
    assert b.cluster_config is None and b.placement is None
    model = torch.nn.Linear(2, 1)
    assert F.mse_loss(model(torch.ones(4, 2)), torch.zeros(4, 1)).item() >= 0
