"""The hour's memory need and pods in the history file (schema 8), whether a pod held the
GPU through a DRA claim (schema 9), and the measured lookback kept across a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.history.rollup import hour_of
from gpuwatch.history.store import HISTORY_FILE, HistoryStore
from gpuwatch.plan.local import load_usage
from tests.conftest import scenario_agent, simulated
from tests.history.demo import HistoryRun, history_config

START = 1_767_225_600.0  # 2026-01-01 00:00 UTC
WEIGHTS_AND_OVERHEAD = 16_060_522_496 + 3_212_104_499  # Llama-3.1-8B bf16, sizing model


def _rows(state_dir: Path) -> dict[tuple[int, int], dict[str, Any]]:
    """The rows by (GPU index, hour), read as plain mappings: the test compares columns freely."""
    store = HistoryStore(state_dir / HISTORY_FILE)
    try:
        rows = store.gpu_hours(0.0)
        return {
            (cast(int, r["gpu_index"]), r["hour_start"]): cast("dict[str, Any]", r) for r in rows
        }
    finally:
        store.close()


def _ticks(run: HistoryRun, seconds: float) -> list[FleetSnapshot]:
    return [run.run(10.0) for _ in range(round(seconds / 10.0))]


def test_each_hour_keeps_its_need_its_basis_and_its_pods(tmp_path: Path) -> None:
    run = HistoryRun(tmp_path, ManualClock(START), kubernetes=True)
    try:
        snapshots = _ticks(run, 2 * 3600.0)
    finally:
        run.close()
    rows = _rows(tmp_path)
    hour = int(START) + 3600  # the second hour: past the first window, judged throughout
    samples = [
        (v.need_basis, v.need_sample_bytes, v.gpu_index)
        for s in snapshots
        if hour_of(s.timestamp_seconds) == hour
        for v in s.verdicts
    ]
    for index, basis in ((0, "observed"), (1, "observed"), (2, "observed"), (3, "measured")):
        row = rows[index, hour]
        needs = [n for b, n, i in samples if i == index and b == basis and n is not None]
        assert row["need_basis"] == basis
        assert row["need_bytes"] == max(needs), "the hour's maximum, no headroom"
        assert row["need_p95_bytes"] <= row["need_bytes"]
        assert row["need_p95_bytes"] >= sorted(needs)[int(0.9 * len(needs))]
    assert rows[0, hour]["need_bytes"] == rows[0, hour]["memory_peak_bytes"], "observed"
    measured = rows[3, hour]
    assert WEIGHTS_AND_OVERHEAD < measured["need_p95_bytes"] <= measured["need_bytes"]
    assert measured["need_bytes"] < 0.4 * float(measured["memory_peak_bytes"])
    pods = {index: json.loads(str(rows[index, hour]["pods"])) for index in range(4)}
    assert pods == {
        0: ["team-a/llama3-sft-0"],
        1: ["team-b/batch-eval-7f9c"],  # allocated, runs nothing: holds it all the same
        2: ["team-a/notebook-alice"],
        3: ["team-b/vllm-llama-8b-0", "team-b/vllm-llama-8b-canary"],
    }


@pytest.mark.parametrize(("scenario", "dra"), [("demo", 0), ("demo-dra", 1)])
def test_each_hour_says_whether_a_pod_held_the_gpu_through_dra(
    tmp_path: Path, scenario: str, dra: int
) -> None:
    """demo-dra's pods hold every GPU through gpu.nvidia.com claims, demo's through the
    device plugin: the column says which, and the plan's local source reads it."""
    run = HistoryRun(tmp_path, ManualClock(START), kubernetes=True, scenario=scenario)
    try:
        _ticks(run, 600.0)
    finally:
        run.close()
    rows = _rows(tmp_path)
    assert {index: row["dra"] for (index, _), row in rows.items()} == dict.fromkeys(range(4), dra)
    usages = load_usage(tmp_path, START, START + 3600.0)
    assert len(usages) == 4
    assert {u.dra for u in usages} == {bool(dra)}


def test_without_attribution_the_pods_are_an_empty_list(tmp_path: Path) -> None:
    run = HistoryRun(tmp_path, ManualClock(START))
    try:
        run.run(600.0)
    finally:
        run.close()
    rows = _rows(tmp_path)
    assert {str(r["pods"]) for r in rows.values()} == {"[]"}
    assert {r["dra"] for r in rows.values()} == {0}


def test_a_restart_without_the_server_keeps_the_measured_lookback(tmp_path: Path) -> None:
    """The restored hours seed the measured need's lookback: a restarted agent whose
    inference server does not answer yet still judges GPU 3 on what it measured."""
    clock = ManualClock(START)
    first = HistoryRun(tmp_path, clock)
    try:
        before = first.run(2 * 3600.0)
    finally:
        first.close()
    old = next(v for v in before.verdicts if v.gpu_index == 3)
    assert old.need_basis == "measured"
    clock.advance(60.0)
    nv, _ = simulated("demo", clock)
    agent = scenario_agent(history_config(tmp_path), nv, clock)  # no token source at all
    assert agent.open_history()
    try:
        agent.tick()
        clock.advance(10.0)
        after = agent.tick()
    finally:
        agent.stop()
    new = next(v for v in after.verdicts if v.gpu_index == 3)
    assert new.need_basis == "measured"
    old_required, new_required = dict(old.required_memory_bytes), dict(new.required_memory_bytes)
    assert new_required["measured"] == pytest.approx(old_required["measured"], rel=1e-9)
    assert new_required["measured_p95"] <= new_required["measured"]
    assert new.recommendation == old.recommendation
    assert new.need_sample_bytes is None, "nothing measured this tick"


def test_each_hour_keeps_its_kernel_busy_time(tmp_path: Path) -> None:
    """Schema 9: per GPU-hour, NVML utilization x tick seconds and those seconds, summed
    over the snapshots of the hour (what a time-sliced plan adds up)."""
    run = HistoryRun(tmp_path, ManualClock(START))
    try:
        snapshots = _ticks(run, 2 * 3600.0)
    finally:
        run.close()
    rows = _rows(tmp_path)
    hour = int(START) + 3600
    by_index: dict[int, list[tuple[float, float]]] = {}
    for s in snapshots:
        if hour_of(s.timestamp_seconds) != hour:
            continue
        ticks = {v.uuid: v.tick_seconds for v in s.verdicts}
        for gpu in s.gpus:
            if gpu.utilization_ratio is not None and ticks.get(gpu.identity.uuid):
                by_index.setdefault(gpu.identity.index, []).append(
                    (gpu.utilization_ratio, ticks[gpu.identity.uuid])
                )
    assert set(by_index) == {0, 1, 2, 3}
    for index, samples in by_index.items():
        row = rows[index, hour]
        assert row["kernel_busy_sampled_seconds"] == pytest.approx(sum(t for _, t in samples))
        assert row["kernel_busy_seconds"] == pytest.approx(sum(u * t for u, t in samples))
    assert rows[0, hour]["kernel_busy_seconds"] > 0.5 * 3600  # the trainer keeps it busy
    assert rows[1, hour]["kernel_busy_seconds"] == 0  # allocated, runs nothing
