"""Failure handling shared by the billing sources: log-safe errors, episodes, backoff.

A source that fails is skipped until its backoff has passed; it logs one warning when
a failure episode starts and one info line when it recovers, never one per attempt
(`gpuwatch.core.health`: an `Outage` that one success ends, and `backoff_seconds`).
"""

from __future__ import annotations

import logging

from gpuwatch.core.failures import CollectorFailedError
from gpuwatch.core.health import Outage, backoff_seconds

log = logging.getLogger("gpuwatch.billing")


class SourceError(CollectorFailedError):
    """A billing source did not answer; the message is log-safe (no keys, no tokens)."""


class SourceHealth:
    """Up/down state, failure episodes and retry backoff of one source.

    After the n-th consecutive failure the next attempt is due `min(initial * 2**(n-1),
    maximum)` seconds later.
    """

    def __init__(self, name: str, *, initial_backoff_seconds: float, max_backoff_seconds: float):
        self.name = name
        self.up = False
        self.failures = 0
        self.retry_at = 0.0
        self._initial = initial_backoff_seconds
        self._max = max(max_backoff_seconds, initial_backoff_seconds)
        self._outage = Outage(settle=1)  # one success ends an episode

    def may_try(self, now: float) -> bool:
        """Whether an attempt is allowed at `now` (epoch seconds)."""
        return self.failures == 0 or now >= self.retry_at

    def succeeded(self) -> None:
        """Record a success; logs the end of a failure episode."""
        if self._outage.succeed():
            log.info("billing source %s answers again", self.name)
        self.up = True
        self.failures = 0
        self.retry_at = 0.0

    def failed(self, now: float, reason: str, *, backoff: bool = True) -> None:
        """Record a failure at `now`; logs only the first failure of an episode.

        `backoff=False` (a missing prerequisite, not a failed call) lets the next
        refresh try again.
        """
        if self._outage.fail():
            log.warning(
                "billing source %s unavailable (%s); falling back to the next tier",
                self.name,
                reason,
            )
        self.up = False
        self.failures += 1
        delay = backoff_seconds(self.failures - 1, self._initial, self._max)
        self.retry_at = now + delay if backoff else now
