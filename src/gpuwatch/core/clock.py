"""Clocks: the one place that reads time, so tests and the simulator can inject their own.

`Clock.time()` is wall-clock seconds since the epoch (simulated when simulating);
`Clock.monotonic()` is for measuring durations. Nothing else in gpuwatch calls
`time.time()` or `time.monotonic()` directly.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """A source of time in seconds."""

    def time(self) -> float:
        """Seconds since the Unix epoch (simulated under `--simulate`)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards, for durations."""
        ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class ScaledClock:
    """Simulated time that runs `speed` simulated seconds per real second.

    It starts at `start` (epoch seconds, default: the real time now) and both
    `time()` and `monotonic()` advance `speed` times faster than real time.
    """

    def __init__(self, speed: float = 1.0, start: float | None = None) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self._real_start = time.monotonic()
        self._start = time.time() if start is None else start

    def time(self) -> float:
        return self._start + (time.monotonic() - self._real_start) * self.speed

    def monotonic(self) -> float:
        return self.time()


class ManualClock:
    """A clock that moves only when told to: deterministic tests and golden files."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self._now = start
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return self.time()

    def advance(self, seconds: float) -> None:
        """Move time forward by `seconds` (>= 0)."""
        if seconds < 0:
            raise ValueError("a clock never goes backwards")
        with self._lock:
            self._now += seconds

    def set(self, epoch_seconds: float) -> None:
        """Jump to an absolute time that is not earlier than now."""
        with self._lock:
            if epoch_seconds < self._now:
                raise ValueError("a clock never goes backwards")
            self._now = epoch_seconds
