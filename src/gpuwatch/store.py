"""The latest snapshot, swapped atomically each tick; consumers only read it.

With the snapshot the tick publishes the families of the parts that report their own
health (token sources, measured needs, billing, alerts, history, attribution), rendered
from that tick, so that a scrape reads one tick and nothing live.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from prometheus_client.metrics_core import Metric

from gpuwatch.core.snapshot import FleetSnapshot


class SnapshotStore:
    """Holds the newest immutable `FleetSnapshot`; safe to read from any thread."""

    def __init__(self) -> None:
        self._latest: FleetSnapshot | None = None
        self._families: tuple[Metric, ...] = ()
        self._lock = threading.Lock()

    def publish(self, snapshot: FleetSnapshot, families: Iterable[Metric] = ()) -> None:
        """Replace the latest snapshot and the families published with it."""
        rendered = tuple(families)
        with self._lock:
            self._latest = snapshot
            self._families = rendered

    def publish_families(self, families: Iterable[Metric]) -> None:
        """Replace the published families alone (the agent's parts as built or opened,
        before the first tick)."""
        rendered = tuple(families)
        with self._lock:
            self._families = rendered

    def latest(self) -> FleetSnapshot | None:
        """The newest snapshot, or None before the first tick."""
        with self._lock:
            return self._latest

    def published(self) -> tuple[FleetSnapshot | None, tuple[Metric, ...]]:
        """The newest snapshot and the families its tick rendered, read together."""
        with self._lock:
            return self._latest, self._families
