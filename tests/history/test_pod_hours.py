"""Per-pod cost by hour in the history file (schema 4): what the pods were charged, on
the demo's simulated node, continued across a restart within the hour."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwatch.clock import ManualClock
from gpuwatch.history import HISTORY_FILE, HistoryStore
from gpuwatch.snapshot import FleetSnapshot
from tests.history.demo import HistoryRun

START = 1_767_225_600.0  # 2026-01-01 00:00 UTC


def _pods(snapshot: FleetSnapshot) -> dict[tuple[str, str], tuple[float, float]]:
    return {
        (p.namespace, p.pod): (p.cost_usd_total, p.idle_cost_usd_total) for p in snapshot.cost.pods
    }


def _stored(state_dir: Path) -> dict[tuple[str, str, int], tuple[float, float]]:
    store = HistoryStore(state_dir / HISTORY_FILE)
    try:
        return {
            (r["namespace"], r["pod"], r["hour_start"]): (r["cost_usd"], r["idle_cost_usd"])
            for r in store.pod_hours(0.0)
        }
    finally:
        store.close()


def test_pod_hours_hold_what_each_pod_was_charged_across_a_restart(tmp_path: Path) -> None:
    clock = ManualClock(START + 600)
    first = HistoryRun(tmp_path, clock, kubernetes=True)
    try:
        before = _pods(first.run(1200))  # 00:10 to 00:30
    finally:
        first.close()
    hour = int(START)
    stored = _stored(tmp_path)
    assert {k[:2] for k in stored} == set(before)
    for (namespace, pod), (cost, idle) in before.items():
        assert stored[namespace, pod, hour] == pytest.approx((cost, idle), rel=1e-9)
    assert before["team-b", "batch-eval-7f9c"][0] > 0

    second = HistoryRun(tmp_path, clock, kubernetes=True)
    try:
        after = _pods(second.run(1790))  # to 00:59:50, then into the next hour
        after_next = _pods(second.run(610))
    finally:
        second.close()
    stored = _stored(tmp_path)
    for key, (cost, idle) in before.items():
        this_hour = stored[(*key, hour)]
        # the restart continues the hour: first run's figures plus the second run's
        assert this_hour == pytest.approx((cost + after[key][0], idle + after[key][1]), rel=1e-9)
        next_hour = stored[(*key, hour + 3600)]
        assert next_hour[0] == pytest.approx(after_next[key][0] - after[key][0], rel=1e-9)
