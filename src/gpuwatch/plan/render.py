"""The plan as a terminal text, Markdown, HTML and JSON; names escaped in each.

Every figure is re-derivable by hand: $/month = $/h x 730; a move's saving = its units'
current $/h - the planned GPU's $/h (the catalog's reference rent, or the price the agent
charged), x 730; the gap = (plan - bound) / plan.

Names (unit labels, the source's URL, a config's GPU id) are data: on one line, capped
at `MAX_NAME_CHARS` with a visible "…", then escaped. Our own sentences (the headline,
the actions, the assumptions, the line saying what the plan stands on) are escaped but
never capped: no sentence of ours ends cut.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpuwatch.alerts.messages import format_utc
from gpuwatch.core.text import (
    counted,
    duration,
    duration_adjective,
    flatten,
    html_escape,
    html_name,
    md_escape,
    md_name,
)
from gpuwatch.core.text import plain_name as _name
from gpuwatch.core.text import usd as _usd
from gpuwatch.core.units import GIB, HOURS_PER_MONTH
from gpuwatch.plan.buying import Buying, price_kind
from gpuwatch.plan.model import Plan, PlanOptions, WorkloadNeed
from gpuwatch.plan.moves import Move, plan_moves
from gpuwatch.slack.mrkdwn import escape, name_text


@dataclass(frozen=True, slots=True)
class PlanReport:
    """A plan with what it was made from."""

    plan: Plan
    needs: tuple[WorkloadNeed, ...]
    options: PlanOptions
    days: float  # the lookback, days
    source: str  # "local" or the API's URL without credentials
    generated: str  # when the plan was computed (wall clock): "2026-11-28 04:41 UTC"
    end_epoch: float | None = None  # the lookback's end, epoch seconds (None: not known)
    buying: Buying | None = None  # the parts the plan could buy (None: not said)

    @property
    def moves(self) -> list[Move]:
        """The plan's steps (`plan_moves`), a part's price labelled where it needs one."""
        labels = {} if self.buying is None else self.buying.labels()
        return plan_moves(self.plan, self.needs, labels)

    @property
    def lookback_seconds(self) -> float:
        """The lookback asked for, seconds."""
        return self.days * 86400.0

    @property
    def data_seconds(self) -> float:
        """How much data the plan stands on: the longest any unit was observed in the
        lookback (seconds, at most the lookback; 0 without units)."""
        seen = max((need.observed_seconds for need in self.needs), default=0.0)
        return min(seen, self.lookback_seconds)


def stands_on(report: PlanReport) -> str:
    """What the plan stands on, in one sentence of ours (no names): when it was computed,
    how much data it had and the lookback it covers, e.g. "Computed 2026-11-28 04:41 UTC
    from 1 hour of data in the 30-day lookback 2026-10-29 04:40 UTC to 2026-11-28 04:40
    UTC." The source, a name, is written beside it by each format."""
    when = f"Computed {report.generated} from" if report.generated else "From"
    text = (
        f"{when} {duration(report.data_seconds)} of data in the "
        f"{duration_adjective(report.lookback_seconds)} lookback"
    )
    if report.end_epoch is not None:
        start = report.end_epoch - report.lookback_seconds
        text += f" {format_utc(start)} to {format_utc(report.end_epoch)}"
    return text + "."


def _gap(plan: Plan) -> str:
    return "n/a" if plan.gap_ratio is None else f"{plan.gap_ratio * 100:.2f} %"


def headline(report: PlanReport) -> list[tuple[str, str]]:
    """(label, figure) pairs every format leads with."""
    plan = report.plan
    return [
        ("Today", f"{_usd(plan.current_usd_per_hour * HOURS_PER_MONTH)}/month"),
        ("The plan", f"{_usd(plan.usd_per_hour * HOURS_PER_MONTH)}/month"),
        ("Saves", f"{_usd(plan.savings_usd_per_hour * HOURS_PER_MONTH)}/month"),
        (
            "Proved lower bound",
            f"{_usd(plan.lower_bound_usd_per_hour * HOURS_PER_MONTH)}/month (gap {_gap(plan)})",
        ),
    ]


