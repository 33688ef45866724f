"""Per-GPU state seconds and mean activity, rent vs buy at both utilizations, and the
layout fixes: UUIDs and "100.0 %" kept on one line in the PDF, Markdown prose not
escaped, the right article before a GPU name."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwatch.core.text import with_article
from gpuwatch.report.build import build_report
from gpuwatch.report.csv_format import render_csv
from gpuwatch.report.html import render_html
from gpuwatch.report.json_format import render_json
from gpuwatch.report.markdown import render_markdown
from gpuwatch.report.model import GpuDay, RentVsBuyGpu, ReportData
from gpuwatch.report.pdf import render_pdf
from gpuwatch.report.slack import build_summary_message
from tests.report.data import DAY1, DAY2, H100, PERIOD, gpu_day, seconds

UUID_A = "GPU-2fc0195c-3848-d59d-2cca-b96e3887fa21"
UUID_B = "GPU-2fc0195c-9c6d-5f4f-aaaa-70dccc038a0a"  # shares the first group with A


def _day(uuid: str, index: int, day: object, **kwargs: object) -> GpuDay:
    fields: dict[str, object] = {
        "observed_seconds": 86400.0,
        "class_seconds": seconds(busy=86400),
        "cost_usd": 96.0,
        "idle_cost_usd": 0.0,
        "held_cost_usd": 0.0,
    }
    fields.update(kwargs)
    return gpu_day("node-1", uuid, index, H100, day, **fields)  # type: ignore[arg-type]


def states_data() -> ReportData:
    """GPU 0: two days busy at 90 % then underutilized at 20 %; GPU 1: a day idle and a
    day with no activity signal (no state, no activity figure)."""
    rows = (
        _day(
            UUID_A, 0, DAY1,
            state_seconds={"busy": 86400.0},
            activity_seconds=0.9 * 86400, activity_sampled_seconds=86400.0,
        ),
        _day(
            UUID_A, 0, DAY2,
            state_seconds={"underutilized": 86400.0},
            activity_seconds=0.2 * 86400, activity_sampled_seconds=86400.0,
        ),
        _day(
            UUID_B, 1, DAY1,
            class_seconds=seconds(idle=86400), idle_cost_usd=96.0,
            state_seconds={"pending": 1800.0, "idle": 84600.0},
            activity_seconds=0.0, activity_sampled_seconds=86400.0,
        ),
        _day(UUID_B, 1, DAY2, class_seconds=seconds(unknown=86400)),
    )  # fmt: skip
    return ReportData(
        period=PERIOD,
        gpu_days=rows,
        expected_gpu_seconds=4 * 86400.0,
        rent_vs_buy_monthly_delta_usd=2000.0,
        rent_vs_buy_activity_monthly_delta_usd=-1000.0,
    )


def test_state_seconds_and_mean_activity_by_hand() -> None:
    report = build_report(states_data())
    a, b = report.gpus
    assert a.totals.state_seconds["busy"] == 86400.0
    assert a.totals.state_seconds["underutilized"] == 86400.0
    assert a.totals.busy_ratio == 1.0  # the busy fraction counts underutilized as busy
    assert a.totals.mean_activity_ratio == pytest.approx((0.9 + 0.2) / 2)
    assert b.totals.state_seconds["idle"] == 84600.0
    assert b.totals.state_seconds["pending"] == 1800.0
    assert b.totals.no_state_seconds == 86400.0  # the day without a signal
    assert b.totals.mean_activity_ratio == 0.0  # the idle day only: 0 / 86400 s
    alone = build_report(replace(states_data(), gpu_days=states_data().gpu_days[3:]))
    assert alone.gpus[0].totals.mean_activity_ratio is None  # absent, not 0


def test_every_format_shows_states_activity_and_both_rent_vs_buy() -> None:
    data = states_data()
    report = build_report(data)
    document = json.loads(render_json(report))
    gpu = document["gpus"][0]
    assert gpu["analysis_state_seconds"]["underutilized"] == 86400.0
    assert gpu["mean_activity_ratio"] == pytest.approx(0.55)
    assert document["rent_vs_buy_activity_monthly_delta_usd"] == -1000.0
    markdown = render_markdown(report)
    assert "| node\\-1" not in markdown
    assert "| underutilized |" in markdown
    # busy, underutilized, idle, held, pending, unknown, mean activity
    assert "| 24.0 h | 24.0 h | 0.0 h | 0.0 h | 0.0 h | 0.0 h | 55.0 % |" in markdown
    assert "| mean activity | -$1,000.00 | renting is cheaper by $1,000.00/month" in markdown
    assert "as 100 % used" in markdown  # what "busy" means, in the rent-vs-buy section
    page = render_html(report)
    assert "Time in each state" in page
    assert "55.0\u00a0%" in page
    lines = render_csv(data).splitlines()
    header = lines[0].split(",")
    row = dict(zip(header, lines[3].split(","), strict=True))  # GPU 0, day 2 (by day)
    assert float(row["underutilized_state_seconds"]) == 86400.0
    assert float(row["mean_activity"]) == pytest.approx(0.2)
    last = dict(zip(header, lines[4].split(","), strict=True))  # GPU 1, day 2
    assert last["mean_activity"] == ""  # absent, not 0
    assert float(last["unknown_state_seconds"]) == 86400.0


def test_rent_vs_buy_without_data_is_absent() -> None:
    data = replace(
        states_data(),
        rent_vs_buy_monthly_delta_usd=None,
        rent_vs_buy_activity_monthly_delta_usd=None,
    )
    markdown = render_markdown(build_report(data))
    section = markdown.split("## Rent vs buy")[1].split("##")[0]
    assert section.count("| n/a | n/a |") == 2
    assert "$0.00" not in section


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("A100-SXM-80GB", "an A100-SXM-80GB"),
        ("H100", "an H100"),
        ("L4", "an L4"),
        ("L40S", "an L40S"),
        ("T4", "a T4"),
        ("V100", "a V100"),
        ("RTX-6000-Ada", "an RTX-6000-Ada"),
        ("B200", "a B200"),
        ("`l4`", "an `l4`"),  # markup counts for nothing: not "a `l4`"
        ("`T4-16GB`", "a `T4-16GB`"),
        ("*H100*", "an *H100*"),
    ],
)
def test_article(name: str, expected: str) -> None:
    assert with_article(name) == expected


def test_the_waste_action_uses_the_right_article() -> None:
    rows = tuple(
        replace(r, recommended_gpu="A100-SXM-80GB", savings_usd_per_hour=2.0)
        for r in states_data().gpu_days
    )
    report = build_report(replace(states_data(), gpu_days=rows))
    texts = [i.action_text for i in report.top_waste if i.action == "rightsize"]
    assert texts
    assert all("to an A100-SXM-80GB" in t for t in texts)


def test_the_slack_summary_puts_the_article_before_the_code_formatted_name() -> None:
    rows = tuple(
        replace(r, recommended_gpu="L4-24GB", savings_usd_per_hour=2.0)
        for r in states_data().gpu_days
    )
    report = build_report(replace(states_data(), gpu_days=rows))
    text = json.dumps(build_summary_message(report, ("r.html",)), ensure_ascii=False)
    assert "move the workload to an `L4-24GB`" in text
    assert "a `L4-24GB`" not in text


def test_markdown_escapes_names_not_prose() -> None:
    rows = tuple(replace(r, host="a*b_[c]|d~") for r in states_data().gpu_days)
    markdown = render_markdown(build_report(replace(states_data(), gpu_days=rows)))
    assert "a\\*b\\_\\[c\\]\\|d\\~" in markdown
    assert "Busy-weighted utilization = busy ÷ (busy + idle + held) seconds." in markdown
    for escaped in ("\\-", "\\(", "\\)", "\\=", "\\+", "\\.", "\\#"):
        assert escaped not in markdown, escaped


def test_pdf_keeps_uuids_and_percentages_on_one_line(tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(render_pdf(render_html(build_report(states_data()))))
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], check=True, capture_output=True, text=True
    ).stdout.replace("\u00a0", " ")
    lines = text.splitlines()
    # the GPU identities table: each whole UUID on one line
    assert any(UUID_A in line for line in lines)
    assert any(UUID_B in line for line in lines)
    # the wide tables: the shortest prefix that tells the two apart
    assert "GPU-2fc0195c-3…" in text
    assert "GPU-2fc0195c-9…" in text
    assert "100.0 %" in text
    assert not any(line.strip() == "%" for line in lines)


def test_pdf_keeps_a_signed_amount_in_one_piece(tmp_path: Path) -> None:
    """A long host name makes the per-GPU rent-vs-buy row tall and its cells narrow: the
    line broke after the sign ("+" above "$2,408.78")."""
    line = RentVsBuyGpu(
        host="node-1-with-a-rather-long-hostname.example.internal",
        uuid=UUID_A,
        gpu_index=0,
        rent_usd_per_hour=4.0,
        owned_usd_per_year=11_694.0,
        busy_ratio=1.0,
        activity_ratio=0.2,
        monthly_delta_usd=2_408.78,
        activity_monthly_delta_usd=-12_390.50,
    )
    page = render_html(build_report(replace(states_data(), rent_vs_buy_gpus=(line,))))
    assert '<span class="amount">+$2,408.78</span>' in page
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(render_pdf(page))
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], check=True, capture_output=True, text=True
    ).stdout
    row = next(line for line in text.splitlines() if "$11,694.00" in line)
    assert "+$2,408.78" in row  # not "+" on the line above and "$2,408.78" on this one
    assert "-$12,390.50" in row


def test_rent_vs_buy_per_gpu_lines_render_in_every_format() -> None:
    line = RentVsBuyGpu(
        host="node-1",
        uuid=UUID_A,
        gpu_index=0,
        rent_usd_per_hour=4.0,
        owned_usd_per_year=11_694.0,
        busy_ratio=1.0,
        activity_ratio=0.2,
        monthly_delta_usd=4.0 * 730 * 1.0 - 11_694.0 / 12,  # 1,945.50
        activity_monthly_delta_usd=4.0 * 730 * 0.2 - 11_694.0 / 12,  # -390.50
    )
    report = build_report(replace(states_data(), rent_vs_buy_gpus=(line,)))
    markdown = render_markdown(report)
    row = (
        f"| node-1 | 0 | {UUID_A} | $4.00 | $11,694.00 | 100.0 % | 20.0 % | +$1,945.50 | -$390.50 |"
    )
    assert row in markdown
    assert json.loads(render_json(report))["rent_vs_buy_gpus"][0]["owned_usd_per_year"] == 11694
    page = render_html(report)
    assert "+$1,945.50" in page
    assert "20.0\u00a0%" in page
