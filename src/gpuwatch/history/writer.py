"""The one writer thread: snapshots in from the sampling thread, rows out to SQLite.

The sampling thread only appends the published snapshot (and the token readings taken
with it) to a bounded queue (`offer`, O(1), no lock of ours, no I/O). The writer drains
the queue into the rollup every second and writes the changed rows every
`write_interval_seconds`, one transaction each time. A failed write (disk full, I/O
error, the file locked, any exception) is one log line and `gpuwatch_history_up 0`; the
rows stay pending in memory and are written, whole, when a write succeeds again. A value
SQLite cannot hold (past 64-bit integers, NaN or infinite: a lying source) is stored as
NULL where its column allows, else its row alone is refused; counted, and logged once a
spell, so everything else is still written. A write that finds the file damaged moves
it aside (kept, named in the log) and writes every hour in memory to a fresh file.
Hours older than the retention are deleted once an hour.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.core.clock import Clock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.history.rollup import Rollup, TokenReadingTotals, hour_of
from gpuwatch.history.schema import (
    GPU_COLUMNS,
    JOB_COLUMNS,
    JOB_KEY,
    POD_COLUMNS,
    STATE_TABLE_COLUMNS,
    TOKEN_COLUMNS,
)
from gpuwatch.history.store import (
    HistoryCorruptError,
    HistoryStore,
    HistoryStoreError,
    describe,
    store_error,
    unstorable,
)

log = logging.getLogger(__name__)

RowT = TypeVar("RowT", bound=Mapping[str, Any])
"""A row of one table (`gpuwatch.history.rows`)."""

QUEUE_LIMIT = 3600
"""Snapshots waiting for the writer at most; beyond, the oldest are dropped (the ledger's
columns stay exact: they are cumulative; state seconds, energy and memory lose them)."""

POD_KEY = ("namespace", "pod", "hour_start")
DRAIN_SECONDS = 1.0
PRUNE_EVERY_SECONDS = 3600.0


class HistoryWriter:
    """Rolls snapshots up per hour and writes them to `store` from its own thread."""

    def __init__(
        self,
        store: HistoryStore,
        rollup: Rollup,
        clock: Clock,
        *,
        retention_days: int,
        write_interval_seconds: float,
    ) -> None:
        self.store = store
        self._rollup = rollup
        self._clock = clock
        self._retention_seconds = retention_days * 86400.0
        self._write_interval = write_interval_seconds
        self._queue: deque[tuple[FleetSnapshot, tuple[TokenReadingTotals, ...]]] = deque(
            maxlen=QUEUE_LIMIT
        )
        self._lock = threading.Lock()  # one drain or write at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_prune: float | None = None
        self._offered = 0
        self._drained = 0
        self.up = True
        self.failures = 0
        self.refused_values = 0
        self._refusing = False  # within a spell of refused values (one log line each)

    def offer(self, snapshot: FleetSnapshot, readings: Sequence[TokenReadingTotals] = ()) -> None:
        """Queue a published snapshot (the sampling thread's whole cost)."""
        self._queue.append((snapshot, tuple(readings)))
        self._offered += 1

    def drain(self) -> None:
        """Fold every queued snapshot into the rollup."""
        with self._lock:
            self._drain()

    def _drain(self) -> None:
        while True:
            try:
                snapshot, readings = self._queue.popleft()
            except IndexError:
                return
            self._drained += 1
            self._rollup.add(snapshot, readings)

    def flush(self) -> bool:
        """Drain, then write every changed row in one transaction; True when written."""
        with self._lock:
            self._drain()
            return self._flush(replace_damaged=True)

    def _flush(self, *, replace_damaged: bool) -> bool:
        """`flush` less the drain, the lock held; `replace_damaged`: a damaged file is
        moved aside and every hour in memory written to a fresh one."""
        now = self._clock.time()
        prune = None
        if self._last_prune is None or now - self._last_prune >= PRUNE_EVERY_SECONDS:
            prune = float(hour_of(now - self._retention_seconds))
        gpu_rows, token_rows, states = self._rollup.take_dirty()
        pod_rows = self._rollup.take_dirty_pods()
        job_rows = self._rollup.jobs.take_dirty()
        refused: list[str] = []
        required = self.store.required
        gpu_rows = _storable(
            gpu_rows, GPU_COLUMNS, ("uuid", "hour_start"), required["gpu_hours"], refused
        )
        token_rows = _storable(
            token_rows,
            TOKEN_COLUMNS,
            ("source", "hour_start"),
            required["token_hours"],
            refused,
        )
        pod_rows = _storable(pod_rows, POD_COLUMNS, POD_KEY, required["pod_hours"], refused)
        job_rows = _storable(job_rows, JOB_COLUMNS, JOB_KEY, required["job_hours"], refused)
        states = _storable(states, STATE_TABLE_COLUMNS, ("uuid",), required["gpu_state"], refused)
        self._note_refused(refused)
        write = functools.partial(
            self.store.write,
            gpu_rows,
            token_rows,
            states,
            prune_before=prune,
            pod_rows=pod_rows,
            job_rows=job_rows,
        )
        error = _attempt(write)
        if error is not None and replace_damaged and self._replace_damaged(error, now):
            self._rollup.untake_all()  # every hour in memory, into the fresh file
            return self._flush(replace_damaged=False)
        if error is not None:
            self._rollup.untake(gpu_rows, token_rows)
            self._rollup.untake_pods(pod_rows)
            self._rollup.jobs.untake(job_rows)
            self.failures += 1
            if self.up:
                log.error(
                    "history: cannot write %s (%s); %d hour rows kept in memory and "
                    "written when it works again",
                    self.store.path,
                    describe(error),
                    self._rollup.pending_rows,
                )
            self.up = False
            return False
        if not self.up:
            log.info("history: writing %s again", self.store.path)
        self.up = True
        if prune is not None:
            self._last_prune = now
        self._rollup.forget_final()
        return True

    def _replace_damaged(self, exc: Exception, now: float) -> bool:
        """When `exc` says the file is damaged: move it aside, start a fresh one (one
        ERROR line naming the kept file) and True; else False."""
        if not isinstance(store_error("", exc), HistoryCorruptError):
            return False
        try:
            aside = self.store.replace_damaged(now)
        except HistoryStoreError as again:
            log.error(
                "history: %s is damaged (%s) and cannot be replaced: %s",
                self.store.path,
                describe(exc),
                again,
            )
            return False
        log.error(
            "history: %s is damaged (%s); kept as %s, a fresh history starts with the hours "
            "still in memory",
            self.store.path,
            describe(exc),
            aside,
        )
        return True

    def _note_refused(self, refused: Sequence[str]) -> None:
        """Count the values refused by this write; one ERROR line when a spell starts."""
        self.refused_values += len(refused)
        if refused and not self._refusing:
            log.error(
                "history: %d value(s) SQLite cannot hold, the rest is written: %s%s "
                "(gpuwatch_history_refused_values_total counts them while it lasts)",
                len(refused),
                refused[0],
                f"; and {len(refused) - 1} more" if len(refused) > 1 else "",
            )
        elif not refused and self._refusing:
            log.info("history: every value can be stored again")
        self._refusing = bool(refused)

    def start(self) -> None:
        """Start the writer thread."""
        self._thread = threading.Thread(target=self._run, name="gpuwatch-history", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        waited = 0.0
        while not self._stop.wait(DRAIN_SECONDS):
            waited += DRAIN_SECONDS
            try:
                if waited >= self._write_interval:
                    waited = 0.0
                    self.flush()
                else:
                    self.drain()
            except Exception:  # a bug here must not end the thread silently
                log.exception("history writer failed; it tries again")

    def stop(self) -> None:
        """Stop the thread, write what is pending and close the file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None
        self.flush()
        self.store.close()

    @property
    def dropped(self) -> int:
        """Snapshots dropped because the queue was full."""
        return max(self._offered - self._drained - len(self._queue), 0)

    def families(self) -> Iterator[Metric]:
        """gpuwatch_history_up, gpuwatch_history_pending_rows and
        gpuwatch_history_refused_values_total."""
        return _families(self.up, self._rollup.pending_rows, self.refused_values)

    @staticmethod
    def down_families() -> Iterator[Metric]:
        """The families of a store that could not be opened."""
        return _families(False, 0, 0)


def _attempt(write: Callable[[], None]) -> Exception | None:
    """Run `write`; the exception it raised, if any (whatever it is, the rows wait)."""
    try:
        write()
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


def _storable(
    rows: Sequence[RowT],
    columns: Sequence[str],
    key: Sequence[str],
    required: frozenset[str],
    refused: list[str],
) -> list[RowT]:
    """The rows SQLite can hold: a value it cannot hold is stored as NULL where its column
    allows, else the row is refused; each such value described (escaped) in `refused`."""
    kept: list[RowT] = []
    for row in rows:
        problems = {c: why for c in columns if (why := unstorable(row.get(c))) is not None}
        if not problems:
            kept.append(row)
            continue
        where = ", ".join(
            datetime.fromtimestamp(row[k], UTC).strftime("%Y-%m-%dT%H:%MZ")
            if k == "hour_start" and unstorable(row.get(k)) is None
            else ascii(row.get(k))
            for k in key
        )
        whole = not required.isdisjoint(problems)
        for column, why in problems.items():
            fate = "row refused" if whole else "stored as NULL"
            refused.append(f"{where}: {column} is {why} ({fate})")
        if not whole:
            kept.append(cast("RowT", {**row, **dict.fromkeys(problems)}))  # nullable columns
    return kept


def _families(up: bool, pending_rows: int, refused_values: int) -> Iterator[Metric]:
    family = GaugeMetricFamily(
        "gpuwatch_history_up",
        "1 when the history store is open and its last write succeeded, else 0",
    )
    family.add_metric([], 1.0 if up else 0.0)
    yield family
    pending = GaugeMetricFamily(
        "gpuwatch_history_pending_rows",
        "Hour rows of the history store changed in memory and not yet written",
    )
    pending.add_metric([], float(pending_rows))
    yield pending
    refused = CounterMetricFamily(
        "gpuwatch_history_refused_values",
        "Values the history store could not hold (past 64-bit integers, NaN, infinite, not "
        "UTF-8), each write: stored as NULL where the column allows, else their row refused",
    )
    refused.add_metric([], float(refused_values))
    yield refused
