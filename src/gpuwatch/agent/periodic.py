"""Jobs on their own threads, two kinds that differ on purpose.

- `PeriodicThread`, for work that waits on the network (a token source, AWS): a fixed
  delay between calls, and a stop never waits for a call in flight (the thread is a
  daemon), so a job blocked on a slow server cannot hold SIGTERM hostage for its whole
  timeout; a failure is logged once until the job succeeds again.
- `IntervalJob`, for the agent's sampling jobs (tick, slow pass, pod listing, alert
  evaluation): a fixed rate, missed slots skipped, and a stop waits for the call in
  flight so that a sample is never cut in half.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

log = logging.getLogger("gpuwatch.periodic")  # the name its log lines have always had


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


class IntervalJob:
    """Calls `job` every `interval_seconds` (real time) on its own thread, at a fixed
    rate: the n-th call is due n intervals after `start()`. A call that overruns is
    never doubled up: the slots it missed are skipped and the next call comes at the
    next slot (one instance, coalesced). A failing call is logged and the job goes on.

    The agent's sampling jobs (tick, slow pass, pod listing, alert evaluation) run here,
    one thread each; `stop()` waits for a call in flight. This is what the agent used
    APScheduler's `BackgroundScheduler` for ("interval" jobs, `max_instances=1`,
    `coalesce=True`), without APScheduler and the asyncio and multiprocessing it imports
    (2.8 MiB of the plain agent's memory after start-up: docs/benchmarks.md, "No
    APScheduler in the agent", from bench/agent_resources.py).
    """

    def __init__(self, name: str, interval_seconds: float, job: Callable[[], object]) -> None:
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be positive")
        self.name = name
        self.interval = interval_seconds
        self._job = job
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"gpuwatch-{name}", daemon=True)

    def start(self) -> None:
        """The first call one interval from now, then every interval."""
        self._thread.start()

    def _run(self) -> None:
        start = time.monotonic()
        slot = 1
        while not self._stop.wait(max(start + slot * self.interval - time.monotonic(), 0.0)):
            try:
                self._job()
            except Exception:  # a bug in the job must not end the thread
                log.exception("job %s raised an exception", self.name)
            # the next slot still in the future: missed ones are skipped, not caught up
            slot = max(slot + 1, math.floor((time.monotonic() - start) / self.interval) + 1)

    def stop(self) -> None:
        """Stop calling; waits for a call in flight to end."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
