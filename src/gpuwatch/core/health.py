"""One log line per outage of something that fails and recovers, however it flaps.

The one failure-episode helper (a bottom module: it imports nothing of gpuwatch), with
`backoff_seconds`, the one retry schedule. A token source that is down, or a source
whose need cannot be measured, logs one WARNING when the outage starts; further failures
of the same outage log at DEBUG. The outage ends, with one INFO line, only after
`SETTLE_SUCCESSES` successes in a row, so a server whose page alternates between good
and bad (a flapping gauge) stays in one outage instead of logging a line per scrape.
Pure state, no I/O, not thread-safe (each user holds its own per source, under its own
lock).
"""

from __future__ import annotations

SETTLE_SUCCESSES = 3
"""Successes in a row that end an outage (as `STALE_AFTER_INTERVALS` scrapes stale one)."""


__all__ = ["SETTLE_SUCCESSES", "Outage", "backoff_seconds"]


class Outage:
    """Whether something is in an outage, and which event starts or ends one."""

    def __init__(self, settle: int = SETTLE_SUCCESSES) -> None:
        if settle < 1:
            raise ValueError("settle must be >= 1")
        self._settle = settle
        self._good = 0
        self.failing = False

    def fail(self) -> bool:
        """Record a failure; True when it starts an outage (log it at WARNING)."""
        self._good = 0
        if self.failing:
            return False
        self.failing = True
        return True

    def succeed(self) -> bool:
        """Record a success; True when it ends an outage (log it at INFO)."""
        if not self.failing:
            return False
        self._good += 1
        if self._good < self._settle:
            return False
        self.failing = False
        self._good = 0
        return True


def backoff_seconds(attempt: int, initial: float, maximum: float) -> float:
    """Seconds to wait after the `attempt`-th failure in a row (0 for the first):
    `initial` doubled per further failure, at most `maximum` (the exponent capped at
    30, so a long outage never overflows)."""
    return float(min(initial * 2 ** min(max(attempt, 0), 30), maximum))
