"""The report as one self-contained HTML page: inline CSS and SVG, no JavaScript.

Every text that comes from data (host, GPU and source names, notes, the source URL)
goes through `_e` (`core.text.html_escape`, quotes included), in element text, in attributes and in
SVG alike: a name holding `<script>` renders as text. A chart is drawn only when it has
something to draw; otherwise the page says "no data" in its place. The same page is the
PDF's input (`pdf.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from gpuwatch.core.text import counted, html_escape, html_name
from gpuwatch.plan.render import html_section
from gpuwatch.report import figures as f
from gpuwatch.report import tables
from gpuwatch.report.result import (
    COST_CLASSES,
    IDLE_MEANING,
    IDLE_MEANING_LINK,
    OWNED_INPUTS_MEANING,
    RENT_VS_BUY_MEANING,
    SAVINGS_MEANING,
    STATES_MEANING,
    TOKENS_MEANING,
    UNUSED_SHARE_MEANING,
    Change,
    DayLine,
    Report,
    WasteItem,
)

COLORS = {"idle": "#e8a33d", "held": "#c4463a", "other": "#4a7fb5"}
CLASS_LABELS = {"idle": "idle", "held": "held", "other": "busy, unknown, unsettled"}

_CSS = """
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222;
       margin: 24px; font-size: 13px; }
