"""The report as Markdown (GitHub-flavoured tables), for a wiki page or a pull request.

Names are data: `_md` puts them on one line and backslash-escapes every character
Markdown or a table gives a meaning to, and writes `<`, `>` and `&` as entities, so a
name cannot add a link, a column, an image, a heading or HTML.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuwatch.report import figures as f
from gpuwatch.report import tables
from gpuwatch.report.build import (
    IDLE_MEANING,
    IDLE_MEANING_LINK,
    SAVINGS_MEANING,
    TOKENS_MEANING,
    UNUSED_SHARE_MEANING,
    Report,
)

_SPECIAL = set("\\`*_{}[]|~")
_LEADING = set("#-+=>!")  # block markers at the start of a line


def _md(text: object) -> str:
    """Escape a text for Markdown inline content and table cells."""
    out = []
    for i, char in enumerate(f.plain_text(str(text))):
        if char in _SPECIAL or (i == 0 and char in _LEADING):
            out.append("\\" + char)
        elif char == "<":
            out.append("&lt;")
        elif char == ">":
            out.append("&gt;")
        elif char == "&":
            out.append("&amp;")
        else:
            out.append(char)
    return "".join(out)


def _name(text: str) -> str:
    return _md(f.plain_name(text))


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in headers) + " |"]
    lines.append("|" + "|".join(" --- " for _ in headers) + "|")
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _shared(table: tables.Table) -> list[str]:
    """A table of `tables`: names escaped as data, the other cells as text."""
    return _table(
        table.headers,
        ([_name(c) if isinstance(c, tables.Name) else _md(c) for c in row] for row in table.rows),
    )


def render_markdown(report: Report, generated: str = "") -> str:
    """The whole report as Markdown text."""
    out = [f"# GPU cost report {_name(report.period.label)}", ""]
    out.append(f"Period: {_md(f.period_text(report.period))}  ")
    out.append(f"Source: {_md(report.source)}" + ("  " if generated else ""))
    if generated:
        out.append(f"Generated: {_md(generated)}")
    out += ["", "## Key figures", ""]
    out += _table(["figure", "value"], ([_md(k), _md(v)] for k, v in f.kpis(report)))

    out += ["", "## Cost per day", ""]
    if report.days:
        out += _table(
            ["day", "idle", "held", "busy, unknown, unsettled", "total"],
            (
                [
                    _md(d.day.isoformat()),
                    _md(f.usd(d.cost_by_class_usd["idle"])),
                    _md(f.usd(d.cost_by_class_usd["held"])),
                    _md(f.usd(d.cost_by_class_usd["other"])),
                    _md(f.usd(d.totals.cost_usd)),
                ]
                for d in report.days
            ),
        )
    else:
        out.append("No data for this period.")

    out += ["", "## The most wasteful GPUs", ""]
    if report.top_waste:
        out += _shared(tables.waste(report))
    else:
        out.append("No GPU wasted anything in this period.")

    if report.changes:
        out += ["", f"## Change from {_name(report.previous_label or '')}", ""]
        rows = []
        for c in report.changes:
            if c.unit == "ratio":
                delta = f.ABSENT if c.delta is None else f"{c.delta * 100:+.1f} points"
                rows.append(
                    [_md(c.name), _md(f.percent(c.previous)), _md(f.percent(c.current)), _md(delta)]
                )
            else:
                rows.append(
                    [
                        _md(c.name),
                        _md(f.usd(c.previous)),
                        _md(f.usd(c.current)),
                        _md(f"{f.signed_usd(c.delta)} ({f.signed_percent(c.relative)})"),
                    ]
                )
        out += _table(["figure", "previous", "this period", "change"], rows)

    out += ["", "## Hosts", ""]
    out += _shared(tables.hosts(report))
    out += ["", "## GPUs", ""]
    out += _shared(tables.gpus(report))
    if report.token_sources:
        out += ["", "## Tokens", ""]
        out += _shared(tables.tokens(report))
    if report.namespaces:
        out += ["", "## Namespaces", ""]
        out += _shared(tables.namespaces(report))
    sources = ", ".join(f"{n} ({d} GPU-days)" for n, d in report.price_sources.items())
    out += [
        "",
        "## Method",
        "",
        f"- Price sources: {_md(sources or f.ABSENT)}; the whole instance price is charged "
        "to its GPUs.",
        f"- Idle and held: {_md(IDLE_MEANING)} ([docs/analysis.md]({IDLE_MEANING_LINK}))",
        "- Busy\\-weighted utilization \\= busy ÷ \\(busy \\+ idle \\+ held\\) seconds\\. "
        f"{_md(TOKENS_MEANING)} {_md(SAVINGS_MEANING)}",
        f"- Idle cost and unused share: {_md(UNUSED_SHARE_MEANING)}",
        f"- Coverage: {_md(f.hours(report.observed_gpu_seconds))} observed of "
        f"{_md(f.hours(report.expected_gpu_seconds))} expected GPU\\-hours "
        f"\\({_md(f.percent(report.coverage_ratio))}\\)\\.",
        "",
        "## Gaps and notes",
        "",
    ]
    out += [f"- {_md(n)}" for n in report.notes] or ["None."]
    return "\n".join(out) + "\n"
