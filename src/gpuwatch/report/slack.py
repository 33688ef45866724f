"""`gpuwatch report --slack`: a Block Kit summary of a report, sent through the outbox.

The message (pure: `build_summary_message`) holds the headline figures, the top waste
items and the file name of the full report. `send_summary` queues it in a SQLite
outbox of its own (`state_dir/reports.sqlite3`, the alerts' `Outbox` class: an agent's
alert dispatcher never sees it, so no message goes out twice) and delivers everything
queued there with the alerts' retry policy; a message Slack could not take stays queued
for the next report. Names are mrkdwn data (`name_text`, as in the alerts) and every
text stays within Slack's limits; the webhook URL never leaves `gpuwatch.alerts`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwatch.alerts.config import SlackConfig
from gpuwatch.alerts.delivery import (
    RetryPolicy,
    Transport,
    WebhookTransport,
    describe_answer,
    send_with_retries,
)
from gpuwatch.alerts.messages import (
    TEXT_MAX_CHARS,
    clip_text,
    escape,
    fit_lines,
    name_text,
    plain_name,
)
from gpuwatch.alerts.outbox import Outbox
from gpuwatch.alerts.secret import WebhookUrl
from gpuwatch.core.text import with_article
from gpuwatch.report import figures as f
from gpuwatch.report.build import Report, WasteItem

REPORT_OUTBOX_FILE = "reports.sqlite3"
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
                "text": plain_name(f"GPU cost report {label}", HEADER_MAX_CHARS),
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
        from gpuwatch.plan.render import slack_lines  # noqa: PLC0415

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


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """What became of the queued summaries."""

    sent: int
    pending: int  # still queued (Slack failed; the next report tries again)
    line: str  # one URL-free line for the user

    @property
    def failed(self) -> bool:
        """True when a summary was refused or is still queued."""
        return self.pending > 0 or self.refused

    refused: bool = False  # Slack refused a summary (dropped)


def send_summary(
    payload: dict[str, Any],
    config: SlackConfig,
    webhook_url: str,
    state_dir: Path,
    *,
    now: Callable[[], float],
    sleep: Callable[[float], object],
    transport: Transport | None = None,
) -> SendOutcome:
    """Queue `payload` in the report outbox, then deliver everything queued there.

    Raises OutboxError when the outbox cannot be used (state_dir not writable).
    """
    url = WebhookUrl(webhook_url)
    transport = transport or WebhookTransport(url, config.timeout_seconds, now)
    policy = RetryPolicy(
        config.max_retries, config.retry_backoff_seconds, config.retry_backoff_max_seconds
    )
    outbox = Outbox(
        state_dir / REPORT_OUTBOX_FILE, max_messages=config.outbox_max_messages, now=now
    )
    sent = 0
    refused = False
    line = "Slack took the report summary"
    try:
        outbox.enqueue(lambda _id: payload, now(), {})
        last_id = 0
        while (message := outbox.next_pending(last_id)) is not None:
            last_id = message.id
            result = send_with_retries(
                transport,
                message.payload,
                policy,
                sleep=sleep,
                stopping=lambda: False,
                on_failure=lambda _reason: None,
                before_attempt=lambda: outbox.begin_attempt(message.id),
                after_failed_attempt=lambda: outbox.end_attempt(message.id),
            )
            answer = describe_answer(result.last)
            if result.outcome == "sent":
                outbox.remove(message.id, success_seconds=now())
                sent += 1
            elif result.outcome == "dropped":
                outbox.remove(message.id)
                refused = True
                line = f"Slack refused the report summary ({answer}); dropped it"
            else:
                line = f"Slack did not take the report summary ({answer}); it stays queued"
                break
        return SendOutcome(sent, outbox.pending_count, url.scrub(line), refused)
    finally:
        outbox.close()
