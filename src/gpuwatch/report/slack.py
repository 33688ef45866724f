"""`gpuwatch report --slack`: a Block Kit summary of a report.

The message (pure: `build_summary_message`) holds the headline figures, the top waste
items and the file name of the full report; `gpuwatch.slack.summary.send_summary` sends
it. Names are mrkdwn data (`name_text`, as in the alerts) and every text stays within
Slack's limits.
"""

from __future__ import annotations

from typing import Any

from gpuwatch.core.text import with_article
from gpuwatch.plan.render import slack_lines
from gpuwatch.report import figures as f
from gpuwatch.report.result import Report, WasteItem
from gpuwatch.slack.mrkdwn import (
    TEXT_MAX_CHARS,
    clip_text,
    escape,
    fit_lines,
    header_text,
    name_text,
)

SLACK_WASTE_ITEMS = 5
HEADER_MAX_CHARS = 150
FIELD_MAX_CHARS = 2000  # Slack: a section's fields, at most 10 of 2,000 characters each
MAX_FIELDS = 10


def _waste_line(item: WasteItem) -> str:
    """One waste item; every name through `name_text`, the action rebuilt from its parts
    (its recommended GPU is a name too)."""
    gpu = item.gpu
    if item.action == "rightsize" and gpu.recommended_gpu is not None:
        action = f"move the workload to {with_article(name_text(gpu.recommended_gpu))}"
        if gpu.candidates_phrase:
            action += f" (candidates: {escape(gpu.candidates_phrase)})"
    else:
        action = escape(f.plain_text(item.action_text))
    return (
        f"• {name_text(gpu.host)} / {name_text(gpu.name)} {name_text(gpu.uuid, 48)}: "
        f"{escape(f.usd(item.waste_usd))} idle or held; {action} "
        f"(saves {escape(f.usd(item.action_usd_per_month))}/month)"
    )


def build_summary_message(report: Report, report_files: tuple[str, ...]) -> dict[str, Any]:
    """The Block Kit summary; `report_files` are the written files' names (may be empty).

    Within Slack's limits whatever the names: header <= 150 characters, <= 10 fields of
    <= 2,000, every text <= 3,000 (lists cut with "… and N more"), 4 blocks.
    """
    totals = report.totals
    label = f.plain_name(report.period.label)
    fields = [
        ("Total GPU cost", f.usd(totals.cost_usd)),
        ("Idle and held", f"{f.usd(totals.idle_cost_usd)} ({f.percent(totals.idle_ratio)})"),
        ("Held", f.usd(totals.held_cost_usd)),
        ("Savings available per month", f.savings_text(report)),
        ("Busy-weighted utilization", f.percent(totals.busy_ratio)),
        ("$/1M generated tokens", f.usd(report.usd_per_million_tokens("generation"))),
        ("Data coverage", f.percent(report.coverage_ratio)),
        ("Rent vs buy", f.rent_vs_buy_text(report.rent_vs_buy_monthly_delta_usd)),
    ][:MAX_FIELDS]
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {
                "type": "plain_text",
                "text": header_text(f"GPU cost report {label}", HEADER_MAX_CHARS),
            },
        },
        {
            "type": "section",
            "fields": [
                {
                    "type": "mrkdwn",
                    "text": clip_text(f"*{escape(name)}*\n{escape(value)}", FIELD_MAX_CHARS),
                }
                for name, value in fields
            ],
        },
    ]
    if report.top_waste:
        title = "*Most wasteful GPUs*"
        shown = report.top_waste[:SLACK_WASTE_ITEMS]
        unlisted = len(report.top_waste) - len(shown)

        def more(count: int) -> str:
            return f"… and {count} more in the full report"

        lines = [_waste_line(item) for item in shown]
        listed = fit_lines(lines, TEXT_MAX_CHARS - len(title) - 1, more, left_out=unlisted)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"{title}\n{listed}"}})
    if report.fleet_plan is not None:
        plan_lines = slack_lines(report.fleet_plan)
        blocks.append(
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": fit_lines(plan_lines, TEXT_MAX_CHARS, lambda n: f"… and {n} more"),
                },
            }
        )
    period = escape(f.period_text(report.period))
    if report_files:
        where = "Full report: " + fit_lines(
            [name_text(n, 100) for n in report_files],
            TEXT_MAX_CHARS - len("Full report: ") - len(period) - 3,
            lambda n: f"… and {n} more",
            ", ",
        )
    else:
        where = "Full report: not written to a file (run with --out DIR)"
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"{where} · {period}"}],
        }
    )
    text = (
        f"GPU cost report {escape(label)}: {f.usd(totals.cost_usd)} total, "
        f"{f.usd(totals.idle_cost_usd)} idle or held"
    )
    return {"text": clip_text(text), "blocks": blocks}
