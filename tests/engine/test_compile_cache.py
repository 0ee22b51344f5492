"""The persistent compile cache (`cstorch_jax/compile_cache.py`): a second process running
the same script loads the compiled step instead of capturing and compiling it, and trains
to bit-identical losses and parameters; a change the step's ops would see (a constant, a
shape) is never served from the cache. The op signature that guards an entry is the same
whether recorded while capturing or by the fake-tensor run of a warm start.

Reliability (issue 29), each against a run with the cache off: the step's body runs once
per process whatever the lookup finds; a user decomposition added, removed or changed
never loads another configuration's program; the key names the CPU's features and the
decomposition and lowering tables; a pickle written into the cache never runs; a damaged
entry is removed with one warning and the step compiled again; killed writers' temporary
files are removed. (The fuzz of entries: test_compile_cache_fuzz.py.)"""
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

ROOT = Path(__file__).resolve().parents[2]
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
    assert cold["body_runs"] == warm["body_runs"] == 1  # the report of the loaded step included
    assert warm["losses"] == cold["losses"] and warm["params"] == cold["params"]
    assert warm["compile_seconds"] < cold["compile_seconds"]

    # a changed constant (the dropout probability) gives another program, never the cached one
    changed = _run(tmp_path, "--dropout", "0.2")
    reference = _run(tmp_path / "off", "--dropout", "0.2", enabled=False)
    assert not changed["from_cache"] and changed["body_runs"] == 1
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
    devices = ex.placement.devices
    assert compile_cache.load("k", sig, devices) is not None
    assert compile_cache.load("k", "0" * 64, devices) is None  # another signature: never a partial match
    (entry,) = (tmp_path / "steps" / "k").glob(f"{sig}*")
    entry.write_bytes(b"garbage")
    with pytest.warns(compile_cache.CompileCacheWarning, match="CSTORCH_CACHE=0"):
        assert compile_cache.load("k", sig, devices) is None
    assert not entry.exists()


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


# -- reliability (issue 29): the cache returns only what a cache-off run compiles ----------------------------

def _cache_on(monkeypatch, folder):
    monkeypatch.setenv(compile_cache.ENV_ENABLED, "1")
    monkeypatch.setenv(compile_cache.ENV_DIR, str(folder))


def _train(cache: bool, scale: float = 1.0, steps: int = 2, report: bool = False) -> dict:
    """A tiny CSX training run in this process on a fresh backend (the cache as the environment
    says when `cache`, else off): Linear-GELU-Linear, SGD, squared error times `scale` and times a
    Python `random` draw (a constant of the graph). The losses, the final parameters, whether the
    program came from the cache, how often the step's body ran, the report's graph hash."""
    import random

    import cstorch
    from cstorch._backend import _reset_backend

    _reset_backend()
    saved = compile_cache._settings["enabled"]
    if not cache:
        compile_cache.configure(enabled=False)
    try:
        torch.manual_seed(0)
        random.seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 4))
        backend = cstorch.backend("CSX")
        cstorch.backends.csx.performance.progress = False
        compiled = cstorch.compile(model, backend)
        opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
        body_runs = []

        @cstorch.trace
        def train_step(x, y):
            body_runs.append(1)
            draw = 1.0 + random.random()
            loss = ((compiled(x) - y) ** 2).mean() * (scale * draw)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        g = torch.Generator().manual_seed(1)
        batches = [(torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)) for _ in range(steps)]
        losses = []
        for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: batches),
                                                    num_steps=steps):
            losses.append(float(train_step(x, y)))
        graph_hash = train_step.report.captured.graph_hash if report else None
        return {"losses": losses, "params": [p.detach().clone() for p in model.parameters()],
                "from_cache": train_step.executable.from_cache, "body_runs": len(body_runs),
                "graph_hash": graph_hash}
    finally:
        compile_cache._settings["enabled"] = saved
        _reset_backend()


def _same(a: dict, b: dict) -> bool:
    return a["losses"] == b["losses"] and all(torch.equal(x, y) for x, y in zip(a["params"], b["params"]))


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / "steps").glob("*/*") if not p.name.endswith(".part"))


def test_the_step_body_runs_once_however_the_lookup_ends(tmp_path, monkeypatch):
    """An entry exists for the key but the code changed (a miss after the lookup), then a hit:
    the body (a Python `random` draw, a call counter) runs once each time, and every run equals
    a cache-off run; the report of a loaded program shows the cache-off graph without running
    the body again."""
    _cache_on(monkeypatch, tmp_path)
    first = _train(True, scale=1.0)
    assert not first["from_cache"] and first["body_runs"] == 1
    assert _same(first, _train(False, scale=1.0))
    reference = _train(False, scale=2.0, report=True)
    changed = _train(True, scale=2.0)  # same key, another signature
    assert not changed["from_cache"] and changed["body_runs"] == 1
    assert _same(changed, reference)
    hit = _train(True, scale=2.0, report=True)
    assert hit["from_cache"] and hit["body_runs"] == 1
    assert _same(hit, reference) and hit["graph_hash"] == reference["graph_hash"]


