"""`gpuwatch report --prometheus` reproduces a synthetic month's exact totals, to the cent,
from the real Debian Prometheus (backfilled by promtool) and VictoriaMetrics (imported),
and from Prometheus with the report's recording rules backfilled (`--prometheus-rules on`).

The month holds an agent restart mid-day, one across midnight (no sample near the day
boundary, counters reset), a host that joins on day two and a GPU lost for three hours;
and Kubernetes pods: two namespaces sharing one GPU, a pod on two GPUs whose counters
reset at its agent's restart, and a pod that appears on day two.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from gpuwatch.promapi.client import PrometheusOptions
from gpuwatch.report.build import build_report
from gpuwatch.report.model import Period, ReportData
from gpuwatch.report.prometheus import load
from tests.report_prometheus.conftest import Month

CENT = 0.005


def period_of(month: Month) -> Period:
    end = datetime.fromtimestamp(month.fleet.end_epoch, UTC)
    return Period(month.fleet.start, end, "synthetic")


SOURCES = {
    "prometheus": ("prometheus_url", "off"),
    "victoria-metrics": ("victoria_url", "auto"),
    "prometheus-rules": ("rules_url", "on"),
}


@pytest.fixture(scope="module", params=list(SOURCES))
def report(request: pytest.FixtureRequest, month: Month) -> ReportData:
    fixture, rules = SOURCES[request.param]
    url: str = request.getfixturevalue(fixture)
    progress: list[tuple[int, int]] = []
    options = PrometheusOptions(url, rules=rules)
    data = load(options, period_of(month), lambda d, n: progress.append((d, n)))
    assert progress[-1][0] == progress[-1][1] > 0, "progress reaches its total"
    return data


def test_totals_to_the_cent(report: ReportData, month: Month) -> None:
    truth = month.truth
    for attr in ("cost_usd", "idle_cost_usd", "held_cost_usd"):
        got = math.fsum(getattr(g, attr) for g in report.gpu_days)
        assert abs(got - truth.total(attr)) < CENT, attr
    assert truth.total("idle_cost_usd") > truth.total("held_cost_usd") > 0


def test_every_gpu_day_exact(report: ReportData, month: Month) -> None:
    rows = {(g.host, g.uuid, g.day): g for g in report.gpu_days}
    assert rows.keys() == month.truth.gpu_days.keys()
    for key, want in month.truth.gpu_days.items():
        got = rows[key]
        assert got.name == want.name
        assert got.cost_usd == pytest.approx(want.cost_usd, abs=1e-6), key
        assert got.idle_cost_usd == pytest.approx(want.idle_cost_usd, abs=1e-6), key
        assert got.held_cost_usd == pytest.approx(want.held_cost_usd, abs=1e-6), key
        assert got.energy_joules == pytest.approx(want.energy_joules, rel=1e-9), key
        assert got.observed_seconds == pytest.approx(want.observed_seconds), key
        assert got.memory_peak_bytes == want.memory_peak_bytes, key
        for name, seconds in want.class_seconds.items():
            assert got.class_seconds[name] == pytest.approx(seconds, abs=1e-6), (key, name)


def test_events_are_in_the_month(month: Month) -> None:
    """The truth itself holds what breaks naive sums (so the test above means something)."""
    days = month.truth.gpu_days
    lost = [d for d in days.values() if d.class_seconds["unknown"] > 0]
    assert len(lost) == 1
    joined = {day for host, _, day in days if host == "host-002:9842"}
    assert month.fleet.start.date() not in joined


def test_tokens_and_source_cost(report: ReportData, month: Month) -> None:
    rows = {(t.host, t.source, t.day): t for t in report.token_days}
    assert rows.keys() == month.truth.token_days.keys()
    for key, want in month.truth.token_days.items():
        assert rows[key].cost_usd == pytest.approx(want.cost_usd, abs=1e-6)
        for kind, tokens in want.tokens.items():
            assert rows[key].tokens.get(kind, 0.0) == tokens


def test_coverage_and_identity(report: ReportData, month: Month) -> None:
    assert report.expected_gpu_seconds == month.truth.expected_gpu_seconds
    assert report.rent_vs_buy_monthly_delta_usd == pytest.approx(-150.0)
    assert report.source.startswith("http://127.0.0.1:")
    assert {g.recommended_gpu for g in report.gpu_days if g.gpu_index == 1} == {"l40s"}
    assert {g.recommended_gpu for g in report.gpu_days if g.gpu_index == 0} == {None}
    assert {g.savings_usd_per_hour for g in report.gpu_days if g.gpu_index == 1} == {1.75}
    assert {g.price_source for g in report.gpu_days} == {"static"}


def test_pod_totals_to_the_cent(report: ReportData, month: Month) -> None:
    pods = month.truth.pod_days.values()
    for attr in ("cost_usd", "idle_cost_usd"):
        got = math.fsum(getattr(p, attr) for p in report.pod_days)
        assert abs(got - math.fsum(getattr(p, attr) for p in pods)) < CENT, attr


def test_every_pod_day_exact(report: ReportData, month: Month) -> None:
    rows = {(p.host, p.namespace, p.pod, p.day): p for p in report.pod_days}
    assert rows.keys() == month.truth.pod_days.keys()
    for key, want in month.truth.pod_days.items():
        assert rows[key].cost_usd == pytest.approx(want.cost_usd, abs=1e-6), key
        assert rows[key].idle_cost_usd == pytest.approx(want.idle_cost_usd, abs=1e-6), key


def test_pod_events_are_in_the_month(month: Month) -> None:
    """Two namespaces on one host, a pod that appears on day two (no row on day one), a pod
    charged less on the day of its agent's restart, and pods charged less than their GPUs."""
    pods = month.truth.pod_days
    first, second = month.fleet.start.date(), month.fleet.start.date() + timedelta(days=1)
    host0 = {ns for host, ns, _, _ in pods if host == "host-000:9842"}
    assert host0 == {"ml-train", "ml-serve"}
    vllm1 = {day for _, _, pod, day in pods if pod == "vllm-1"}
    assert first not in vllm1
    assert second in vllm1
    trainer = {day: p.cost_usd for (_, _, pod, day), p in pods.items() if pod == "trainer-0"}
    assert trainer[first] < trainer[second]  # 20 minutes down, counters reset
    assert all(p.cost_usd > p.idle_cost_usd > 0 for p in pods.values())
    gpu_cost = month.truth.total("cost_usd")
    assert 0 < math.fsum(p.cost_usd for p in pods.values()) < gpu_cost


