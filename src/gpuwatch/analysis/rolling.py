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


QUANTILE_RELATIVE_ERROR = 0.01
"""`QuantileSketch` answers within this fraction above the true value."""
_GAMMA = 1.0 + QUANTILE_RELATIVE_ERROR
_LOG_GAMMA = math.log(_GAMMA)


class QuantileSketch:
    """Time-weighted quantiles of a signal >= 0, in memory that grows with the spread of
    its values, not with the number of samples: each value counts in a bin of width
    1 % (bin k holds (g^(k-1), g^k], g = 1.01), and a quantile is its bin's upper edge,
    so it is at most 1 % above the true one and never below it. Zero has a bin of its own.
    """

    __slots__ = ("_bins", "_weight")

    def __init__(self) -> None:
        self._bins: dict[int | None, float] = {}  # bin (None: zero) -> seconds
        self._weight = 0.0

    @property
    def weight(self) -> float:
        """The seconds recorded."""
        return self._weight

    def add(self, value: float, weight: float) -> None:
        """Record `value` (>= 0) held for `weight` seconds."""
        if weight <= 0 or not math.isfinite(value):
            return
        key = _bin(value)
        self._bins[key] = self._bins.get(key, 0.0) + weight
        self._weight += weight

    def merge(self, other: QuantileSketch) -> None:
        """Add `other`'s records to this sketch."""
        for key, weight in other._bins.items():
            self._bins[key] = self._bins.get(key, 0.0) + weight
        self._weight += other._weight

    def quantile(self, q: float) -> float | None:
        """The value below which a fraction `q` (0-1) of the recorded time lies (the
        upper edge of its bin); None when nothing was recorded."""
        return _quantile(self._bins, self._weight, q)


def _bin(value: float) -> int | None:
    """The bin of `value` (None: zero or below)."""
    return None if value <= 0 else math.ceil(math.log(value) / _LOG_GAMMA - 1e-9)


def _quantile(bins: dict[int | None, float], total: float, q: float) -> float | None:
    if total <= 0:
        return None
    wanted = min(max(q, 0.0), 1.0) * total * (1 - 1e-12)  # rounding never skips a bin
    keys = sorted(k for k in bins if k is not None)
    seen = 0.0
    for key in [None, *keys] if None in bins else keys:
        seen += bins[key]
        if seen >= wanted:
            return 0.0 if key is None else float(_GAMMA**key)
    return float(_GAMMA ** keys[-1])


class BucketedQuantiles:
    """Time-weighted quantiles of a signal >= 0 over the last `window_seconds`: the
    window's bins of `QuantileSketch` kept as a running total, each bucket's bins taken
    off when it leaves the window (which moves in steps of one bucket, as
    `BucketedWindow`'s); a query sorts the window's bins, whatever the sample count."""

    def __init__(self, window_seconds: float, buckets: int = 60) -> None:
        if window_seconds <= 0 or buckets < 1:
            raise ValueError("window_seconds must be positive and buckets at least 1")
        self.window_seconds = window_seconds
        self._width = window_seconds / buckets
        self._n = buckets
        self._buckets: list[dict[int | None, float] | None] = [None] * buckets
        self._total: dict[int | None, float] = {}
        self._current: int | None = None

    def _expire(self, slot: int) -> None:
        bins = self._buckets[slot]
        if bins is None:
            return
        self._buckets[slot] = None
        for key, weight in bins.items():
            left = self._total[key] - weight
            if left <= 1e-9 * weight:  # gone (float rounding leaves crumbs)
                del self._total[key]
            else:
                self._total[key] = left

    def _advance(self, index: int) -> None:
        if self._current is None:
            self._current = index
            return
        if index <= self._current:
            return
        if index - self._current >= self._n:  # everything expired: start from exact zeros
            self._buckets = [None] * self._n
            self._total = {}
        else:
            for k in range(1, index - self._current + 1):
                self._expire((self._current + k) % self._n)
        self._current = index

    def add(self, t: float, value: float, duration_seconds: float) -> None:
        """Record `value` held for `duration_seconds` ending at epoch time `t`."""
        if duration_seconds <= 0 or not math.isfinite(value):
            return
        self._advance(int(t // self._width))
        assert self._current is not None
        slot = self._current % self._n
        bins = self._buckets[slot]
        if bins is None:
            bins = self._buckets[slot] = {}
        key = _bin(value)
        bins[key] = bins.get(key, 0.0) + duration_seconds
        self._total[key] = self._total.get(key, 0.0) + duration_seconds

    def quantile(self, t: float, q: float) -> float | None:
        """The `q` quantile (0-1) over the window ending at `t`; None without data."""
        self._advance(int(t // self._width))
        return _quantile(self._total, sum(self._total.values()), q)
