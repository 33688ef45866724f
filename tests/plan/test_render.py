"""The plan in words and every format, with hostile names (names are data).

Units are labelled with pod names a user chose (`<!channel>`, mrkdwn, backticks, control
bytes, undecodable bytes, HTML); the Slack summary must pass slack_sdk's block models and
Slack's limits with every name as inline code, the text has no control character, the
Markdown and HTML escape every name, and the JSON keeps them as they are.
"""

from __future__ import annotations

import html
import json
from dataclasses import replace

import pytest

from gpuwatch.cli.plan import slack_payload
from gpuwatch.core.text import MAX_NAME_CHARS
from gpuwatch.core.units import HOURS_PER_MONTH
from gpuwatch.plan.model import PlanOptions, WorkloadNeed
from gpuwatch.plan.render import (
    PlanReport,
    assumptions,
    render_html,
    render_json,
    render_markdown,
    render_text,
    stands_on,
)
from gpuwatch.report.build import build_report
from gpuwatch.report.slack import build_summary_message
from gpuwatch.sizing import build_gpu_catalog
from tests.alerts.test_hostile_names import HOSTILE, assert_slack_accepts
from tests.report.data import sample_data

pytest.importorskip("highspy")

GIB = 1024**3
H100 = "H100-SXM-80GB"


def need(key: str, label: str, activity: str = "busy", memory_gib: float = 20.0) -> WorkloadNeed:
    return WorkloadNeed(
        key=key,
        label=label,
        host="node-1",
        gpu_uuids=(key,),
        current_gpu_id=H100,
        current_usd_per_hour=build_gpu_catalog().get(H100).rent_usd_per_hour,
        activity=activity,  # type: ignore[arg-type]
        memory_bytes=memory_gib * GIB,
        memory_basis="measured",
        activity_ratio=0.05,
        kernel_busy_ratio=0.05,  # kernel-busy as SM activity: the least it can be
        bandwidth_bytes_per_second=1e11,
        namespace="team",
        pods=(label,),
        held_memory_bytes=30 * GIB if activity == "held" else None,
        observed_seconds=9 * 86400.0,
    )


def plan_report(name: str, units: int = 3) -> PlanReport:
    from gpuwatch.plan.solve import solve

    needs = [need(f"u{i}", f"team/{name}-{i}") for i in range(units)]
    needs.append(need("idle", f"team/{name}-idle", activity="idle"))
    needs.append(need("held", f"team/{name}-held", activity="held"))
    options = PlanOptions(time_limit_seconds=5.0)
    plan = solve(needs, build_gpu_catalog(), options)
    return PlanReport(plan, tuple(needs), options, 30.0, "local", "2026-11-27 00:00 UTC")


@pytest.mark.parametrize("name", HOSTILE)
def test_the_plan_summary_with_hostile_names(name: str) -> None:
    report = plan_report(name)
    assert_slack_accepts(slack_payload(report))


@pytest.mark.parametrize("name", HOSTILE[:6])
def test_the_report_summary_carries_the_plan(name: str) -> None:
    report = replace(build_report(sample_data()), fleet_plan=plan_report(name))
    payload = build_summary_message(report, ("gpuwatch-report-2026-10.html",))
    assert_slack_accepts(payload)
    assert "What the fleet should be" in json.dumps(payload)


def test_a_long_plan_is_cut_with_a_count() -> None:
    text = json.dumps(slack_payload(plan_report("w", units=30)), ensure_ascii=False)
    assert "more moves" in text
    assert "move(s)" not in text


@pytest.mark.parametrize("name", HOSTILE)
def test_text_markdown_and_html_escape_names(name: str) -> None:
    report = plan_report(name)
    text = render_text(report)
    assert not any(c in text for c in "\x00\x07\x1b\x7f\r\u2028\u2029\u202e")
    markdown = render_markdown(report)
    for line in markdown.splitlines():
        assert "<" not in line.replace("&lt;", "")  # no raw HTML or autolink from a name
    page = render_html(report)
    assert "<!channel>" not in page
    assert "<script" not in page.lower()
    document = json.loads(render_json(report))
    labels = {w["label"] for w in document["workloads"]}
    assert f"team/{name}-0" in labels  # JSON keeps names as they are


