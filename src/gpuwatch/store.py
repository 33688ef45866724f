"""The latest snapshot, swapped atomically each tick; consumers only read it."""

from __future__ import annotations

import threading

from gpuwatch.snapshot import FleetSnapshot


class SnapshotStore:
    """Holds the newest immutable `FleetSnapshot`; safe to read from any thread."""

    def __init__(self) -> None:
        self._latest: FleetSnapshot | None = None
        self._lock = threading.Lock()

    def publish(self, snapshot: FleetSnapshot) -> None:
        """Replace the latest snapshot."""
        with self._lock:
            self._latest = snapshot

    def latest(self) -> FleetSnapshot | None:
        """The newest snapshot, or None before the first tick."""
        with self._lock:
            return self._latest