def assumptions(report: PlanReport) -> list[str]:
    """What the plan rests on, in sentences (docs/plan.md says more)."""
    o = report.options
    lines = [
        f"Headroom: {o.headroom_ratio * 100:.0f} % of memory, compute and bandwidth kept free "
        "on every placement.",
        "Memory: the second-largest hourly peak of the need (declared, measured from the "
        "inference server's KV cache, else NVML's observed peak), which one bad sample "
        "cannot move; compute and DRAM: the 95th percentile of hourly "
        "figures, scaled by the parts' dense BF16 TFLOPS and bandwidth.",
        "MIG: "
        + ("profiles and placement rules from NVIDIA's MIG user guide." if o.mig else "off."),
        "Time-slicing: "
        + ("several units on one GPU when their sums fit." if o.time_slicing else "off."),
        "Teams: "
        + (
            "units of different namespaces may share a GPU."
            if o.share_across_namespaces
            else "units of different namespaces never share a GPU."
        ),
        "Not known to the plan: latency targets, peak traffic beyond the lookback, "
        "data-locality and interconnect needs of multi-GPU jobs beyond keeping them together.",
    ]
    if report.buying is not None:
        lines.append(report.buying.sentence())
    policy = report.options
    if policy.no_time_slicing_namespaces:
        lines.append(
            "Never time-sliced ([plan] no_time_slicing_namespaces): "
            + ", ".join(_name(ns) for ns in sorted(policy.no_time_slicing_namespaces))
            + "."
        )
    if policy.quotas:
        lines.append(
            "Quotas ([[plan.quotas]]): "
            + "; ".join(f"{_name(ns)} {_name(res)} <= {limit}" for ns, res, limit in policy.quotas)
            + "."
        )
    if policy.min_saving_usd_per_month > 0:
        lines.append(
            f"Minimum saving per move: {_usd(policy.min_saving_usd_per_month)}/month "
            "([plan] min_saving_usd_per_month)."
        )
    if any(p.mode == "shared" for p in report.plan.placements):
        lines.append(
            "Time-sliced GPUs hold their units' kernel-busy time (NVML utilization), plus "
            f"{policy.context_switch_ratio:.0%} of the GPU per unit for context switches "
            "([plan] context_switch_ratio)."
        )
    lines.extend(report.plan.notes)
    errors = [n for n in report.needs if n.memory_error_bytes is not None]
    if errors:
        lines.append(
            f"{counted(len(errors), 'unit')}: a memory need above the GPU's own memory, a "
            "measurement error and not a plan input; "
            + ("it keeps its GPU" if len(errors) == 1 else "they keep their GPUs")
            + ": "
            + "; ".join(
                f"{_name(n.label)} {n.memory_error_bytes / GIB:.1f} GiB on "
                f"{_name(n.current_gpu_id or 'unknown')}"
                for n in errors[:3]
                if n.memory_error_bytes is not None
            )
            + ("" if len(errors) <= 3 else f" and {len(errors) - 3} more")
            + " (`memory_error_bytes` in JSON)"
        )
    return lines


def _unit_rows(report: PlanReport) -> list[list[str]]:
    rows = []
    for need in report.needs:
        rows.append(
            [
                need.label,
                need.activity,
                f"measurement error: {need.memory_error_bytes / GIB:.1f} GiB, above its GPU"
                if need.memory_error_bytes is not None
                else "need unknown"
                if need.memory_bytes is None
                else f"{need.memory_bytes / GIB:.1f} GiB ({need.memory_basis})",
                "n/a" if need.activity_ratio is None else f"{need.activity_ratio * 100:.0f} %",
                "n/a"
                if need.bandwidth_bytes_per_second is None
                else f"{need.bandwidth_bytes_per_second / 1e9:.0f} GB/s",
                f"{need.gpus_now} x {_name(need.current_gpu_id or 'unknown')}",
                _usd(need.current_usd_per_hour * HOURS_PER_MONTH),
            ]
        )
    return rows


UNIT_HEADERS = ("workload", "did", "memory need", "SM p95", "DRAM p95", "now", "$/month now")


def render_text(report: PlanReport) -> str:
    """For a terminal: names on one line, control characters as escapes."""
    out = ["What the fleet should be", "", stands_on(report), f"Source: {_name(report.source)}", ""]
    out += [f"  {label:<20} {figure}" for label, figure in headline(report)]
    out += ["", "Moves:"]
    for move in report.moves:
        names = " + ".join(_name(n) for n in move.names)
        saved = "" if move.kind == "keep" else f" (saves {_usd(move.savings_usd_per_month)}/month)"
        out.append(f"  - {names}: {move.action}{saved}")
    out += ["", "Assumptions:"]
    out += [f"  - {flatten(line)}" for line in assumptions(report)]
    return "\n".join(out) + "\n"