def test_namespaces_table(report: ReportData, month: Month) -> None:
    """The report's Namespaces table from the fleet: pods and cost per namespace."""
    want: dict[str, float] = {}
    for (_, namespace, _, _), pod in month.truth.pod_days.items():
        want[namespace] = want.get(namespace, 0.0) + pod.cost_usd
    lines = {n.namespace: n for n in build_report(report).namespaces}
    assert lines.keys() == want.keys() == {"ml-train", "ml-serve"}
    assert (lines["ml-serve"].pods, lines["ml-train"].pods) == (2, 1)
    for namespace, cost in want.items():
        assert abs(lines[namespace].cost_usd - cost) < CENT, namespace


def test_every_slurm_day_exact(report: ReportData, month: Month) -> None:
    """The pods again as Slurm jobs (account = namespace, user = pod): per host, account
    or user and day, the cost counters' growth is the pod's, the reclaim counter's growth
    RECLAIM_STEP_USD per sample after each reset, and the GPU-seconds the job-info samples
    x the 60 s interval, exactly (both counted from the same samples)."""
    rows = {(r.kind, r.host, r.name, r.day): r for r in report.slurm_days}
    assert rows.keys() == month.truth.slurm_days.keys()
    pods = month.truth.pod_days
    for (kind, host, name, day), want in month.truth.slurm_days.items():
        got = rows[kind, host, name, day]
        (pod,) = [
            p
            for (h, namespace, pod_name, d), p in pods.items()
            if (h, d) == (host, day) and name == (namespace if kind == "account" else pod_name)
        ]
        assert abs(got.cost_usd - pod.cost_usd) < CENT
        assert abs(got.idle_cost_usd - pod.idle_cost_usd) < CENT
        assert got.held_cost_usd is not None
        assert abs(got.held_cost_usd - pod.idle_cost_usd / 2) < CENT
        assert abs(got.reclaimed_usd - want.reclaimed_usd) < CENT
        assert got.gpu_seconds == want.gpu_seconds
        assert set(got.job_ids) == want.job_ids


def test_slurm_tables(report: ReportData, month: Month) -> None:
    """The report's Slurm account and user tables from the fleet: jobs, GPU-hours, cost,
    idle, held $ and $ reclaimed summed by hand."""
    for kind, lines in (
        ("account", build_report(report).slurm_accounts),
        ("user", build_report(report).slurm_users),
    ):
        want: dict[str, list[float]] = {}
        jobs: dict[str, set[tuple[str, str]]] = {}
        for (k, host, name, _day), truth in month.truth.slurm_days.items():
            if k != kind:
                continue
            sums = want.setdefault(name, [0.0, 0.0, 0.0])
            sums[0] += truth.gpu_seconds / 3600
            sums[1] += truth.reclaimed_usd
            (pod,) = [
                p
                for (h, namespace, pod_name, d), p in month.truth.pod_days.items()
                if (h, d) == (host, _day) and name == (namespace if kind == "account" else pod_name)
            ]
            sums[2] += pod.idle_cost_usd / 2
            jobs.setdefault(name, set()).update((host, j) for j in truth.job_ids)
        got = {n.name: n for n in lines}
        assert got.keys() == want.keys()
        for name, (hours, reclaimed, held) in want.items():
            line = got[name]
            assert line.jobs == len(jobs[name])
            assert line.gpu_hours == pytest.approx(hours, rel=1e-12)
            assert line.reclaimed_usd is not None
            assert abs(line.reclaimed_usd - reclaimed) < CENT
            assert line.held_cost_usd is not None
            assert abs(line.held_cost_usd - held) < CENT
    accounts = {n.name: n for n in build_report(report).slurm_accounts}
    namespaces = {n.namespace: n for n in build_report(report).namespaces}
    assert accounts.keys() == namespaces.keys() == {"ml-train", "ml-serve"}
    for name, line in accounts.items():
        assert abs(line.cost_usd - namespaces[name].cost_usd) < CENT
    total = build_report(report).slurm_reclaimed_usd
    assert total is not None
    truths = month.truth.slurm_days.items()
    by_account = [t.reclaimed_usd for (kind, *_), t in truths if kind == "account"]
    assert abs(total - math.fsum(by_account)) < CENT
