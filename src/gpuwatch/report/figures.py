"""How the text formats (HTML, Markdown, Slack) write a figure: one place, one style.

Absent figures (None) are written "n/a", never 0. Names are data: `plain_name` puts
them on one line (control characters as escapes); each format then escapes them for
its own syntax.
"""

from __future__ import annotations

from datetime import UTC, datetime

from gpuwatch.core.text import ABSENT, MAX_NAME_CHARS, flatten, plain_name, usd
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.report.model import Period
from gpuwatch.report.result import Report

__all__ = [
    "ABSENT",
    "MAX_NAME_CHARS",
    "hours",
    "kpis",
    "percent",
    "period_text",
    "plain_name",
    "plain_text",
    "rent_vs_buy_text",
    "savings_text",
    "signed_percent",
    "signed_usd",
    "usd",
    "utc",
]
"""ABSENT, MAX_NAME_CHARS, usd and plain_name come from `gpuwatch.core.text` (shared with
the fleet plan); the rest are the report's own."""


def signed_usd(value: float | None) -> str:
    """`+$12.00` / `-$3.50` for changes."""
    if value is None:
        return ABSENT
    return ("+" if value >= 0 else "-") + f"${abs(value):,.2f}"


def percent(ratio: float | None, digits: int = 1) -> str:
    """A ratio 0-1 as `12.3 %` (n/a when absent)."""
    return ABSENT if ratio is None else f"{ratio * 100:.{digits}f} %"


def signed_percent(ratio: float | None) -> str:
    """A relative change as `+12.3 %`."""
    return ABSENT if ratio is None else f"{ratio * 100:+.1f} %"


def hours(seconds: float | None) -> str:
    """Seconds as `1,234.5 h`."""
    return ABSENT if seconds is None else f"{seconds / HOUR_SECONDS:,.1f} h"


def plain_text(text: str) -> str:
    """A longer text (a note) on one line: control characters as escapes."""
    return flatten(text)


def utc(moment: datetime) -> str:
    """`2026-10-01 00:00 UTC`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def period_text(period: Period) -> str:
    """`2026-10-01 00:00 UTC to 2026-11-01 00:00 UTC` (+ month to date)."""
    text = f"{utc(period.start)} to {utc(period.end)}"
    return text + " (month to date)" if period.month_to_date else text


def rent_vs_buy_text(delta_usd: float | None, at: str = "busy fraction") -> str:
    """The rent-vs-buy position in words, from the monthly delta (rent - own), at the
    utilization `at` names ("busy fraction", "mean activity")."""
    if delta_usd is None:
        return ABSENT
    if delta_usd > 0:
        return f"buying would save {usd(delta_usd)}/month at the {at}"
    return f"renting is cheaper by {usd(-delta_usd)}/month at the {at}"


def savings_text(report: Report) -> str:
    """`$1,234.00 (idle $1,000.00 + held $200.00 + right-sizing $34.00)` per month."""
    savings = report.savings
    if savings is None:
        return ABSENT
    return (
        f"{usd(savings.total_usd_per_month)} (idle {usd(savings.idle_usd_per_month)} + "
        f"held {usd(savings.held_usd_per_month)} + right-sizing "
        f"{usd(savings.rightsizing_usd_per_month)})"
    )


def kpis(report: Report) -> list[tuple[str, str]]:
    """The headline figures as (label, text), in the order every format shows them."""
    totals = report.totals
    tokens = report.tokens
    return [
        ("Total GPU cost", usd(totals.cost_usd)),
        (
            "Idle and held cost",
            f"{usd(totals.idle_cost_usd)} ({percent(totals.idle_ratio)} of the cost)",
        ),
        ("Held cost (part of idle)", usd(totals.held_cost_usd)),
        ("Savings available per month", savings_text(report)),
        ("Busy-weighted utilization", percent(totals.busy_ratio)),
        ("$/1M generated tokens", usd(tokens.usd_per_million("generation"))),
        ("$/1M prompt tokens", usd(tokens.usd_per_million("prompt"))),
        ("$/1M tokens (all)", usd(tokens.usd_per_million("all"))),
        ("Rent vs buy", rent_vs_buy_text(report.rent_vs_buy_monthly_delta_usd)),
        (
            "Rent vs buy at mean activity",
            rent_vs_buy_text(report.rent_vs_buy_activity_monthly_delta_usd, "mean activity"),
        ),
        ("Data coverage (GPU-hours observed)", percent(report.coverage_ratio)),
    ]
