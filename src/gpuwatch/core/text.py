"""How every output writes text: a dollar figure, a name per medium, a GPU with its
article, a count with its noun and a span of time. One home for each, so that the
report, the plan, the status table, the alerts and the CLI give one answer.

A bottom module: it imports nothing of gpuwatch.

- money: `usd` (`$1,234.56`, `-$1.50`, `n/a` when absent);
- a name on one line for a terminal or plain text: `plain_name` (`flatten`, then cut to
  `MAX_NAME_CHARS` with a visible "…", `shorten`);
- Markdown: `md_escape`, a name `md_name`; HTML: `html_escape`, a name `html_name`
  (`plain_name`, then escaped).
  Slack mrkdwn escaping lives with the Slack transport.
"""

from __future__ import annotations

import html

from gpuwatch.core.units import DAY_SECONDS, HOUR_SECONDS

__all__ = [
    "ABSENT",
    "MAX_NAME_CHARS",
    "counted",
    "duration",
    "duration_adjective",
    "flatten",
    "html_escape",
    "html_name",
    "md_escape",
    "md_name",
    "plain_name",
    "shorten",
    "usd",
    "with_article",
]

ABSENT = "n/a"
MAX_NAME_CHARS = 120

_MD_SPECIAL = frozenset("\\`*_[]|~#")
_MD_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}

_AN_LETTERS = frozenset("AEFHILMNORSX8")
"""Initial characters read with a vowel sound in a GPU name (A100, H100, L4, RTX, 8000):
"an"; the others ("a T4", "a V100", "a B200") take "a"."""


def usd(value: float | None) -> str:
    """`$1,234.56` (n/a when absent)."""
    if value is None:
        return ABSENT
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value):,.2f}"


def flatten(text: str) -> str:
    """`text` on one line: every non-printable character (newline, tab, line separator,
    escape...) written as its Python escape (`\\n`, `\\x1b`), so that a name can add
    no line and no terminal control to an output."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and its noun in agreement: "1 GPU", "3 GPUs", "0 GPUs" (`plural`:
    when not the noun + "s")."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def shorten(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """`text` in at most `limit` characters: a longer one cut, its last kept character
    a visible "…". The one length rule for names in every medium."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plain_name(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """A name on one line, at most `limit` characters, a longer one cut with a visible
    "…" (escape it afterwards). For names only: our own sentences are never cut."""
    return shorten(flatten(text), limit)


def md_escape(text: str) -> str:
    """Text as Markdown inline content or a table cell: on one line (`flatten`), every
    Markdown special character (backslash, backtick, `* _ [ ] | ~ #`) backslash-escaped,
    `<`, `>`, `&` as entities. Never cut: for a name, `md_escape(plain_name(name))`."""
    out = []
    for char in flatten(text):
        if char in _MD_ENTITIES:
            out.append(_MD_ENTITIES[char])
        elif char in _MD_SPECIAL:
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def md_name(text: str) -> str:
    """A name as Markdown: capped with "…" (`plain_name`), then escaped (`md_escape`)."""
    return md_escape(plain_name(text))


def html_escape(text: str) -> str:
    """Text as HTML element text or an attribute value, quotes included. Never cut and
    not flattened: for a name, `html_escape(plain_name(name))`."""
    return html.escape(text, quote=True)


def html_name(text: str) -> str:
    """A name as HTML: capped with "…" (`plain_name`), then escaped (`html_escape`)."""
    return html_escape(plain_name(text))


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
    if seconds < HOUR_SECONDS - 30:
        return round(seconds / 60.0), "minute"
    if seconds < 2 * DAY_SECONDS:
        return round(seconds / HOUR_SECONDS, 1), "hour"
    return round(seconds / DAY_SECONDS, 1), "day"


def duration(seconds: float) -> str:
    """A span of time in words: "40 minutes", "1 hour", "36.5 hours", "28.5 days"."""
    count, unit = _span(seconds)
    return f"{count:g} {unit}{'' if count == 1 else 's'}"


def duration_adjective(seconds: float) -> str:
    """A span of time before a noun: "30-day", "36-hour", "28.5-day" (a 30-day lookback)."""
    count, unit = _span(seconds)
    return f"{count:g}-{unit}"
