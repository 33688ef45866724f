"""The store on its own: migrations, idempotent writes, late settlements, a full disk."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.history.schema import SCHEMA_VERSION
from gpuwatch.history.store import HISTORY_FILE, HistoryStore, HistoryStoreError
from tests.history.demo import HistoryRun, history_config

V1_FILE = """
CREATE TABLE gpu_hours (
    uuid TEXT NOT NULL, hour_start INTEGER NOT NULL, host TEXT NOT NULL, gpu_index INTEGER,
    name TEXT NOT NULL, observed_seconds REAL NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0, busy_seconds REAL NOT NULL DEFAULT 0,
    idle_seconds REAL NOT NULL DEFAULT 0, held_seconds REAL NOT NULL DEFAULT 0,
    unknown_seconds REAL NOT NULL DEFAULT 0, busy_cost_usd REAL NOT NULL DEFAULT 0,
    idle_cost_usd REAL NOT NULL DEFAULT 0, held_cost_usd REAL NOT NULL DEFAULT 0,
    unknown_cost_usd REAL NOT NULL DEFAULT 0, last_seconds REAL NOT NULL,
    PRIMARY KEY (uuid, hour_start)) WITHOUT ROWID;
CREATE INDEX gpu_hours_by_hour ON gpu_hours (hour_start);
CREATE TABLE gpu_state (uuid TEXT PRIMARY KEY, gpu_index INTEGER, name TEXT NOT NULL,
    state TEXT NOT NULL, state_since_seconds REAL NOT NULL, inactive_since_seconds REAL,
    inactive_seconds REAL NOT NULL, activity_mean_ratio REAL, last_seconds REAL NOT NULL);
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (1);
INSERT INTO gpu_hours (uuid, hour_start, host, gpu_index, name, observed_seconds, cost_usd,
    idle_seconds, idle_cost_usd, last_seconds)
    VALUES ('GPU-1', 3600, 'h', 0, 'NVIDIA H100 80GB HBM3', 3600, 6.88, 3600, 6.88, 7199);