h1 { font-size: 22px; margin-bottom: 2px; } h2 { font-size: 16px; margin-top: 26px;
     border-bottom: 1px solid #ccc; padding-bottom: 3px; }
.meta { color: #555; margin: 2px 0; }
.kpis { display: flex; flex-wrap: wrap; gap: 8px; margin-top: 14px; }
.kpi { border: 1px solid #ddd; border-radius: 4px; padding: 6px 10px; width: 150px; }
.kpi .label { color: #666; font-size: 11px; } .kpi .value { font-size: 15px; font-weight: bold; }
table { border-collapse: collapse; margin-top: 6px; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 3px 8px; text-align: right; }
th { background: #f4f4f4; } td.text, th.text, td.uuid, th.uuid { text-align: left; }
td.uuid { font-family: "DejaVu Sans Mono", monospace; font-size: 9px; white-space: nowrap; }
td.gpu { min-width: 80px; }
.meaning { font-size: 11px; color: #444; }
table { font-size: 11px; }
tr { page-break-inside: avoid; }
.legend span { display: inline-block; margin-right: 14px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
.nodata { color: #777; font-style: italic; }
.amount { white-space: nowrap; }
svg.chart { width: 100%; max-width: 760px; height: auto; }
@page { size: A4; margin: 12mm; }
@media print { body { margin: 0; } }
"""


_TEXT_HEADERS = frozenset(
    {"host", "GPU", "action", "recommendation", "source", "position", "purchase", "facility"}
)


def _e(text: object) -> str:
    """Escape for HTML text and attribute values."""
    return html_escape(str(text))


_UNIT = re.compile(r"(\d) (%|h|points|years|W)(?!\w)")
_SIGNED_USD = re.compile(r"[+-]\$[\d,]+(?:\.\d+)?")


def _figure(text: str) -> str:
    """A figure's text escaped, its number kept on one line with its unit ("100.0 %",
    "12.5 h", "3 years", "1,274 W": a no-break space, so a narrow cell never breaks
    "100.0 / %"), and a signed amount in one piece ("+$2,408.78": a line may otherwise
    break after the sign)."""
    escaped = _e(_UNIT.sub("\\1\u00a0\\2", text))
    return _SIGNED_USD.sub(lambda m: f'<span class="amount">{m.group(0)}</span>', escaped)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], text_columns: int = 1) -> str:
    """A table; cells are already escaped. The first `text_columns` columns, and those
    whose header is in _TEXT_HEADERS, are left-aligned text; "uuid" columns are small."""
    classes = [
        "uuid"
        if h == "uuid"
        else "text gpu"
        if h == "GPU"
        else "text"
        if i < text_columns or h in _TEXT_HEADERS
        else ""
        for i, h in enumerate(headers)
    ]

    def cell(tag: str, i: int, content: str) -> str:
        return (
            f'<{tag} class="{classes[i]}">{content}</{tag}>'
            if classes[i]
            else (f"<{tag}>{content}</{tag}>")
        )

    head = "".join(cell("th", i, _e(h)) for i, h in enumerate(headers))
    body = ["<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows]
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _shared(table: tables.Table, short: Mapping[str, str] | None = None) -> str:
    """A table of `tables`: names escaped as data, the other cells as text. With
    `short` (tables.short_uuids), a "uuid" cell shows its short form, the whole UUID in
    its title (and in the page's GPU identities table), so no UUID wraps in a cell."""
    uuid_column = table.headers.index("uuid") if "uuid" in table.headers else -1

    def cell(i: int, c: str) -> str:
        if short is not None and i == uuid_column and c in short:
            return f'<span title="{html_name(c)}">{html_name(short[c])}</span>'
        return html_name(c) if isinstance(c, tables.Name) else _figure(c)

    return _table(
        table.headers,
        ([cell(i, c) for i, c in enumerate(row)] for row in table.rows),
        text_columns=table.text_columns,
    )


def _nodata(what: str) -> str:
    return f'<p class="nodata">{_e(what)}: no data for this period.</p>'


def cost_per_day_svg(days: Sequence[DayLine], width: int = 760, height: int = 260) -> str:
    """Stacked bars of each day's cost by class; "" when no day cost anything."""
    peak = max((d.totals.cost_usd for d in days), default=0.0)
    if peak <= 0:
        return ""
    left, bottom, top = 64, 28, 10
    plot_w, plot_h = width - left - 10, height - bottom - top
    slot = plot_w / len(days)
    bar_w = max(slot * 0.75, 1.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="cost-per-day" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">',
        f"<title>{_e('Cost per day by class, USD')}</title>",
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - fraction)
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">'
            f"{_e(f.usd(peak * fraction))}</text>"
        )
    label_every = max(1, len(days) // 16)
    for i, day in enumerate(days):
        x = left + i * slot + (slot - bar_w) / 2
        y = top + plot_h
        for name in COST_CLASSES:
            value = day.cost_by_class_usd.get(name, 0.0)
            if value <= 0:
                continue
            h = plot_h * value / peak
            y -= h
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" '
                f'height="{h:.2f}" fill="{COLORS[name]}"><title>'
                f"{_e(f'{day.day.isoformat()} {CLASS_LABELS[name]}: {f.usd(value)}')}"
                "</title></rect>"
            )
        if i % label_every == 0:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{height - 10}" font-size="10" '
                f'text-anchor="middle">{_e(day.day.strftime("%d"))}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def waste_svg(items: Sequence[WasteItem], width: int = 760) -> str:
    """Horizontal bars of the most wasteful GPUs' idle + held cost; "" when none wasted."""
    items = [i for i in items if i.waste_usd > 0]
    if not items:
        return ""
    peak = max(i.waste_usd for i in items)
    row_h, left, right = 22, 260, 90
    height = row_h * len(items) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="waste" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">',
        f"<title>{_e('Idle and held cost of the most wasteful GPUs, USD')}</title>",
    ]
    for n, item in enumerate(items):
        y = 5 + n * row_h
        held = item.gpu.totals.held_cost_usd
        scale = (width - left - right) / peak
        label = f"{f.plain_name(item.gpu.host)} / {f.plain_name(item.gpu.name)}"
        if item.gpu.gpu_index is not None:
            label += f" #{item.gpu.gpu_index}"
        parts.append(
            f'<text x="{left - 6}" y="{y + 14}" font-size="10" text-anchor="end">'
            f"{_e(f.plain_name(label, 48))}</text>"
        )
        x = float(left)
        for name, value in (("held", held), ("idle", item.waste_usd - held)):
            if value <= 0:
                continue
            w = value * scale
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{y + 3}" width="{w:.2f}" height="{row_h - 6}" '
                f'fill="{COLORS[name]}"><title>{_e(f"{label} {name}: {f.usd(value)}")}</title>'
                "</rect>"
            )
            x += w
        parts.append(
            f'<text x="{x + 6:.1f}" y="{y + 14}" font-size="10">{_e(f.usd(item.waste_usd))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _legend() -> str:
    spans = "".join(
        f'<span><i class="swatch" style="background:{COLORS[c]}"></i>{_e(CLASS_LABELS[c])}</span>'
        for c in COST_CLASSES
    )
    return f'<p class="legend">{spans}</p>'


def _kpis(report: Report) -> str:
    cells = "".join(
        f'<div class="kpi"><div class="label">{_e(label)}</div>'
        f'<div class="value">{_figure(value)}</div></div>'
        for label, value in f.kpis(report)
    )
    return f'<div class="kpis">{cells}</div>'


def _change_row(change: Change) -> list[str]:
    if change.unit == "ratio":
        now, before = f.percent(change.current), f.percent(change.previous)
        delta = f.ABSENT if change.delta is None else f"{change.delta * 100:+.1f} points"
        return [_e(change.name), _figure(before), _figure(now), _figure(delta), ""]
    return [
        _e(change.name),
        _e(f.usd(change.previous)),
        _e(f.usd(change.current)),
        _figure(f.signed_usd(change.delta)),
        _figure(f.signed_percent(change.relative)),
    ]


def _sections(report: Report) -> list[str]:
    out: list[str] = []
    short = tables.short_uuids(g.uuid for g in report.gpus)
    out.append("<h2>Cost per day</h2>")
    chart = cost_per_day_svg(report.days)
    out.append(chart + _legend() if chart else _nodata("Cost per day"))

    out.append("<h2>The most wasteful GPUs</h2>")
    if report.top_waste:
        out.append(waste_svg(report.top_waste) or "")
        out.append(_shared(tables.waste(report), short))
    else:
        out.append(f'<p class="nodata">{_e(tables.no_waste_text(report))}</p>')

    if report.changes:
        out.append(f"<h2>Change from {_e(report.previous_label or '')}</h2>")
        out.append(
            _table(
                ["figure", "previous", "this period", "change", "relative"],
                (_change_row(c) for c in report.changes),
            )
        )

    out.append("<h2>Hosts</h2>")
    out.append(_shared(tables.hosts(report)) if report.hosts else _nodata("Hosts"))

    out.append("<h2>GPUs</h2>")
    out.append(_shared(tables.gpus(report), short) if report.gpus else _nodata("GPUs"))

    out.append("<h2>Time in each state</h2>")
    if report.gpus:
        out.append(_shared(tables.states(report), short))
        out.append(f'<p class="meaning">{_e(STATES_MEANING)}</p>')
        out.append("<h2>GPU identities</h2>")
        out.append(_shared(tables.identities(report)))
    else:
        out.append(_nodata("States"))

    out.append("<h2>Rent vs buy</h2>")
    out.append(_shared(tables.rent_vs_buy(report)))
    if report.rent_vs_buy_gpus:
        out.append(_shared(tables.rent_vs_buy_gpus(report), short))
    owning = tables.owned_inputs(report)
    if owning.rows:
        out.append(f'<p class="meaning">{_e(OWNED_INPUTS_MEANING)}</p>')
        out.append(_shared(owning))
    out.append(f'<p class="meaning">{_e(RENT_VS_BUY_MEANING)}</p>')

    out.append("<h2>Tokens</h2>")
    if report.token_sources:
        out.append(_shared(tables.tokens(report)))
    else:
        out.append(_nodata("Tokens"))
    if report.namespaces:
        out.append("<h2>Namespaces</h2>")
        out.append(_shared(tables.namespaces(report)))
    if report.slurm_accounts:
        out.append("<h2>Slurm accounts</h2>")
        out.append(_shared(tables.slurm(report, by_user=False)))
        if report.slurm_reclaimed_usd is not None:
            out.append(f"<p>$ reclaimed in the period: {_e(f.usd(report.slurm_reclaimed_usd))}</p>")
        out.append("<h2>Slurm users</h2>")
        out.append(_shared(tables.slurm(report, by_user=True)))
    if report.fleet_plan is not None:
        out.append(html_section(report.fleet_plan))
    out.extend(_appendix(report))
    return out


def _appendix(report: Report) -> list[str]:
    sources = ", ".join(
        f"{name} ({counted(days, 'GPU-day')})" for name, days in report.price_sources.items()
    )
    notes = "".join(f"<li>{_e(f.plain_text(n))}</li>" for n in report.notes)
    return [
        "<h2>Method</h2>",
        "<ul>",
        f"<li>Source: {_e(report.source)}. Period: {_e(f.period_text(report.period))}.</li>",
        f"<li>Price sources: {_e(sources or f.ABSENT)}. The whole instance price is charged "
        "to its GPUs (price ÷ GPUs).</li>",
        f"<li>Idle and held: {_e(IDLE_MEANING)} "
        f'(<a href="{_e(IDLE_MEANING_LINK)}">{_e(IDLE_MEANING_LINK)}</a>)</li>',
        "<li>Busy-weighted utilization = busy ÷ (busy + idle + held) seconds over all GPUs. "
        f"{_e(TOKENS_MEANING)} {_e(SAVINGS_MEANING)}</li>",
        f"<li>Idle cost and unused share: {_e(UNUSED_SHARE_MEANING)}</li>",
        f"<li>Coverage: {_e(f.hours(report.observed_gpu_seconds))} observed of "
        f"{_e(f.hours(report.expected_gpu_seconds))} expected GPU-hours "
        f"({_e(f.percent(report.coverage_ratio))}).</li>",
        "</ul>",
        "<h2>Gaps and notes</h2>",
        f"<ul>{notes}</ul>" if notes else "<p>None.</p>",
    ]


def render_html(report: Report, generated: str = "") -> str:
    """The whole page; `generated` (e.g. a UTC time) is shown in the header when given."""
    title = f"GPU cost report {f.plain_name(report.period.label)}"
    meta = [f"Period: {f.period_text(report.period)}", f"Source: {report.source}"]
    if generated:
        meta.append(f"Generated: {generated}")
    head = "".join(f'<p class="meta">{_e(line)}</p>' for line in meta)
    body = "\n".join([f"<h1>{_e(title)}</h1>", head, _kpis(report), *_sections(report)])
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )
