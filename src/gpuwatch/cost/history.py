"""Cumulative values checkpointed over time, for increases over long windows.

`CheckpointHistory` keeps one checkpoint of a few cumulative totals per `resolution`
seconds (default 60 s) for `retention` seconds (default 30 days: 43,200 checkpoints),
so "how much did this total grow over the last 1 h / 24 h / 30 d" is a subtraction
and a binary search, not a rescan. Memory is bounded by retention / resolution.
"""

from __future__ import annotations

import bisect
from collections import deque


class CheckpointHistory:
    """Checkpoints of `width` cumulative totals."""

    def __init__(self, width: int, *, resolution: float = 60.0, retention: float = 30 * 86400.0):
        if width < 1 or resolution <= 0 or retention < resolution:
            raise ValueError("width >= 1 and 0 < resolution <= retention")
        self._width = width
        self._resolution = resolution
        self._retention = retention
        self._times: deque[float] = deque()
        self._values: deque[tuple[float, ...]] = deque()
        self._latest: tuple[float, tuple[float, ...]] | None = None

    def record(self, t: float, totals: tuple[float, ...]) -> None:
        """Note the totals at epoch time `t` (checkpointed at most once per resolution)."""
        if len(totals) != self._width:
            raise ValueError(f"expected {self._width} totals")
        self._latest = (t, totals)
        if not self._times or t - self._times[-1] >= self._resolution:
            self._times.append(t)
            self._values.append(totals)
            while self._times and t - self._times[0] > self._retention + self._resolution:
                self._times.popleft()
                self._values.popleft()

    def increase(self, window_seconds: float) -> tuple[float, tuple[float, ...]] | None:
        """(seconds covered, increase of each total) over the last `window_seconds`.

        Uses the oldest checkpoint inside the window, or the oldest kept when the
        history is younger than the window (the covered seconds say so). None before
        two distinct times were recorded.
        """
        if self._latest is None:
            return None
        span = self.span(window_seconds, self._latest[0])
        if span is None:
            return None
        start, end, delta = span
        return end - start, delta

    def span(
        self, window_seconds: float, now: float
    ) -> tuple[float, float, tuple[float, ...]] | None:
        """(start, end, increase of each total) over the window ending at `now`.

        `start` is the oldest checkpoint at or after `now - window_seconds`, `end` the
        latest recorded time (which may lag `now`: the totals are recorded as they
        settle). None before two distinct times were recorded inside the window.
        """
        if self._latest is None or not self._times:
            return None
        end, current = self._latest
        index = bisect.bisect_left(self._times, now - window_seconds)
        if index >= len(self._times):
            return None
        start = self._times[index]
        if start >= end:
            return None
        past = self._values[index]
        return start, end, tuple(c - p for c, p in zip(current, past, strict=True))