"""


def test_a_version_1_file_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    with sqlite3.connect(path) as conn:
        conn.executescript(V1_FILE)
    store = HistoryStore(path)
    try:
        assert store.version() == SCHEMA_VERSION == 10
        (row,) = store.gpu_hours(0.0)
        assert row["idle_seconds"] == 3600
        assert row["cost_usd"] == 6.88
        assert row["idle_state_seconds"] == 0
        assert row["energy_joules"] is None
        assert row["dram_peak_ratio"] is None
        assert row["activity_seconds"] == row["activity_sampled_seconds"] == 0
        assert row["first_seconds"] is None  # written before schema 6
        assert row["recommended_rule"] is None  # written before schema 7
        assert row["need_bytes"] is row["need_p95_bytes"] is None  # written before schema 8
        assert row["need_basis"] is row["pods"] is None
        assert row["dra"] is None  # written before schema 9
        assert row["kernel_busy_seconds"] == row["kernel_busy_sampled_seconds"] == 0  # schema 9
        assert store.token_hours(0.0) == []
        assert store.pod_hours(0.0) == []
        assert store.job_hours(0.0) == []  # schema 10
    finally:
        store.close()
    reopened = HistoryStore(path)  # a migrated file opens as it is
    try:
        assert reopened.version() == 10
    finally:
        reopened.close()


def test_a_file_from_a_newer_gpuwatch_is_refused(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE schema_version (version INTEGER); INSERT INTO schema_version VALUES (99);"
        )
    with pytest.raises(HistoryStoreError, match="schema version 99"):
        HistoryStore(path)


def totals(path: Path) -> tuple[float | None, ...]:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT sum(observed_seconds), sum(busy_seconds + idle_seconds + held_seconds"
            " + unknown_seconds), sum(cost_usd) FROM gpu_hours"
        ).fetchone()
    return tuple(row)


def test_writing_twice_counts_nothing_twice_and_late_seconds_find_their_hour(
    tmp_path: Path,
) -> None:
    clock = ManualClock(1_767_225_600.0 + 3600.0 - 600.0)  # 10 minutes before 01:00 UTC
    run = HistoryRun(tmp_path, clock)
    try:
        run.run(1200.0)  # 00:50 to 01:10: GPU 1's idle spell settles after 00:20 of it
        writer = run.agent.history
        assert writer is not None
        assert writer.flush()
        first = totals(tmp_path / HISTORY_FILE)
        assert writer.flush()
        assert writer.flush()
        assert totals(tmp_path / HISTORY_FILE) == first
        snapshot = run.agent.store.latest()
        assert snapshot is not None
        gpu1 = next(c for c in snapshot.cost.gpus if c.gpu_index == 1)
        with sqlite3.connect(tmp_path / HISTORY_FILE) as conn:
            by_hour = dict(
                conn.execute(
                    "SELECT hour_start, unsettled FROM (SELECT hour_start, "
                    "observed_seconds - busy_seconds - idle_seconds - held_seconds "
                    "- unknown_seconds AS unsettled, uuid FROM gpu_hours) WHERE uuid = ?",
                    (gpu1.uuid,),
                )
            )
        # still pending at 01:10 (the window is 30 min): nothing of GPU 1 is settled yet
        assert sum(by_hour.values()) == pytest.approx(gpu1.unsettled_seconds)
        run.run(1800.0)  # 01:40: the window filled, the pending time settled as idle
        assert writer.flush()
        with sqlite3.connect(tmp_path / HISTORY_FILE) as conn:
            first_hour = conn.execute(
                "SELECT observed_seconds, idle_seconds FROM gpu_hours "
                "WHERE uuid = ? AND hour_start = ?",
                (gpu1.uuid, 1_767_225_600),
            ).fetchone()
        # ticks 00:50:20 ... 00:59:50 (the first adds no time; 01:00:00 opens the next hour)
        assert first_hour[0] == pytest.approx(580.0)
        assert first_hour[1] == pytest.approx(580.0), "settled at 01:20, booked at 00:5x"
    finally:
        run.close()


class FullDisk:
    """Real SQLite connections whose file may not grow past its size at open."""

    def __init__(self) -> None:
        self.conn: sqlite3.Connection | None = None

    def __call__(self, path: Path) -> sqlite3.Connection:
        self.conn = sqlite3.connect(
            path, timeout=5.0, check_same_thread=False, isolation_level=None
        )
        return self.conn

    def fill(self) -> None:
        assert self.conn is not None
        (pages,) = self.conn.execute("PRAGMA page_count").fetchone()
        self.conn.execute(f"PRAGMA max_page_count = {pages}")

    def free(self) -> None:
        assert self.conn is not None
        self.conn.execute("PRAGMA max_page_count = 1073741823")


def test_a_full_disk_is_one_line_and_a_metric_and_the_hours_come_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from gpuwatch.history.opening import open_history

    clock = ManualClock()
    run = HistoryRun(tmp_path, clock)  # opens its own writer; replace it by a full one
    run.agent.history.stop()  # type: ignore[union-attr]
    disk = FullDisk()
    run.agent.history = open_history(
        history_config(tmp_path), clock, run.agent.analysis, run.agent.cost, connect=disk
    )
    writer = run.agent.history
    try:
        disk.fill()
        with caplog.at_level(logging.ERROR, logger="gpuwatch.history.writer"):
            run.run(6 * 3600.0)  # 28 GPU-hours: more than the file's free page holds
            assert not writer.flush()
            for _ in range(3):  # three more failing writes, 10 simulated minutes apart
                run.run(600.0)
                assert not writer.flush()
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1, "one line for the whole outage"
        assert "database or disk is full (SQLITE_FULL)" in errors[0], "not 'cannot rollback'"
        assert "rollback" not in errors[0]
        up = {f.name: f.samples[0].value for f in writer.families()}
        assert up["gpuwatch_history_up"] == 0.0
        assert up["gpuwatch_history_pending_rows"] >= 4 * 7 + 1  # four GPUs, 7 hours, a source
        assert totals(tmp_path / HISTORY_FILE) == (None, None, None)
        disk.free()
        assert writer.flush()
        up = {f.name: f.samples[0].value for f in writer.families()}
        assert up == {
            "gpuwatch_history_up": 1.0,
            "gpuwatch_history_pending_rows": 0.0,
            "gpuwatch_history_refused_values": 0.0,
        }
        snapshot = run.agent.store.latest()
        assert snapshot is not None
        observed = sum(c.observed_seconds_total for c in snapshot.cost.gpus)
        assert totals(tmp_path / HISTORY_FILE)[0] == pytest.approx(observed)
    finally:
        run.close()
