"""How every text output writes a dollar figure, a name, a GPU with its article and a
count with its noun (`counted`, from `alerts.messages`, which the alerts use too), and a
span of time.

Pure and dependency-light (only `alerts.messages`' text helpers), so that the report
(`report/figures.py`, `report/build.py`, which re-export these) and the fleet plan
(`plan/render.py`, `plan/moves.py`) share one style without importing each other.
"""

from __future__ import annotations

from gpuwatch.alerts.messages import counted, flatten

__all__ = ["ABSENT", "MAX_NAME_CHARS", "counted", "plain_name", "usd", "with_article"]

ABSENT = "n/a"
MAX_NAME_CHARS = 120

_AN_LETTERS = frozenset("AEFHILMNORSX8")
"""Initial characters read with a vowel sound in a GPU name (A100, H100, L4, RTX, 8000):
"an"; the others ("a T4", "a V100", "a B200") take "a"."""


def usd(value: float | None) -> str:
    """`$1,234.56` (n/a when absent)."""
    if value is None:
        return ABSENT
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value):,.2f}"


def plain_name(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """A name on one line, at most `limit` characters, a longer one cut with a visible
    "…" (escape it afterwards). For names only: our own sentences are never cut."""
    line = flatten(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def with_article(name: str) -> str:
    """`name` with its indefinite article: "an A100", "an H100", "an L4", "a T4"; read
    from its first letter or digit, so that markup counts for nothing ("an `l4`")."""
    first = next((c for c in name if c.isalnum()), "")
    return f"an {name}" if first.upper() in _AN_LETTERS else f"a {name}"


def _span(seconds: float) -> tuple[float, str]:
    """(count, unit) of a span rounded for a reader: whole seconds under a minute, whole
    minutes under an hour, hours under 2 days, else days; hours and days keep at most one
    decimal (28.4596 days: 28.5)."""
    if seconds < 59.5:
        return round(max(seconds, 0.0)), "second"
    if seconds < 3600 - 30:
        return round(seconds / 60.0), "minute"
    if seconds < 2 * 86400:
        return round(seconds / 3600.0, 1), "hour"
    return round(seconds / 86400.0, 1), "day"


def duration(seconds: float) -> str:
    """A span of time in words: "40 minutes", "1 hour", "36.5 hours", "28.5 days"."""
    count, unit = _span(seconds)
    return f"{count:g} {unit}{'' if count == 1 else 's'}"


def duration_adjective(seconds: float) -> str:
    """A span of time before a noun: "30-day", "36-hour", "28.5-day" (a 30-day lookback)."""
    count, unit = _span(seconds)
    return f"{count:g}-{unit}"
