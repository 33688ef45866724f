"""Rolling time-window aggregates in constant memory and O(1) amortized time per sample.

`BucketedWindow` splits the window into a fixed number of buckets (default 60); adding a
sample touches one bucket, and a query combines the buckets, so the cost does not grow
with the window's length or the sample rate. The price is resolution: the window's edge
moves in steps of one bucket (window / buckets seconds).
"""

from __future__ import annotations

import math


class BucketedWindow:
    """Time-weighted mean, maximum and coverage of a signal over the last `window_seconds`."""

    def __init__(self, window_seconds: float, buckets: int = 60) -> None:
        if window_seconds <= 0 or buckets < 1:
            raise ValueError("window_seconds must be positive and buckets at least 1")
        self.window_seconds = window_seconds
        self._width = window_seconds / buckets
        self._n = buckets
        self._sum = [0.0] * buckets  # value x seconds
        self._weight = [0.0] * buckets  # seconds
        self._max = [-math.inf] * buckets
        self._current: int | None = None  # absolute index of the newest bucket
        self._total_sum = 0.0
        self._total_weight = 0.0

    def _advance(self, index: int) -> None:
        """Make `index` the newest bucket, clearing the buckets that fell out of the window."""
        if self._current is None:
            self._current = index
            return
        if index <= self._current:
            return
        steps = min(index - self._current, self._n)
        if steps == self._n:  # everything expired: start from exact zeros (no float drift)
            self._sum = [0.0] * self._n
            self._weight = [0.0] * self._n
            self._max = [-math.inf] * self._n
            self._total_sum = 0.0
            self._total_weight = 0.0
            self._current = index
            return
        for k in range(1, steps + 1):
            slot = (self._current + k) % self._n
            self._total_sum -= self._sum[slot]
            self._total_weight -= self._weight[slot]
            self._sum[slot] = 0.0
            self._weight[slot] = 0.0
            self._max[slot] = -math.inf
        self._current = index

    def add(self, t: float, value: float, duration_seconds: float) -> None:
        """Record `value` held for `duration_seconds` ending at epoch time `t`."""
        self._advance(int(t // self._width))
        assert self._current is not None
        slot = self._current % self._n
        self._sum[slot] += value * duration_seconds
        self._weight[slot] += duration_seconds
        self._total_sum += value * duration_seconds
        self._total_weight += duration_seconds
        self._max[slot] = max(self._max[slot], value)

    def mean(self, t: float) -> float | None:
        """Time-weighted mean over the window ending at `t`; None without data."""
        self._advance(int(t // self._width))
        if self._total_weight <= 0:
            return None
        return self._total_sum / self._total_weight

    def maximum(self, t: float) -> float | None:
        """Largest value seen in the window ending at `t`; None without data."""
        self._advance(int(t // self._width))
        peak = max(self._max)
        return None if peak == -math.inf else peak

    def covered_seconds(self, t: float) -> float:
        """Seconds of the window ending at `t` that hold samples."""
        self._advance(int(t // self._width))
        return self._total_weight