def markdown_lines(report: PlanReport, level: int = 1) -> list[str]:
    """The plan as Markdown lines (`level`: the heading level, 2 inside the report)."""
    h = "#" * level
    out = [f"{h} What the fleet should be", ""]
    out += [f"{md_escape(stands_on(report))} Source: {md_name(report.source)}", ""]
    out += [f"- **{label}:** {figure}" for label, figure in headline(report)]
    out += ["", f"{h}# Moves", ""]
    for move in report.moves:
        names = " + ".join(md_name(n) for n in move.names)
        saved = "" if move.kind == "keep" else f" (saves {_usd(move.savings_usd_per_month)}/month)"
        out.append(f"- {names}: {move.action.replace('->', '→')}{saved}")
    out += ["", f"{h}# Workloads", ""]
    out.append("| " + " | ".join(UNIT_HEADERS) + " |")
    out.append("|" + "|".join(" --- " for _ in UNIT_HEADERS) + "|")
    for label, *cells in _unit_rows(report):
        out.append("| " + " | ".join([md_name(label), *(md_escape(c) for c in cells)]) + " |")
    out += ["", f"{h}# Assumptions", ""]
    out += [f"- {md_escape(line)}" for line in assumptions(report)]
    return out


def render_markdown(report: PlanReport) -> str:
    """A Markdown document."""
    return "\n".join(markdown_lines(report)) + "\n"


def _e(text: str) -> str:
    """Our own text as HTML: on one line, escaped, never cut."""
    return html_escape(flatten(text))


def html_section(report: PlanReport) -> str:
    """The plan as an HTML section (the report embeds it)."""
    parts = [
        "<section class='plan'><h2>What the fleet should be</h2>",
        f"<p class='meta'>{_e(stands_on(report))} "
        f"Source: <code>{html_name(report.source)}</code></p>",
        "<dl>",
    ]
    for label, figure in headline(report):
        parts.append(f"<dt>{_e(label)}</dt><dd>{_e(figure)}</dd>")
    parts.append("</dl><h3>Moves</h3><ul>")
    for move in report.moves:
        names = " + ".join(f"<code>{html_name(n)}</code>" for n in move.names)
        saved = (
            "" if move.kind == "keep" else f" (saves {_e(_usd(move.savings_usd_per_month))}/month)"
        )
        parts.append(f"<li>{names}: {_e(move.action.replace('->', '→'))}{saved}</li>")
    parts.append("</ul><h3>Workloads</h3><table><thead><tr>")
    parts += [f"<th>{_e(h)}</th>" for h in UNIT_HEADERS]
    parts.append("</tr></thead><tbody>")
    for label, *cells in _unit_rows(report):
        tds = [f"<td>{html_name(label)}</td>", *(f"<td>{_e(c)}</td>" for c in cells)]
        parts.append("<tr>" + "".join(tds) + "</tr>")
    parts.append("</tbody></table><h3>Assumptions</h3><ul>")
    parts += [f"<li>{_e(line)}</li>" for line in assumptions(report)]
    parts.append("</ul></section>")
    return "".join(parts)


def render_html(report: PlanReport) -> str:
    """A standalone HTML page."""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<title>gpuwatch plan</title><style>body{font-family:sans-serif;max-width:60em;"
        "margin:2em auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:.2em .5em;text-align:left}code{background:#f4f4f4}</style></head><body>"
        + html_section(report)
        + "</body></html>\n"
    )


def _need_json(need: WorkloadNeed) -> dict[str, Any]:
    return {
        "key": need.key,
        "label": need.label,
        "host": need.host,
        "gpu_uuids": list(need.gpu_uuids),
        "gpus_needed": need.gpu_count,
        "current_gpu": need.current_gpu_id,
        "current_usd_per_hour": need.current_usd_per_hour,
        "activity": need.activity,
        "memory_need_bytes": need.memory_bytes,
        "memory_basis": need.memory_basis,
        "memory_peak_bytes": need.memory_peak_bytes,
        "memory_error_bytes": need.memory_error_bytes,
        "activity_p95_ratio": need.activity_ratio,
        "kernel_busy_p95_ratio": need.kernel_busy_ratio,
        "bandwidth_p95_bytes_per_second": need.bandwidth_bytes_per_second,
        "namespace": need.namespace,
        "pods": list(need.pods),
        "observed_seconds": need.observed_seconds,
    }


