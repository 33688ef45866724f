"""The report as Markdown (GitHub-flavoured tables), for a wiki page or a pull request.

Names are data: `_md` puts them on one line and backslash-escapes the characters
Markdown or a table gives a meaning to inside a line (`\\`, backtick, `*`, `_`, `[`, `]`,
`|`, `~`), and writes `<`, `>` and `&` as entities, so a name cannot add a link, a
column, an image, emphasis or HTML. Every name and figure sits inside a line (a table
cell, after "- " or "# "), where `#`, `-` or `+` mean nothing, so those stay as they are
("-$12.00" is not escaped). The report's own sentences (`_prose`) hold no Markdown
syntax and are written as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuwatch.core.text import counted, md_escape, md_name
from gpuwatch.plan.render import markdown_lines
from gpuwatch.report import figures as f
from gpuwatch.report import tables
from gpuwatch.report.result import (
    IDLE_MEANING,
    IDLE_MEANING_LINK,
    OWNED_INPUTS_MEANING,
    RENT_VS_BUY_MEANING,
    SAVINGS_MEANING,
    STATES_MEANING,
    TOKENS_MEANING,
    UNUSED_SHARE_MEANING,
    Report,
)


def _prose(text: str) -> str:
    """Our own sentences (the method's meanings) as Markdown: written as they are, since
    they hold no Markdown syntax (a test keeps it so); only `<` and `&` are entities."""
    return f.plain_text(text).replace("&", "&amp;").replace("<", "&lt;")


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_prose(h) for h in headers) + " |"]  # our own words
    lines.append("|" + "|".join(" --- " for _ in headers) + "|")
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _shared(table: tables.Table) -> list[str]:
    """A table of `tables`: names escaped as data, the other cells as text."""
    return _table(
        table.headers,
        (
            [md_name(c) if isinstance(c, tables.Name) else md_escape(c) for c in row]
            for row in table.rows
        ),
    )


def render_markdown(report: Report, generated: str = "") -> str:
    """The whole report as Markdown text."""
    out = [f"# GPU cost report {md_name(report.period.label)}", ""]
    out.append(f"Period: {md_escape(f.period_text(report.period))}  ")
    out.append(f"Source: {md_escape(report.source)}" + ("  " if generated else ""))
    if generated:
        out.append(f"Generated: {md_escape(generated)}")
    out += ["", "## Key figures", ""]
    out += _table(["figure", "value"], ([md_escape(k), md_escape(v)] for k, v in f.kpis(report)))

    out += ["", "## Cost per day", ""]
    if report.days:
        out += _table(
            ["day", "idle", "held", "busy, unknown, unsettled", "total"],
            (
                [
                    md_escape(d.day.isoformat()),
                    md_escape(f.usd(d.cost_by_class_usd["idle"])),
                    md_escape(f.usd(d.cost_by_class_usd["held"])),
                    md_escape(f.usd(d.cost_by_class_usd["other"])),
                    md_escape(f.usd(d.totals.cost_usd)),
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
        out.append(tables.no_waste_text(report))

    if report.changes:
        out += ["", f"## Change from {md_name(report.previous_label or '')}", ""]
        rows = []
        for c in report.changes:
            if c.unit == "ratio":
                delta = f.ABSENT if c.delta is None else f"{c.delta * 100:+.1f} points"
                rows.append(
                    [
                        md_escape(c.name),
                        md_escape(f.percent(c.previous)),
                        md_escape(f.percent(c.current)),
                        md_escape(delta),
                    ]
                )
            else:
                rows.append(
                    [
                        md_escape(c.name),
                        md_escape(f.usd(c.previous)),
                        md_escape(f.usd(c.current)),
                        md_escape(f"{f.signed_usd(c.delta)} ({f.signed_percent(c.relative)})"),
                    ]
                )
        out += _table(["figure", "previous", "this period", "change"], rows)

    out += ["", "## Hosts", ""]
    out += _shared(tables.hosts(report))
    out += ["", "## GPUs", ""]
    out += _shared(tables.gpus(report))
    out += ["", "## Time in each state", ""]
    out += _shared(tables.states(report))
    out += ["", _prose(STATES_MEANING)]
    out += ["", "## Rent vs buy", ""]
    out += _shared(tables.rent_vs_buy(report))
    if report.rent_vs_buy_gpus:
        out += [""]
        out += _shared(tables.rent_vs_buy_gpus(report))
    owning = tables.owned_inputs(report)
    if owning.rows:
        out += ["", _prose(OWNED_INPUTS_MEANING), ""]
        out += _shared(owning)
    out += ["", _prose(RENT_VS_BUY_MEANING)]
    if report.token_sources:
        out += ["", "## Tokens", ""]
        out += _shared(tables.tokens(report))
    if report.namespaces:
        out += ["", "## Namespaces", ""]
        out += _shared(tables.namespaces(report))
    if report.slurm_accounts:
        out += ["", "## Slurm accounts", ""]
        out += _shared(tables.slurm(report, by_user=False))
        if report.slurm_reclaimed_usd is not None:
            out += ["", f"$ reclaimed in the period: {f.usd(report.slurm_reclaimed_usd)}"]
        out += ["", "## Slurm users", ""]
        out += _shared(tables.slurm(report, by_user=True))
    if report.fleet_plan is not None:
        out += ["", *markdown_lines(report.fleet_plan, level=2)]
    sources = ", ".join(f"{n} ({counted(d, 'GPU-day')})" for n, d in report.price_sources.items())
    out += [
        "",
        "## Method",
        "",
        f"- Price sources: {md_escape(sources or f.ABSENT)}; the whole instance price is charged "
        "to its GPUs.",
        f"- Idle and held: {_prose(IDLE_MEANING)} ([docs/analysis.md]({IDLE_MEANING_LINK}))",
        "- Busy-weighted utilization = busy ÷ (busy + idle + held) seconds. "
        f"{_prose(TOKENS_MEANING)} {_prose(SAVINGS_MEANING)}",
        f"- Idle cost and unused share: {_prose(UNUSED_SHARE_MEANING)}",
        f"- Coverage: {md_escape(f.hours(report.observed_gpu_seconds))} observed of "
        f"{md_escape(f.hours(report.expected_gpu_seconds))} expected GPU-hours "
        f"({md_escape(f.percent(report.coverage_ratio))}).",
        "",
        "## Gaps and notes",
        "",
    ]
    out += [f"- {md_escape(n)}" for n in report.notes] or ["None."]
    return "\n".join(out) + "\n"
