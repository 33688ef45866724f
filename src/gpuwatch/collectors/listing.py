"""The off-tick half shared by the sources that list a scheduler (the kubelet's pods, Slurm's
jobs): one timed list call per refresh, the last good listing kept, and the failure reason
being logged, so each source logs one line per change of reason and one on recovery.

Pure state and a lock; the list call and the log lines stay the source's own (its logger
names it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from gpuwatch.collectors.base import timed
from gpuwatch.core.clock import Clock
from gpuwatch.core.snapshot import CollectorResult

L = TypeVar("L")
R = TypeVar("R")

__all__ = ["FailureReason", "Listings"]


class Listings(Generic[L]):
    """The newest good listing of `list_` and how its last call went.

    `refresh()` runs `list_` inside `timed` (a `CollectorFailedError` keeps the last good
    listing, success 0); `current()` and `result` are read by the tick.
    """

    def __init__(self, name: str, clock: Clock, list_: Callable[[], L]) -> None:
        self._name = name
        self._clock = clock
        self._list = list_
        self._lock = threading.Lock()
        self._listing: L | None = None
        self._result = CollectorResult(name, False, 0.0)

    @property
    def result(self) -> CollectorResult:
        """How the last refresh went (success 0 before the first)."""
        return self._result

    def refresh(self) -> None:
        """Call `list_` once (blocking I/O: the scheduler's job)."""
        listing, result = timed(self._name, self._clock, self._list, failed=lambda: None)
        with self._lock:
            if listing is not None:
                self._listing = listing
            self._result = result

    def current(self) -> L | None:
        """The newest listing (fresh or stale), else None."""
        with self._lock:
            return self._listing


class FailureReason(Generic[R]):
    """The failure reason being logged: one WARNING per change of reason, one INFO when
    the source answers again. Not thread-safe (used by one refresh at a time)."""

    def __init__(self) -> None:
        self.current: R | None = None

    def fail(self, reason: R) -> bool:
        """Record a failure; True when its reason differs from the one being logged."""
        changed = reason != self.current
        self.current = reason
        return changed

    def succeed(self) -> bool:
        """Record a success; True when it ends a failure (log the recovery)."""
        ended = self.current is not None
        self.current = None
        return ended
