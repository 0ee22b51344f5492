"""cstorch's compiled XLA FFI handlers, loaded on demand.

`gemm.cc` is compiled at first use against the running jaxlib's FFI headers and kept in a
cache (`build.py`: needs g++). `gemm_targets()` loads it once, hands it the BLAS
(torch's MKL `sgemm_`, found in the already loaded `libtorch_cpu`), registers its two
targets with XLA for the CPU platform and returns their names; where the library, the
BLAS, the build or the registration fails it returns None and warns once, and the lowering
keeps XLA's own dot (same math).
"""
from __future__ import annotations

import ctypes
import functools
import os
import warnings

import jax

from . import build

TARGETS = ("cstorch_sgemm", "cstorch_sgemm_bias")
DISABLE_ENV = "CSTORCH_FFI_GEMM"


def _torch_blas():
    """(sgemm address, MKL_Set_Num_Threads_Local address) from torch's MKL, or None."""
    import torch

    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    try:
        lib = ctypes.CDLL(path)
        sgemm = ctypes.cast(lib.sgemm_, ctypes.c_void_p).value
        set_local = ctypes.cast(lib.MKL_Set_Num_Threads_Local, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    return sgemm, set_local


@functools.lru_cache(maxsize=None)
def _load() -> tuple[tuple[str, str] | None, str]:
    if os.environ.get(DISABLE_ENV, "").strip().lower() in ("0", "off", "false", "no"):
        return None, f"{DISABLE_ENV}={os.environ[DISABLE_ENV]}"
    blas = _torch_blas()
    if blas is None:
        return None, "this torch build has no MKL sgemm to call"
    try:
        path = str(build.library_path())
    except build.NativeBuildError as e:
        return None, f"the handler could not be built: {e}"
    try:
        lib = ctypes.CDLL(path)
        lib.cstorch_gemm_bind_blas.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
        lib.cstorch_gemm_bind_blas(blas[0], 0, blas[1])
        for name, symbol in zip(TARGETS, ("CstorchSgemm", "CstorchSgemmBias")):
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
    except Exception as e:  # an ABI or registration problem: keep XLA's dot
        return None, f"loading {os.path.basename(path)} failed: {type(e).__name__}: {e}"
    return TARGETS, "loaded"


def gemm_targets() -> tuple[str, str] | None:
    """The names of the registered (plain, with-bias) GEMM targets, or None (warned once)."""
    targets, reason = _load()
    if targets is None:
        _warn_once(reason)
    return targets


def gemm_status() -> str:
    """Why the FFI GEMM is or is not in use (for reports)."""
    return _load()[1]


@functools.lru_cache(maxsize=None)
def _warn_once(reason: str) -> None:
    if reason.startswith(DISABLE_ENV):
        return  # turned off on purpose
    warnings.warn(f"cstorch: large float32 matmuls on CPU use XLA's own dot instead of the BLAS custom call "
                  f"({reason}); results are the same, steps may be slower.", RuntimeWarning, stacklevel=3)
