"""The persistent compile cache (`cstorch_jax/compile_cache.py`): a second process running
the same script loads the compiled step instead of capturing and compiling it, and trains
to bit-identical losses and parameters; a change the step's ops would see (a constant, a
shape) is never served from the cache. The op signature that guards an entry is the same
whether recorded while capturing or by the fake-tensor run of a warm start."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import cstorch_jax
from cstorch_jax import compile_cache

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "compile_cache_script.py"


def _run(cache_dir, *args, enabled=True):
    env = dict(os.environ, PYTHONPATH=str(ROOT), CSTORCH_CACHE="1" if enabled else "0",
               CSTORCH_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True,
                         timeout=900, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_process_loads_the_step_and_trains_identically(tmp_path):
    cold = _run(tmp_path)
    warm = _run(tmp_path)
    assert not cold["from_cache"] and warm["from_cache"]
    assert warm["losses"] == cold["losses"] and warm["params"] == cold["params"]
    assert warm["compile_seconds"] < cold["compile_seconds"]

    # a changed constant (the dropout probability) gives another program, never the cached one
    changed = _run(tmp_path, "--dropout", "0.2")
    reference = _run(tmp_path / "off", "--dropout", "0.2", enabled=False)
    assert not changed["from_cache"]
    assert changed["losses"] == reference["losses"] and changed["params"] == reference["params"]
    assert changed["params"] != cold["params"]
    # ... and the first program is still there for the first configuration
    again = _run(tmp_path)
    assert again["from_cache"] and again["params"] == cold["params"]
    assert not (tmp_path / "off").exists(), "CSTORCH_CACHE=0 must write nothing"


def _step(scale, shape=(16, 8), dtype=torch.float32):
    torch.manual_seed(0)
    w = torch.randn(4, shape[1], requires_grad=True)
    x = torch.randn(*shape).to(dtype)

    def fn(state, batch):
        (w,) = state
        loss = ((batch[0].float() @ w.t()) * scale).relu().sum()
        loss.backward()
        with torch.no_grad():
            w.sub_(0.1 * w.grad)
        return [loss]

    return fn, [w], [x]


def test_the_signature_of_a_fake_run_equals_the_capture_and_sees_every_change():
    fn, state, batch = _step(0.5)
    captured = cstorch_jax.capture(fn, state, batch)
    sig, specs, _ = cstorch_jax.trace_signature(fn, state, batch)
    assert sig == captured.signature and len(sig) == 64
    assert specs == list(captured.output_specs)
    assert cstorch_jax.trace_signature(fn, state, batch)[0] == sig  # deterministic
    for other in (_step(0.6), _step(0.5, shape=(8, 8)), _step(0.5, dtype=torch.float64)):
        assert cstorch_jax.trace_signature(*other)[0] != sig


def test_an_unreadable_entry_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv(compile_cache.ENV_ENABLED, "1")
    monkeypatch.setenv(compile_cache.ENV_DIR, str(tmp_path))
    fn, state, batch = _step(0.5)
    ex = cstorch_jax.Executable(cstorch_jax.capture(fn, state, batch))
    assert ex.save_to_cache("k")
    sig = ex.captured.signature
    assert compile_cache.candidate("k") and compile_cache.load("k", sig) is not None
    assert compile_cache.load("k", "0" * 64) is None  # another signature: never a partial match
    (tmp_path / "steps" / "k" / f"{sig}.pkl").write_bytes(b"garbage")
    assert compile_cache.load("k", sig) is None


def test_the_cache_is_off_in_the_test_suite_and_by_environment(monkeypatch):
    monkeypatch.setenv(compile_cache.ENV_ENABLED, "0")
    assert compile_cache.directory() is None
    monkeypatch.setenv(compile_cache.ENV_ENABLED, "1")
    monkeypatch.setenv(compile_cache.ENV_DIR, "")
    assert compile_cache.directory() is None


@pytest.mark.parametrize("var", ["CSTORCH_CHANNELS_LAST", "CSTORCH_FFI_GEMM", "CSTORCH_GEMM_MIN_MACS",
                                 "CSTORCH_GEMM_MIN_DEPTH"])
def test_a_graph_pass_switch_changes_the_engine_fingerprint(var, monkeypatch):
    """The passes run after the op signature is recorded, so the switches that change
    what they do must be part of every entry's key."""
    monkeypatch.delenv(var, raising=False)
    before = compile_cache.engine_fingerprint("cpu", {})
    monkeypatch.setenv(var, "0")
    assert compile_cache.engine_fingerprint("cpu", {}) != before
