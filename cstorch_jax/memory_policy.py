"""The process memory policy that keeps XLA:CPU's per-step buffers out of the kernel.

XLA:CPU allocates a compiled step's temporary buffer (177 MB for the benchmark GPT) with
`malloc` on every execution and frees it at the end. glibc serves blocks above its mmap
threshold with a fresh `mmap` and returns them with `munmap`, so every step the kernel
hands out (and zeroes) tens of thousands of new pages: ~45k minor page faults and
~90 ms of system CPU per GPT step on the 2-core benchmark machine
(`benchmarks/PROFILE.md`). Told never to mmap (`M_MMAP_MAX = 0`), never to give the top
of the heap back (`M_TRIM_THRESHOLD` at its maximum) and to keep one arena for all
threads (`M_ARENA_MAX = 1`: a second arena would mmap a block that size regardless),
glibc reuses the same heap pages step after step and the faults go to zero.

The trade-off: freed memory stays in the process, so its resident size stays at its
peak. Set `CSTORCH_MALLOC_POLICY=0` (before `cstorch_jax` is first imported) to keep
glibc's defaults; an allocator preloaded by the user (jemalloc, tcmalloc) or a
non-glibc C library is left alone. The policy changes which pages hold the data, never
a value.

It must be in force before JAX starts its thread pools (threads that already own an
arena keep it), so `cstorch_jax/__init__.py` applies it before importing jax, where the
platform policy wants it (`platform_policy.py`: XLA:CPU only).
"""
from __future__ import annotations

import ctypes
import os

ENV = "CSTORCH_MALLOC_POLICY"

# mallopt parameter numbers from glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
M_ARENA_MAX = -8
INT_MAX = 2**31 - 1

SETTINGS = ((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, INT_MAX), (M_ARENA_MAX, 1))

_state = {"applied": False, "reason": "not applied yet"}


def _disabled_by_user() -> str | None:
    value = os.environ.get(ENV, "").strip().lower()
    if value in ("0", "off", "false", "no"):
        return f"{ENV}={os.environ[ENV]}"
    return None


def _glibc():
    """The process's glibc (None under another C library or a preloaded allocator)."""
    if "LD_PRELOAD" in os.environ and any(
            name in os.environ["LD_PRELOAD"] for name in ("jemalloc", "tcmalloc", "mimalloc")):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (only glibc has it)
        return libc
    except (OSError, AttributeError):
        return None


def apply() -> bool:
    """Apply the policy once per process; True when it is in force. Idempotent."""
    if _state["applied"]:
        return True
    reason = _disabled_by_user()
    libc = None if reason else _glibc()
    if reason is None and libc is None:
        reason = "not glibc's malloc"
    if reason is None:
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.mallopt.restype = ctypes.c_int
        if all(libc.mallopt(param, value) == 1 for param, value in SETTINGS):
            _state.update(applied=True, reason="mallopt: no mmap, no trim, one arena")
            return True
        reason = "mallopt refused a setting"
    _state.update(applied=False, reason=reason)
    return False


def skip(reason: str) -> None:
    """Record that the policy was not applied, and why (a platform that does not need it)."""
    if not _state["applied"]:
        _state.update(reason=reason)


def status() -> dict:
    """{"applied": bool, "reason": str}: what `apply` did (for reports and benchmarks)."""
    return dict(_state)
