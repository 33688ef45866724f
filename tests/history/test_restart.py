"""After a restart the windows and the states continue from the history store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.core.costs import TimeWindow
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.history.store import HISTORY_FILE
from tests.history.demo import HistoryRun

SOURCE = "simulated-vllm-gpu3"


def window(snapshot: FleetSnapshot, index: int, name: str) -> TimeWindow:
    cost = next(c for c in snapshot.cost.gpus if c.gpu_index == index)
    return next(w for w in cost.windows if w.window == name)


def per_million(snapshot: FleetSnapshot, name: str) -> float | None:
    return next(
        w.usd_per_million_tokens
        for w in snapshot.cost.tokens
        if w.source == SOURCE and w.window == name and w.kind == "all"
    )


def rows(state_dir: Path, sql: str) -> list[tuple[float, ...]]:
    with sqlite3.connect(state_dir / HISTORY_FILE) as conn:
        return list(conn.execute(sql))


def test_states_and_windows_continue_after_a_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    first = HistoryRun(tmp_path, clock)
    before = first.run(3 * 3600.0)
    first.close()
    states = {v.gpu_index: (v.state, v.state_since_seconds) for v in before.verdicts}
    assert states[1][0] == "idle"
    assert states[2][0] == "held"
    assert before.timestamp_seconds - states[1][1] >= 2 * 3600.0, "idle for over two hours"
    # everything the ledger settled is in the hour rows, each second once
    for cost in before.cost.gpus:
        (stored,) = rows(
            tmp_path,
            "SELECT sum(observed_seconds), sum(busy_seconds), sum(idle_seconds), "
            f"sum(held_seconds), sum(cost_usd), count(*) FROM gpu_hours "
            f"WHERE uuid = '{cost.uuid}'",
        )
        assert stored[0] == pytest.approx(cost.observed_seconds_total)
        assert stored[1] == pytest.approx(cost.busy_seconds_total)
        assert stored[2] == pytest.approx(cost.idle_seconds_total)
        assert stored[3] == pytest.approx(cost.held_seconds_total)
        assert stored[4] == pytest.approx(cost.cost_usd_total)
        assert stored[5] == 4  # the run spans four UTC hours (it starts 10 s after one)

    clock.advance(300.0)  # five minutes away: less than the 30 min analysis window
    second = HistoryRun(tmp_path, clock)
    after = second.run(10.0)
    try:
        resumed = {v.gpu_index: (v.state, v.state_since_seconds) for v in after.verdicts}
        assert resumed[1] == states[1], "still idle, since the same moment"
        assert resumed[2] == states[2]
        assert resumed[0][0] == "busy"
        assert resumed[3][0] in ("busy", "underutilized")
        assert all(state != "pending" for state, _ in resumed.values())
        for index in range(4):
            old, new = window(before, index, "24h"), window(after, index, "24h")
            assert new.start_seconds <= before.timestamp_seconds - 2 * 3600.0
            assert new.judged_seconds == pytest.approx(old.judged_seconds, rel=0.02)
            assert new.busy_ratio == pytest.approx(old.busy_ratio, abs=0.01)
            assert new.idle_cost_usd == pytest.approx(old.idle_cost_usd, rel=0.02)
        old_price, new_price = per_million(before, "24h"), per_million(after, "24h")
        assert old_price is not None
        assert new_price is not None
        assert new_price == pytest.approx(old_price, rel=0.05)
        # overprovisioning sizes against the peaks seen before the restart
        for old_verdict, new_verdict in zip(before.verdicts, after.verdicts, strict=True):
            assert new_verdict.required_memory_bytes == old_verdict.required_memory_bytes
            assert new_verdict.required_bandwidth_bytes_per_second == pytest.approx(
                old_verdict.required_bandwidth_bytes_per_second
            )
            assert new_verdict.recommendation == old_verdict.recommendation
        assert after.verdicts[3].recommendation is not None, "the demo's GPU 3 is oversized"
        # the counters on /metrics start from 0: only the windows continue
        gpu1 = next(c for c in after.cost.gpus if c.gpu_index == 1)
        assert gpu1.observed_seconds_total <= 10.0
    finally:
        second.close()


def test_after_a_long_gap_the_states_start_over(tmp_path: Path) -> None:
    clock = ManualClock()
    first = HistoryRun(tmp_path, clock)
    first.run(3600.0)
    first.close()
    clock.advance(3600.0)  # longer than the analysis window: the old evidence is stale
    second = HistoryRun(tmp_path, clock)
    try:
        after = second.run(10.0)
        assert {v.state for v in after.verdicts} == {"pending"}
        assert window(after, 1, "24h").idle_seconds > 0, "the windows still hold the hour"
    finally:
        second.close()
