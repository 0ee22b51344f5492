"""Builds `gemm.cc` against the headers of the jaxlib that runs it, once per (source, jaxlib).

The handler includes XLA's header-only FFI API (`xla/ffi/api/ffi.h`), which every jaxlib ships
under `jax.ffi.include_dir()`. Building it there, at first use, rather than at install time
against a copy of the headers, keeps the ABI that of the jaxlib in the process: a jaxlib upgrade
gets a new library instead of a stale one.

Contract of `library_path()`:
- the library is `<cache>/gemm-<jaxlib version>-<digest>.so`, where the digest covers the source,
  the include directory and the compile command, so a change of any of them builds anew;
- `<cache>` is `$CSTORCH_NATIVE_CACHE`, else `$XDG_CACHE_HOME/cstorch/native`, else
  `~/.cache/cstorch/native`;
- concurrent processes (pytest-xdist workers, data-parallel ranks) build it once: the build holds
  an exclusive `flock` on `<library>.lock`, writes to a temporary name and renames it into place,
  so a reader never sees a half-written file;
- a failed build raises `NativeBuildError` with the compiler's message; nothing is left behind.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("gemm.cc")
CACHE_ENV = "CSTORCH_NATIVE_CACHE"
FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-w")


class NativeBuildError(RuntimeError):
    """The handler could not be compiled (no compiler, no FFI headers, or a compile error)."""


def cache_dir() -> Path:
    """Where built libraries are kept (see the module docstring)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cstorch" / "native"


def compile_command(output: Path) -> list[str]:
    """The compiler invocation for `output` (the compiler is `$CXX`, else g++)."""
    import jax.ffi

    include = jax.ffi.include_dir()
    if not os.path.isfile(os.path.join(include, "xla", "ffi", "api", "ffi.h")):
        raise NativeBuildError(f"this jaxlib has no XLA FFI headers under {include}")
    cxx = shlex.split(os.environ.get("CXX", "g++"))
    if shutil.which(cxx[0]) is None:
        raise NativeBuildError(f"no C++ compiler: {cxx[0]!r} is not on PATH (set CXX or install g++)")
    return [*cxx, *FLAGS, f"-I{include}", str(SOURCE), "-o", str(output)]


def library_path() -> Path:
    """The built handler for this jaxlib, compiled first if it is not in the cache."""
    import jaxlib

    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(" ".join(compile_command(Path("OUT"))).encode())
    target = cache_dir() / f"gemm-{jaxlib.__version__}-{digest.hexdigest()[:16]}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(target.with_suffix(".lock")):
        if not target.exists():  # another process may have built it while we waited
            _build(target)
    return target


@contextlib.contextmanager
def _exclusive(lock_path: Path):
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(target: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=target.stem + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        print(f"cstorch: compiling the BLAS GEMM custom call for jaxlib (once, ~15 s) -> {target}",
              file=sys.stderr, flush=True)
        done = subprocess.run(compile_command(Path(tmp)), capture_output=True, text=True)
        if done.returncode != 0:
            raise NativeBuildError(f"compiling {SOURCE.name} failed ({done.returncode}):\n{done.stderr[-4000:]}")
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