def _decomposed(kind: str):
    """Register a decomposition of aten.gelu of `kind` (None: none); returns an undo function."""
    from cstorch.compiler_hints import register_decomposition, remove_decomposition

    if kind is None:
        return lambda: None
    if kind == "cube":
        def gelu(x, approximate="none"):
            return x * x * x
    elif kind == "square":
        def gelu(x, approximate="none"):
            return x * x
    else:  # the same code, a behaviour set by an object's attribute the code cannot show
        class Config:
            pass

        config = Config()
        config.power = int(kind.removeprefix("power"))

        def gelu(x, approximate="none"):
            out = x
            for _ in range(config.power - 1):
                out = out * x
            return out
    register_decomposition(torch.ops.aten.gelu.default)(gelu)
    return lambda: remove_decomposition(torch.ops.aten.gelu.default)


def _train_decomposed(kind, cache: bool) -> dict:
    undo = _decomposed(kind)
    try:
        return _train(cache)
    finally:
        undo()


def test_a_user_decomposition_is_part_of_the_cached_program(tmp_path, monkeypatch):
    """Adding, removing or changing a `cstorch.register_decomposition` (whose effect the op
    signature of the step cannot see) never loads another configuration's program."""
    _cache_on(monkeypatch, tmp_path)
    plain = _train_decomposed(None, True)
    for kind in ("cube", None, "square", "power2", "power3"):
        reference = _train_decomposed(kind, False)
        got = _train_decomposed(kind, True)
        assert _same(got, reference), kind
        if kind is not None:
            assert not _same(got, plain), kind
    assert _train_decomposed("power3", True)["from_cache"]


@pytest.mark.slow
def test_a_user_decomposition_changed_between_processes(tmp_path):
    cold = _run(tmp_path, "--model", "mlp")
    cube = _run(tmp_path, "--model", "mlp", "--decomp", "cube")
    reference = _run(tmp_path / "off", "--model", "mlp", "--decomp", "cube", enabled=False)
    assert not cube["from_cache"] and cube["losses"] == reference["losses"] and cube["params"] == reference["params"]
    assert cube["params"] != cold["params"]
    again = _run(tmp_path, "--model", "mlp")
    assert again["from_cache"] and again["params"] == cold["params"] and again["body_runs"] == 1


def test_the_key_names_the_cpu_features(tmp_path, monkeypatch):
    """A cache folder shared by machines whose CPUs differ: code compiled for instructions
    this CPU lacks is never loaded."""
    before = compile_cache.engine_fingerprint("cpu", {})
    for flags in ("fpu sse sse2", "fpu sse sse2 avx avx2 avx512f"):
        fake = tmp_path / f"cpuinfo-{len(flags)}"
        fake.write_text(f"processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: {flags}\n\n")
        monkeypatch.setattr(compile_cache, "CPUINFO", fake)
        assert compile_cache.engine_fingerprint("cpu", {}) != before
        before = compile_cache.engine_fingerprint("cpu", {})


def test_the_lowering_and_decomposition_tables_are_in_the_fingerprint(monkeypatch):
    from cstorch_jax.lowering import registry

    before = compile_cache.engine_fingerprint("cpu", {})
    op = torch.ops.aten.relu.default
    monkeypatch.setitem(registry.LOWERINGS, op, lambda x: x)
    assert compile_cache.engine_fingerprint("cpu", {}) != before
    monkeypatch.undo()
    assert compile_cache.engine_fingerprint("cpu", {}) == before
    undo = _decomposed("cube")
    try:
        assert compile_cache.engine_fingerprint("cpu", {}) != before
    finally:
        undo()
    assert compile_cache.engine_fingerprint("cpu", {}) == before


