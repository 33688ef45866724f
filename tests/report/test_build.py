"""Every figure of build_report against sums worked out by hand from tests/report/data.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from gpuwatch.report.build import build_report
from gpuwatch.report.model import Period
from tests.report.data import DAY1, DAY2, PERIOD, month_data, sample_data

HOUR = 3600.0


def test_kpis_are_the_sums_of_the_rows() -> None:
    report = build_report(sample_data())
    totals = report.totals
    assert totals.cost_usd == pytest.approx(48 + 48 + 24 + 48 + 19.2)  # 187.2
    assert totals.idle_cost_usd == pytest.approx(24 + 36 + 19.2)  # 79.2, held included
    assert totals.held_cost_usd == pytest.approx(36.0)
    assert report.idle_only_cost_usd == pytest.approx(43.2)
    assert totals.idle_ratio == pytest.approx(79.2 / 187.2)
    # busy 43200+21600+43200, idle 43200+86400, held 64800; unknown 86400 is in no ratio
    assert totals.busy_ratio == pytest.approx(108000 / (108000 + 129600 + 64800))
    assert dict(totals.class_seconds) == {
        "busy": 108000.0,
        "idle": 129600.0,
        "held": 64800.0,
        "unknown": 86400.0,
    }
    assert totals.energy_joules == 1e6


def test_coverage_is_observed_over_expected_gpu_seconds() -> None:
    report = build_report(sample_data())
    assert report.observed_gpu_seconds == 2 * 86400 + 43200 + 86400 + 86400
    assert report.coverage_ratio == pytest.approx(388800 / 518400)  # 0.75
    assert any("GPU-hours of the period were not observed" in n for n in report.notes)


def test_coverage_never_reads_above_one() -> None:
    """A source that counted more seconds than it expected (it should not: both local
    and fleet bound them to the same span) shows 100 % and says by how much."""
    data = replace(sample_data(), expected_gpu_seconds=388800.0 - 360.0)
    report = build_report(data)
    assert report.coverage_ratio == 1.0
    assert "0.10 GPU-hours were observed beyond the expected span" in " ".join(report.notes)


def test_coverage_is_absent_when_the_source_cannot_tell() -> None:
    report = build_report(replace(sample_data(), expected_gpu_seconds=None))
    assert report.coverage_ratio is None
    assert any(n.startswith("coverage unknown") for n in report.notes)


def test_savings_come_from_each_gpus_latest_day() -> None:
    report = build_report(sample_data())
    by_uuid = {g.uuid: g for g in report.gpus}
    # GPU-a's last day recommends an L4 at $1.50/h; GPU-b's recommendation of day 1 is gone
    assert by_uuid["GPU-a"].savings_usd_per_month == pytest.approx(1.5 * 730)
    assert by_uuid["GPU-b"].savings_usd_per_month is None
    assert by_uuid["GPU-c"].savings_usd_per_month is None
    # the headline is idle + held + right-sizing, one action per GPU: GPU-a rightsizes
    # ($1,095), GPU-c (idle all its one settled day for $19.20) is released: 19.2 / 24 h
    # x 730 h = $584
    assert report.savings is not None
    assert report.savings.rightsizing_usd_per_month == pytest.approx(1095.0)
    assert report.savings.idle_usd_per_month == pytest.approx(584.0)
    assert report.savings.held_usd_per_month == 0.0
    assert report.savings_usd_per_month == pytest.approx(1095.0 + 584.0)
    assert report.savings_usd_per_month == pytest.approx(
        sum(h.savings_usd_per_month or 0.0 for h in report.hosts)
    )


def test_savings_without_recommendations_are_idle_and_held() -> None:
    data = sample_data()
    rows = tuple(replace(r, recommended_gpu=None, savings_usd_per_hour=None) for r in data.gpu_days)
    report = build_report(replace(data, gpu_days=rows))
    assert report.savings is not None
    # GPU-a: idle $24 and held $36 over its 48 settled hours; GPU-c: idle $19.20 over 24 h
    assert report.savings.idle_usd_per_month == pytest.approx(24 / 48 * 730 + 19.2 / 24 * 730)
    assert report.savings.held_usd_per_month == pytest.approx(36 / 48 * 730)
    assert report.savings.rightsizing_usd_per_month == 0.0
    assert build_report(replace(data, gpu_days=())).savings is None
    # GPUs seen but nothing settled and nothing recommended: no rate to take, absent
    unsettled = tuple(replace(r, class_seconds={}) for r in rows)
    assert build_report(replace(data, gpu_days=unsettled)).savings is None


def test_release_savings_do_not_depend_on_the_period_length() -> None:
    """An idle GPU seen for one day reads the same monthly saving in a 2-day report and
    in a whole-month report: its own settled hours, not the period, set the rate."""
    data = sample_data()
    month = Period(PERIOD.start, PERIOD.start + timedelta(days=31), "2026-10")
    for period in (PERIOD, month):
        report = build_report(replace(data, period=period))
        (gpu_c,) = [i for i in report.top_waste if i.gpu.uuid == "GPU-c"]
        assert gpu_c.action_usd_per_month == pytest.approx(19.2 / 24 * 730)  # $584.00


def test_tokens_by_kind_divide_the_same_cost() -> None:
    report = build_report(sample_data())
    assert report.tokens.cost_usd == 70.0
    assert report.usd_per_million_tokens("prompt") == pytest.approx(70 / 2e6 * 1e6)  # 35
    assert report.usd_per_million_tokens("generation") == pytest.approx(70 / 5e5 * 1e6)  # 140
    assert report.usd_per_million_tokens("all") == pytest.approx(70 / 2.5e6 * 1e6)  # 28
    (source,) = report.token_sources
    assert (source.host, source.source, source.tokens["all"]) == ("alpha", "vllm", 2.5e6)


def test_no_data_means_absent_figures_not_zero_or_one() -> None:
    empty = build_report(replace(sample_data(), gpu_days=(), token_days=()))
    assert empty.totals.busy_ratio is None
    assert empty.totals.idle_ratio is None
    assert empty.usd_per_million_tokens("generation") is None
    assert empty.coverage_ratio == 0.0  # known expectation, nothing observed
    assert empty.savings_usd_per_month is None
    assert empty.days == ()
    assert empty.top_waste == ()
    assert empty.hosts == ()
    assert "no GPU data for the period" in empty.notes


def test_only_unknown_time_has_no_busy_ratio() -> None:
    data = sample_data()
    gpu_b = next(g for g in build_report(data).gpus if g.uuid == "GPU-b")
    assert gpu_b.totals.busy_ratio == 1.0  # 43200 busy, 86400 unknown
    unknown_only = replace(data, gpu_days=(data.gpu_days[3],))
    assert build_report(unknown_only).totals.busy_ratio is None


def test_cost_per_day_is_stacked_by_class() -> None:
    report = build_report(sample_data())
    day1, day2 = report.days
    assert (day1.day, day2.day) == (DAY1, DAY2)
    assert dict(day1.cost_by_class_usd) == pytest.approx({"idle": 43.2, "held": 0.0, "other": 48.0})
    assert dict(day2.cost_by_class_usd) == pytest.approx({"idle": 0.0, "held": 36.0, "other": 60.0})
    for day in report.days:
        assert sum(day.cost_by_class_usd.values()) == pytest.approx(day.totals.cost_usd)


def test_hosts_and_gpus() -> None:
    report = build_report(sample_data())
    alpha, beta = report.hosts
    assert (alpha.host, alpha.gpus, beta.host, beta.gpus) == ("alpha", 2, "beta", 1)
    assert alpha.totals.cost_usd == pytest.approx(168.0)
    assert alpha.totals.idle_cost_usd == pytest.approx(60.0)
    assert alpha.savings_usd_per_month == pytest.approx(1095.0)
    assert beta.totals.cost_usd == pytest.approx(19.2)
    assert beta.savings_usd_per_month == pytest.approx(584.0)  # GPU-c released
    assert [(g.host, g.gpu_index, g.uuid) for g in report.gpus] == [
        ("alpha", 0, "GPU-a"),
        ("alpha", 1, "GPU-b"),
        ("beta", 0, "GPU-c"),
    ]
    assert report.price_sources == {"catalog": 1, "static": 4}


def test_most_wasteful_gpus_and_their_actions() -> None:
    report = build_report(sample_data())
    first, second = report.top_waste  # GPU-b wasted nothing and has no recommendation now
    month_factor = 730 * HOUR / (2 * 86400)  # GPU-a's waste rate over its 48 settled h
    assert (first.gpu.uuid, first.waste_usd) == ("GPU-a", pytest.approx(60.0))  # type: ignore[comparison-overlap]
    # rightsizing ($1095/month) beats releasing its idle/held time (60 x 15.2 = $912.50)
    assert first.action == "rightsize"
    assert first.action_usd_per_month == pytest.approx(1095.0)
    assert 60.0 * month_factor == pytest.approx(912.5)
    assert "l4" in first.action_text
    assert (second.gpu.uuid, second.action) == ("GPU-c", "release idle")
    # GPU-c's own settled span is one day (it was off on day 2), not the 2-day period
    assert second.action_usd_per_month == pytest.approx(19.2 * 730 / 24)  # 584.0


def test_top_waste_keeps_ten_ordered_by_waste_then_savings() -> None:
    data = sample_data()
    template = data.gpu_days[4]  # GPU-c, idle all day for $19.20
    rows = [
        replace(
            template,
            uuid=f"GPU-{n:02d}",
            idle_cost_usd=float(n % 4),
            cost_usd=10.0,
            savings_usd_per_hour=float(n),
            recommended_gpu="t4",
        )
        for n in range(14)
    ]
    report = build_report(replace(data, gpu_days=tuple(rows), expected_gpu_seconds=None))
    ranked = [(i.waste_usd, i.gpu.savings_usd_per_month) for i in report.top_waste]
    assert len(ranked) == 10
    assert ranked == sorted(ranked, key=lambda r: (-r[0], -(r[1] or 0)))
    assert ranked[0] == (3.0, 11 * 730)  # GPUs 3, 7, 11 wasted $3; 11 saves most


def test_held_waste_says_release_the_holder() -> None:
    data = sample_data()
    held_day = replace(data.gpu_days[1], recommended_gpu=None, savings_usd_per_hour=None)
    report = build_report(replace(data, gpu_days=(held_day,)))
    (item,) = report.top_waste
    assert item.action == "release held"


def test_month_over_month_changes() -> None:
    report = build_report(month_data(2026, 10, 120.0, 30.0), month_data(2026, 9, 100.0, 50.0))
    assert report.previous_label == "2026-09"
    changes = {c.name: c for c in report.changes}
    assert changes["total cost"].delta == pytest.approx(20.0)
    assert changes["total cost"].relative == pytest.approx(0.2)
    assert changes["idle and held cost"].delta == pytest.approx(-20.0)
    assert changes["busy ratio"].delta == pytest.approx(0.0)
    assert changes["$/1M generated tokens"].delta is None  # no tokens either month
    assert build_report(month_data(2026, 10, 1.0, 0.0)).changes == ()
