"""`cstorch.utils.tracker.RateTracker`: samples per second, smoothed and overall.

`add(n)` counts samples. `rate()` is the rate since the previous `rate()` call,
exponentially smoothed: `(1 - s) * current + s * previous` with `s = smooth_factor`
(0.4 by default; the first call is unsmoothed). `global_rate()` is `total_count /
elapsed_seconds()` since the last reset, unsmoothed.
"""
from __future__ import annotations

import time
from typing import Optional


class RateTracker:
    """Samples per second, smoothed (`rate()`) and overall (`global_rate()`); see the
    module docstring.

    Args:
        smooth_factor: the weight s of the previous rate in the smoothed one (0: no
            smoothing); None: 0.4.
    """

    def __init__(self, smooth_factor: Optional[float] = None):
        self._smooth_factor = 0.4 if smooth_factor is None else smooth_factor
        self.reset()

    def reset(self) -> None:
        """Forget every sample and restart the clock."""
        self.reset_time()
        self._counted = 0.0   # samples before the last rate() call
        self._pending = 0.0   # samples since then
        self._last_rate: Optional[float] = None

    def reset_time(self, offset: float = 0) -> None:
        """Restart the clock, `offset` seconds in the past."""
        self._start_ns = time.perf_counter_ns() - int(offset * 1e9)
        self._last_ns = self._start_ns

    def add(self, count) -> None:
        """Count `count` more samples."""
        self._pending += count

    @property
    def total_count(self) -> float:
        """Samples counted since the last reset."""
        return self._counted + self._pending

    def rate(self) -> float:
        """Smoothed samples/second since the previous call."""
        now = time.perf_counter_ns()
        seconds = (now - self._last_ns) / 1e9
        if seconds <= 0:
            return 0.0
        current = self._pending / seconds
        rate = current if self._last_rate is None else \
            (1 - self._smooth_factor) * current + self._smooth_factor * self._last_rate
        self._counted += self._pending
        self._pending = 0.0
        self._last_ns, self._last_rate = now, rate
        return rate

    def global_rate(self) -> float:
        """Samples/second since the last reset (unsmoothed)."""
        seconds = self.elapsed_seconds()
        return self.total_count / seconds if seconds > 0 else 0.0

    def elapsed_seconds(self) -> float:
        """Seconds since the last reset."""
        return (time.perf_counter_ns() - self._start_ns) / 1e9


__all__ = ["RateTracker"]