def plan_json(report: PlanReport) -> dict[str, Any]:
    """The plan as a JSON-ready object (every $ both per hour and per month)."""
    plan = report.plan
    return {
        "generated": report.generated,
        "source": report.source,
        "lookback_days": report.days,
        "lookback_start": None
        if report.end_epoch is None
        else format_utc(report.end_epoch - report.lookback_seconds),
        "lookback_end": None if report.end_epoch is None else format_utc(report.end_epoch),
        "data_seconds": report.data_seconds,
        "stands_on": stands_on(report),
        "hours_per_month": HOURS_PER_MONTH,
        "current_usd_per_hour": plan.current_usd_per_hour,
        "plan_usd_per_hour": plan.usd_per_hour,
        "savings_usd_per_hour": plan.savings_usd_per_hour,
        "lower_bound_usd_per_hour": plan.lower_bound_usd_per_hour,
        "current_usd_per_month": plan.current_usd_per_hour * HOURS_PER_MONTH,
        "plan_usd_per_month": plan.usd_per_hour * HOURS_PER_MONTH,
        "savings_usd_per_month": plan.savings_usd_per_hour * HOURS_PER_MONTH,
        "lower_bound_usd_per_month": plan.lower_bound_usd_per_hour * HOURS_PER_MONTH,
        "gap_ratio": plan.gap_ratio,
        "solver": plan.solver,
        "solve_seconds": plan.solve_seconds,
        "options": {
            "headroom_ratio": report.options.headroom_ratio,
            "mig": report.options.mig,
            "time_slicing": report.options.time_slicing,
            "share_across_namespaces": report.options.share_across_namespaces,
            "seed": report.options.seed,
            "work_limit_nodes": report.options.work_limit_nodes,
            "time_limit_seconds": report.options.time_limit_seconds,
            "candidate_gpus": None
            if report.options.candidate_gpu_ids is None
            else list(report.options.candidate_gpu_ids),
        },
        "placements": [
            {
                "gpu": p.gpu_id,
                "mode": p.mode,
                "usd_per_hour": p.usd_per_hour,
                "units": list(p.units),
                "mig_profiles": list(p.mig_profiles),
                "group": p.group,
                **_price_json(report, p.gpu_id),
            }
            for p in plan.placements
        ],
        "buying": None
        if report.buying is None
        else {
            "rule": report.buying.rule,
            "left_out": [{"gpu": g, "price_kind": k} for g, k in report.buying.left_out],
            "offers": {
                g: {"instance_type": t, "gpus": n} for g, (t, n) in report.buying.offers.items()
            },
        },
        "reclaimed": list(plan.reclaimed),
        "unplaced": list(plan.unplaced),
        "moves": [
            {
                "kind": m.kind,
                "names": list(m.names),
                "action": m.action,
                "savings_usd_per_month": m.savings_usd_per_month,
                "pods": list(m.pods),
            }
            for m in report.moves
        ],
        "workloads": [_need_json(n) for n in report.needs],
        "assumptions": assumptions(report),
    }


def _price_json(report: PlanReport, gpu_id: str) -> dict[str, Any]:
    """Where a placement's price comes from: its kind and the catalog's source text."""
    buying = report.buying
    if buying is None or gpu_id not in buying.catalog:
        return {}
    gpu = buying.catalog.get(gpu_id)
    return {
        "price_kind": price_kind(gpu),
        "price_source": gpu.sources.get("rent_usd_per_hour", ""),
    }


def render_json(report: PlanReport) -> str:
    """JSON text."""
    return json.dumps(plan_json(report), indent=2, ensure_ascii=False) + "\n"


def slack_lines(report: PlanReport, limit: int = 8) -> list[str]:
    """The summary's lines as Slack mrkdwn (names escaped as every message does)."""
    plan = report.plan
    out = [
        f"*What the fleet should be:* {_usd(plan.usd_per_hour * HOURS_PER_MONTH)}/month "
        f"against {_usd(plan.current_usd_per_hour * HOURS_PER_MONTH)} today "
        f"(saves {_usd(plan.savings_usd_per_hour * HOURS_PER_MONTH)}; gap to the proved "
        f"bound {_gap(plan)})",
        f"{escape(stands_on(report))} Source: {name_text(report.source)}",
    ]
    moves = [m for m in report.moves if m.kind != "keep"]
    for move in moves[:limit]:
        names = " + ".join(name_text(n) for n in move.names)
        saved = _usd(move.savings_usd_per_month)
        out.append(f"• {names}: {move.action.replace('->', '→')} (saves {saved}/month)")
    if len(moves) > limit:
        out.append(f"… and {counted(len(moves) - limit, 'more move')}")
    return out
