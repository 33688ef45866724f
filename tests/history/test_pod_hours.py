"""Per-pod cost by hour in the history file (schema 4): what the pods were charged, on
the demo's simulated node, continued across a restart within the hour."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.history.store import HISTORY_FILE, HistoryStore
from gpuwatch.report.build import build_report
from gpuwatch.report.csv_format import render_pods_csv
from gpuwatch.report.html import render_html
from gpuwatch.report.json_format import render_json
from gpuwatch.report.local import load
from gpuwatch.report.markdown import render_markdown
from gpuwatch.report.model import Period
from gpuwatch.report.produce import write_files
from tests.history.demo import HistoryRun, history_config

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


def test_the_local_report_charges_back_by_namespace(tmp_path: Path) -> None:
    run = HistoryRun(tmp_path, ManualClock(START), kubernetes=True)
    try:
        last = run.run(2 * 3600.0)
    finally:
        run.close()
    day = Period(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC), "2026-01-01")
    report = build_report(load(history_config(tmp_path), day))
    by_namespace = {n.namespace: n for n in report.namespaces}
    assert set(by_namespace) == {"team-a", "team-b"}
    for namespace, line in by_namespace.items():
        pods = [p for p in last.cost.pods if p.namespace == namespace]
        assert line.pods == len(pods)
        assert line.cost_usd == pytest.approx(sum(p.cost_usd_total for p in pods), rel=1e-9)
        assert line.unused_share_usd == pytest.approx(sum(p.idle_cost_usd_total for p in pods))
    # the namespaces plus the GPUs' cost charged to no pod make the whole GPU cost
    nobody = sum(g.cost_usd_total for g in last.cost.unattributed)
    charged = sum(n.cost_usd for n in report.namespaces)
    assert charged + nobody == pytest.approx(report.totals.cost_usd, rel=1e-9)
    shares = [n.share_ratio for n in report.namespaces]
    assert shares == [pytest.approx(n.cost_usd / report.totals.cost_usd) for n in report.namespaces]
    document = json.loads(render_json(report))
    assert [n["namespace"] for n in document["namespaces"]] == [
        n.namespace for n in report.namespaces
    ]
    assert document["namespaces"][0]["cost_usd"] == report.namespaces[0].cost_usd
    markdown = render_markdown(report)
    assert "## Namespaces" in markdown
    assert "| team-b |" in markdown
    html = render_html(report)
    assert "<h2>Namespaces</h2>" in html
    assert ">team-a<" in html
    # the pods CSV: one row per day x pod, summing to the namespaces' charge
    data = load(history_config(tmp_path), day)
    rows = list(csv.DictReader(io.StringIO(render_pods_csv(data) or "")))
    assert {(r["namespace"], r["pod"]) for r in rows} == {
        (p.namespace, p.pod) for p in last.cost.pods
    }
    assert {r["window_start"] for r in rows} == {"2026-01-01T00:00:00Z"}
    assert sum(float(r["total_cost"]) for r in rows) == pytest.approx(charged, rel=1e-9)
    assert sum(float(r["unused_share_cost"]) for r in rows) == pytest.approx(
        sum(n.unused_share_usd for n in report.namespaces), rel=1e-9
    )
    written = write_files(report, data, ["csv"], tmp_path / "out", "now")
    assert [p.name for p in written] == [
        "gpuwatch-report-2026-01-01.csv",
        "gpuwatch-report-2026-01-01-pods.csv",
    ]
    assert written[1].read_text() == render_pods_csv(data)