class _Payload:
    """Unpickling this would create `path`."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _one_warning(caught, path: Path) -> None:
    msgs = [str(w.message) for w in caught if "cache" in str(w.message).lower()]
    assert len(msgs) == 1, msgs
    assert str(path) in msgs[0] and "CSTORCH_CACHE=0" in msgs[0], msgs[0]


def test_a_foreign_pickle_in_the_cache_never_runs(tmp_path, monkeypatch):
    import pickle
    import warnings

    cache = tmp_path / "cache"
    _cache_on(monkeypatch, cache)
    marker = tmp_path / "marker"
    reference = _train(False)
    assert _same(_train(True), reference)
    entries = _entries(cache)
    assert entries
    payload = pickle.dumps({"format": 1, "graph": _Payload(marker), "program": _Payload(marker)})
    for path in entries:
        path.write_bytes(payload)
        path.with_suffix(".pkl").write_bytes(payload)  # the name the cache used to read, too
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _train(True)
    assert not marker.exists(), "a pickle in the cache ran"
    assert not got["from_cache"] and _same(got, reference)
    _one_warning(caught, entries[0])
    assert _train(True)["from_cache"] and not marker.exists()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "field removed"])
def test_a_damaged_entry_is_dropped_with_one_warning(damage, tmp_path, monkeypatch):
    import warnings

    _cache_on(monkeypatch, tmp_path)
    reference = _train(False)
    _train(True)
    (entry,) = _entries(tmp_path)
    data = entry.read_bytes()
    if damage == "garbage":
        entry.write_bytes(b"\x80\x04garbage" + data[10:])
    elif damage == "truncated":
        entry.write_bytes(data[: len(data) * 2 // 3])
    elif damage == "empty":
        entry.write_bytes(b"")
    else:  # a well-formed, correctly checksummed entry that lacks a field
        header, blob = compile_cache.unpack(data)
        del header["graph"]
        entry.write_bytes(compile_cache.pack(header, blob))
    for _ in range(2):  # dropped once: the second run finds the fresh entry
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = _train(True)
        assert _same(got, reference)
        if _ == 0:
            assert not got["from_cache"]
            _one_warning(caught, entry)
        else:
            assert got["from_cache"] and not [w for w in caught if "cache" in str(w.message).lower()]


def test_leftovers_of_killed_writers_are_removed(tmp_path, monkeypatch):
    import socket
    import time

    _cache_on(monkeypatch, tmp_path)
    _train(True)
    (entry,) = _entries(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    dead_writer = entry.parent / f".tmp-{host}-{int(dead.stdout)}-abc.part"
    old = entry.parent / f".tmp-otherhost-{os.getpid()}-def.part"
    alive = entry.parent / f".tmp-{host}-{os.getpid()}-ghi.part"
    for p in (dead_writer, old, alive):
        p.write_bytes(b"partial")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    entry.unlink()  # the next run stores again
    _train(True)
    assert not dead_writer.exists() and not old.exists() and alive.exists()


@pytest.mark.parametrize("where", ["a_file", "under_a_file", "steps_a_file"])
def test_a_cache_folder_that_cannot_be_used_turns_the_cache_off_with_one_warning(where, tmp_path, monkeypatch):
    """CSTORCH_CACHE_DIR naming a regular file (or a path under one, or a cache whose `steps`
    folder is a file): the run trains as with the cache off and one CompileCacheWarning names
    the folder and the cause (it used to fail every run with NotADirectoryError)."""
    import warnings

    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    folder = {"a_file": blocker, "under_a_file": blocker / "cache", "steps_a_file": tmp_path / "cache"}[where]
    if where == "steps_a_file":
        folder.mkdir()
        (folder / "steps").write_text("not a folder")
    _cache_on(monkeypatch, folder)
    reference = _train(False)
    for run in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = _train(True)
        assert _same(got, reference) and not got["from_cache"]
        msgs = [str(w.message) for w in caught if issubclass(w.category, compile_cache.CompileCacheWarning)]
        assert len(msgs) == (1 if run == 0 else 0), msgs  # one warning per process
        if run == 0:
            assert str(folder) in msgs[0] and "CSTORCH_CACHE" in msgs[0], msgs[0]
    assert blocker.read_text() == "not a folder"


def _jitted(x, scale):
    """A pure function for the jit cache test (module level: its name and line are its key)."""
    _jitted.body_runs += 1
    return (x * scale).sin().sum(0)


_jitted.body_runs = 0


def test_jit_compiles_through_the_cache(tmp_path, monkeypatch):
    """`cstorch_jax.jit` uses the compile cache as `@cstorch.trace` does: a second JitFunction
    of the same function and call (what a second process builds) loads the program, its body
    runs once per JitFunction (the capture that checks the entry), its values equal eager
    torch's; another constant is another program; the report of a loaded program shows the
    graph the compile made."""
    _cache_on(monkeypatch, tmp_path)
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    first = cstorch_jax.jit(_jitted)
    out1 = first(x, 2.0)
    assert not first.executable(x, 2.0).from_cache
    runs = _jitted.body_runs
    second = cstorch_jax.jit(_jitted)
    out2 = second(x, 2.0)
    assert second.executable(x, 2.0).from_cache and _jitted.body_runs == runs + 1
    torch.testing.assert_close(out2, out1, rtol=0, atol=0)
    torch.testing.assert_close(out2, (x * 2.0).sin().sum(0), rtol=1e-6, atol=1e-6)
    other = cstorch_jax.jit(_jitted)
    out3 = other(x, 3.0)
    assert not other.executable(x, 3.0).from_cache
    torch.testing.assert_close(out3, (x * 3.0).sin().sum(0), rtol=1e-6, atol=1e-6)
    assert second.lower(x, 2.0).captured.graph_hash == first.lower(x, 2.0).captured.graph_hash
    assert _jitted.body_runs == runs + 2  # the reports ran no body
