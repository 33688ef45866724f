"""The report with the recording rules backfilled (promtool) gives the raw report's
figures exactly, field for field, and falls back to raw queries per day where the
heartbeat chain is broken."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from gpuwatch.promapi.client import Client, PrometheusError, PrometheusOptions
from gpuwatch.report.model import Period, ReportData
from gpuwatch.report.prometheus import load
from gpuwatch.report.prometheus_rules import HEARTBEAT as HEARTBEAT_NAME
from gpuwatch.report.prometheus_rules import plan_day
from tests.report_prometheus.conftest import Month

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
HEARTBEAT: tuple[tuple[str, str], ...] = (
    ("offset", "5m"),
    ("overlap", "5m"),
    ("version", "2"),
    ("window", "1h"),
)
OLD_HEARTBEAT: tuple[tuple[str, str], ...] = (
    ("offset", "5m"),
    ("overlap", "5m"),
    ("version", "1"),
    ("window", "1h"),
)


def period_of(month: Month) -> Period:
    return Period(month.fleet.start, datetime.fromtimestamp(month.fleet.end_epoch, UTC), "m")


@pytest.fixture(scope="module")
def raw(month: Month, prometheus_url: str) -> ReportData:
    return load(PrometheusOptions(prometheus_url, rules="off"), period_of(month))


def assert_same_figures(got: ReportData, want: ReportData) -> None:
    assert got.gpu_days == want.gpu_days  # every field, floats bit for bit
    assert got.token_days == want.token_days
    assert got.pod_days == want.pod_days
    assert got.expected_gpu_seconds == want.expected_gpu_seconds
    assert got.rent_vs_buy_monthly_delta_usd == want.rent_vs_buy_monthly_delta_usd


def test_rules_give_the_raw_figures_exactly(month: Month, rules_url: str, raw: ReportData) -> None:
    data = load(PrometheusOptions(rules_url, rules="on"), period_of(month))
    assert_same_figures(data, raw)
    assert data.pod_days, "the month has pods: equal pod rows mean something"
    assert any("used for 3 of 3 days" in note for note in data.notes), data.notes
    assert not any(note.startswith("raw queries for") for note in data.notes)
    assert {g.memory_peak_bytes is not None for g in data.gpu_days} == {True}


def test_a_broken_chain_falls_back_per_day(
    month: Month, partial_rules_url: str, raw: ReportData
) -> None:
    data = load(PrometheusOptions(partial_rules_url, rules="auto"), period_of(month))
    assert_same_figures(data, raw)
    day_two = month.fleet.start.date().replace(day=month.fleet.start.day + 1)
    assert any("used for 2 of 3 days" in note for note in data.notes), data.notes
    assert f"raw queries for {day_two}: recording-rule heartbeat chain broken" in data.notes


def test_an_older_rule_version_is_read_raw(
    month: Month, upgraded_rules_url: str, raw: ReportData
) -> None:
    """Days covered only by a version-1 heartbeat (no pod `resets` rules) are read raw with
    a note naming the version; the days after the upgrade use the current rules."""
    data = load(PrometheusOptions(upgraded_rules_url, rules="auto"), period_of(month))
    assert_same_figures(data, raw)
    day_one = month.fleet.start.date()
    assert any("used for 2 of 3 days" in note for note in data.notes), data.notes
    assert (
        f"raw queries for {day_one}: recording-rule heartbeat of version 1, not 2 "
        "(load the current gpuwatch-report.rules.yml)"
    ) in data.notes


def test_rules_on_with_only_an_older_version_is_one_line(
    month: Month, upgraded_rules_url: str
) -> None:
    """The heartbeats are read up to a day past the period: four hours of day one see the
    version-1 heartbeat only."""
    hours = Period(month.fleet.start, month.fleet.start + timedelta(hours=4), "h")
    with pytest.raises(PrometheusError, match=r"^--prometheus-rules on: .* of version 1 only,"):
        load(PrometheusOptions(upgraded_rules_url, rules="on"), hours)


def test_the_partial_phase_puts_a_window_edge_in_a_restart_gap(
    month: Month, partial_rules_url: str
) -> None:
    """Host 0 is down from 10:00 to 10:20 on day one (counters reset): a window edge with
    its 5-minute overlap lies inside the gap, so only the `resets` rules' gap flag sees the
    reset (the test above fails without it)."""
    at = month.fleet.start_epoch + DAY_MS // 1000
    beats = Client(PrometheusOptions(partial_rules_url)).matrix(f"{HEARTBEAT_NAME}[1d] @ {at}", at)
    times = [t for samples in beats.values() for t, _ in samples]
    edges = [t - 3600 - 300 - month.fleet.start_epoch for t in times]
    assert any(10 * 3600 + 300 < edge < 10 * 3600 + 1200 for edge in edges), edges


def test_the_default_reads_raw_series_even_where_rules_exist(
    month: Month, rules_url: str, raw: ReportData
) -> None:
    """Measured slower than the raw queries (docs/benchmarks.md), the rules are read only
    when asked for: the default leaves a rules server's heartbeats alone."""
    assert PrometheusOptions("http://h").rules == "off"
    data = load(PrometheusOptions(rules_url), period_of(month))
    assert_same_figures(data, raw)
    assert not any("recording rules" in note for note in data.notes)


