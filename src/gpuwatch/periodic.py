"""A job on its own daemon thread: for work that waits on the network.

APScheduler's thread pool is joined at interpreter exit, so a job blocked on a slow
server (a token source, AWS) would hold SIGTERM hostage for its whole timeout, and a 1 s
job that runs for 30 s fills the log with "maximum number of running instances". Jobs
that do network I/O run here instead: one at a time, never overlapping, and a stop never
waits for a call in flight (the thread is a daemon).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class PeriodicThread:
    """Calls `job` every `interval_seconds` (real time) until stopped."""

    def __init__(self, name: str, interval_seconds: float, job: Callable[[], object]) -> None:
        self._name = name
        self._interval = interval_seconds
        self._job = job
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"gpuwatch-{name}", daemon=True)
        self._failed = False

    def start(self) -> None:
        """Run the job now, then every interval."""
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._job()
                self._failed = False
            except Exception:  # a bug in the job must not end the thread
                if not self._failed:
                    log.exception("%s failed; it runs again in %.0f s", self._name, self._interval)
                    self._failed = True
            self._stop.wait(self._interval)

    def stop(self, timeout: float = 0.5) -> None:
        """Ask the thread to stop; waits at most `timeout` seconds for a call in flight."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
