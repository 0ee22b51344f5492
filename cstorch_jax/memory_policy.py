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

The trade-offs: freed memory stays in the process, so its resident size stays at its peak;
and XLA compiles on several threads of its pool, which with one arena take turns at malloc's
lock: the first compile of the GPT stack of `benchmarks.cold_start` (CSTORCH_CACHE=0, one
process per case, 2-core Intel Xeon, 2026-12-06) took 1.6 s against 1.0 s without the policy
at 2 layers, 2.6 against 1.9 s at 8, 7.2 against 6.4 s at 32, and the hand-written `jax.jit`
of the same model 1.7 against 1.0 s in a process that had created a CSX backend. Raising the
arena limit only while compiling does not help: the pool threads that compile are the ones
that run the steps, and a thread keeps the arena it got first. Set `CSTORCH_MALLOC_POLICY=0`
(before the CSX backend is created) to keep glibc's defaults; an allocator preloaded by the
user (jemalloc, tcmalloc) or a non-glibc C library is left alone. The policy changes which
pages hold the data, never a value.

It is applied when a CSX backend is created (`platform_policy.apply_host_policies`, where
the platform wants it: XLA:CPU only), never at import. It is best in force before JAX starts
its thread pools (threads that already own an arena keep it); when JAX had started first,
`status()` says so (`"late": True`): the main arena and new threads still follow it.
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

_state = {"applied": False, "late": False, "reason": "not applied yet (a CSX backend applies it)"}


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


def apply(after_jax_started: bool = False) -> bool:
    """Apply the policy once per process; True when it is in force. Idempotent.
    `after_jax_started`: JAX's thread pools exist already (recorded as `"late"`)."""
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
            late = " (after JAX started: its existing threads keep their arenas)" if after_jax_started else ""
            _state.update(applied=True, late=after_jax_started, reason=f"mallopt: no mmap, no trim, one arena{late}")
            return True
        reason = "mallopt refused a setting"
    _state.update(applied=False, reason=reason)
    return False


def skip(reason: str) -> None:
    """Record that the policy was not applied, and why (a platform that does not need it)."""
    if not _state["applied"]:
        _state.update(reason=reason)


def status() -> dict:
    """{"applied": bool, "late": bool, "reason": str}: what `apply` did (for reports and
    benchmarks); `late`: applied after JAX had started its thread pools."""
    return dict(_state)