def test_auto_without_rules_reads_raw(month: Month, prometheus_url: str, raw: ReportData) -> None:
    data = load(PrometheusOptions(prometheus_url, rules="auto"), period_of(month))
    assert_same_figures(data, raw)
    assert not any("recording rules" in note for note in data.notes)


def test_rules_on_without_heartbeat_is_one_line(month: Month, prometheus_url: str) -> None:
    with pytest.raises(PrometheusError, match=r"^--prometheus-rules on: no gpuwatch:report_"):
        load(PrometheusOptions(prometheus_url, rules="on"), period_of(month))


def test_bad_rules_mode_names_the_flag() -> None:
    with pytest.raises(ValueError, match=r"^--prometheus-rules: expected auto, on or off"):
        PrometheusOptions("http://h", rules="sometimes")


def test_plan_day_takes_an_unbroken_chain_inside_the_day() -> None:
    beats = {HEARTBEAT: [t * HOUR_MS + 300_000 + 7 for t in range(-3, 30)]}
    plan, why = plan_day(beats, 0, DAY_MS)
    assert plan is not None, why
    assert plan.lo_ms == 7  # first window starts 7 ms after midnight: a 7 ms raw sliver
    assert plan.hi_ms == 23 * HOUR_MS + 7  # last window ends 7 ms past 23:00
    assert plan.evaluations == 23


@pytest.mark.parametrize(
    ("beats", "why"),
    [
        ({}, "no recording-rule heartbeat"),
        ({HEARTBEAT: [2 * HOUR_MS, 3 * HOUR_MS, 5 * HOUR_MS]}, "heartbeat chain broken"),
        (
            {HEARTBEAT: [3 * HOUR_MS], (*HEARTBEAT, ("replica", "b")): [3 * HOUR_MS]},
            "several recording-rule heartbeat series",
        ),
        ({(("version", "2"), ("window", "1h")): [3 * HOUR_MS]}, "no recording-rule heartbeat"),
        (
            {OLD_HEARTBEAT: [t * HOUR_MS + 300_000 for t in range(30)]},
            "recording-rule heartbeat of version 1, not 2 (load the current",
        ),
    ],
)
def test_plan_day_refuses(beats: dict[tuple[tuple[str, str], ...], list[int]], why: str) -> None:
    plan, reason = plan_day(beats, 0, DAY_MS)
    assert plan is None
    assert why in reason


def test_a_one_millisecond_sliver_becomes_a_window() -> None:
    beats = {HEARTBEAT: [t * HOUR_MS + 300_000 + 1 for t in range(1, 26)]}
    plan, _ = plan_day(beats, 0, DAY_MS)
    assert plan is not None
    assert plan.lo_ms == HOUR_MS + 1


def test_cli_rules_on_without_rules_exits_with_one_line(prometheus_url: str) -> None:
    argv = [sys.executable, "-m", "gpuwatch", "report", "--prometheus", prometheus_url,
            "--prometheus-rules", "on", "--from", "2026-10-01", "--to", "2026-10-02"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "--prometheus-rules on: no gpuwatch:report_window:heartbeat" in lines[0]


def test_cli_bad_rules_mode_exits_2(prometheus_url: str) -> None:
    argv = [sys.executable, "-m", "gpuwatch", "report", "--prometheus", prometheus_url,
            "--prometheus-rules", "always"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--prometheus-rules" in done.stderr
