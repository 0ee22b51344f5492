"""The FFI GEMM's build at first use (`cstorch_jax/native/build.py`): one library per (source,
jaxlib headers, command), built once under concurrency, a failed build reported and cleaned up,
and the real handler built against the running jaxlib's headers and registered."""
from __future__ import annotations

import ctypes
import shutil
import threading

import pytest

from cstorch_jax import native
from cstorch_jax.native import build

needs_compiler = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on this machine")


@pytest.fixture
def tiny_source(tmp_path, monkeypatch):
    """A one-function source in place of gemm.cc (compiles in well under a second)."""
    src = tmp_path / "tiny.cc"
    src.write_text('extern "C" int cstorch_tiny() { return 7; }\n')
    monkeypatch.setattr(build, "SOURCE", src)
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    return src


@needs_compiler
def test_library_is_keyed_by_source_and_reused(tiny_source):
    first = build.library_path()
    assert first.parent == build.cache_dir() and first.exists()
    assert ctypes.CDLL(str(first)).cstorch_tiny() == 7
    mtime = first.stat().st_mtime_ns
    assert build.library_path() == first and first.stat().st_mtime_ns == mtime  # reused, not rebuilt
    tiny_source.write_text('extern "C" int cstorch_tiny() { return 8; }\n')
    second = build.library_path()
    assert second != first and ctypes.CDLL(str(second)).cstorch_tiny() == 8


@needs_compiler
def test_concurrent_callers_build_once(tiny_source, monkeypatch):
    calls = []
    real = build._build
    monkeypatch.setattr(build, "_build", lambda target: (calls.append(target), real(target)))
    results = []
    threads = [threading.Thread(target=lambda: results.append(build.library_path())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(set(results)) == 1 and results[0].exists()


@needs_compiler
def test_a_compile_error_is_reported_and_leaves_nothing(tiny_source):
    tiny_source.write_text("this is not C++\n")
    with pytest.raises(build.NativeBuildError, match="compiling tiny.cc failed"):
        build.library_path()
    leftovers = [p.name for p in build.cache_dir().iterdir() if not p.name.endswith(".lock")]
    assert leftovers == []


def test_a_missing_compiler_is_named(tiny_source, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(build.NativeBuildError, match="no-such-compiler-xyz.*not on PATH"):
        build.library_path()


@needs_compiler
def test_the_handler_builds_against_this_jaxlib_and_registers():
    import jax.ffi

    assert f"-I{jax.ffi.include_dir()}" in build.compile_command(build.cache_dir() / "x.so")
    assert native.gemm_targets() == native.TARGETS, native.gemm_status()