def test_the_headline_re_derives() -> None:
    """$/month = $/h x 730; the saving is today's less the plan's."""
    report = plan_report("w")
    document = json.loads(render_json(report))
    for figure in ("current", "plan", "savings", "lower_bound"):
        assert document[f"{figure}_usd_per_month"] == pytest.approx(
            document[f"{figure}_usd_per_hour"] * HOURS_PER_MONTH
        )
    assert document["savings_usd_per_hour"] == pytest.approx(
        document["current_usd_per_hour"] - document["plan_usd_per_hour"]
    )
    text = render_text(report)
    assert f"${document['plan_usd_per_month']:,.2f}/month" in text
    kinds = [move["kind"] for move in document["moves"]]
    assert kinds[:2] == ["reclaim", "release"] or kinds[:2] == ["release", "reclaim"]


def test_a_long_name_is_capped_and_no_sentence_of_ours_is() -> None:
    """A pod name past `MAX_NAME_CHARS` ends in a visible "…" in every format but JSON
    (where names are whole); the assumptions, longer than that cap, are never cut."""
    long = "p" * 300
    report = replace(plan_report(long), source="http://prometheus.example/" + "q" * 200)
    capped = f"team/{long}"[: MAX_NAME_CHARS - 1] + "…"
    ours = [*assumptions(report), stands_on(report)]
    assert any(len(line) > MAX_NAME_CHARS for line in ours)
    for text in (render_text(report), render_markdown(report), render_html(report)):
        assert capped in text
        for line in ours:
            assert html.escape(line, quote=False) in text.replace("\\", "").replace("&#x27;", "'")
    document = json.loads(render_json(report))
    assert [*document["assumptions"], document["stands_on"]] == ours
    assert f"team/{long}-0" in {w["label"] for w in document["workloads"]}


@pytest.mark.parametrize(
    ("seconds", "lookback_days", "says"),
    [
        (3600.0, 30.0, "1 hour of data in the 30-day lookback"),
        (40 * 60.0, 1.0, "40 minutes of data in the 24-hour lookback"),
        (1.5 * 86400, 28.4596, "36 hours of data in the 28.5-day lookback"),
        (9 * 86400.0, 28.4596, "9 days of data in the 28.5-day lookback"),
        (31 * 86400.0, 30.0, "30 days of data in the 30-day lookback"),  # never more
    ],
)
def test_the_plan_says_how_much_data_it_had(
    seconds: float, lookback_days: float, says: str
) -> None:
    base = plan_report("w")
    needs = tuple(replace(n, observed_seconds=seconds) for n in base.needs)
    report = replace(base, needs=needs, days=lookback_days, end_epoch=1_764_288_000.0)
    line = stands_on(report)
    assert line.startswith(f"Computed 2026-11-27 00:00 UTC from {says} ")
    assert line.endswith(" to 2025-11-28 00:00 UTC.")
    for text in (render_text(report), render_markdown(report), render_html(report)):
        assert says in text


def test_a_time_sliced_plan_states_its_context_switch_allowance() -> None:
    """Three small units (20 GiB, 5 % SM activity and kernel-busy time) time-slice; the
    assumptions say what a time-sliced GPU holds and the allowance it was planned with."""
    report = plan_report("ts")
    assert any(p.mode == "shared" for p in report.plan.placements)
    text = render_text(report)
    assert "plus 5% of the GPU per unit for context switches" in text
    assert "[plan] context_switch_ratio" in text
    document = json.loads(render_json(report))
    assert {w["kernel_busy_p95_ratio"] for w in document["workloads"]} == {0.05}
