"""How every text output writes a dollar figure, a name, a GPU with its article and a
count with its noun (`counted`, from `alerts.messages`, which the alerts use too).

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


def plain_name(text: str) -> str:
    """A name on one line, at most MAX_NAME_CHARS characters (escape it afterwards)."""
    line = flatten(text)
    return line if len(line) <= MAX_NAME_CHARS else line[: MAX_NAME_CHARS - 1] + "…"


def with_article(name: str) -> str:
    """`name` with its indefinite article: "an A100", "an H100", "an L4", "a T4"; read
    from its first letter or digit, so that markup counts for nothing ("an `l4`")."""
    first = next((c for c in name if c.isalnum()), "")
    return f"an {name}" if first.upper() in _AN_LETTERS else f"a {name}"
