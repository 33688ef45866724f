"""The report's tables, defined once for every text format (HTML, Markdown).

Each table is its headers and rows of plain-text cells; a cell that holds a name (host,
GPU, uuid, token source) is a `Name`, so each format escapes it as data (`plain_name`,
then its own syntax) and the other cells as its own text. A new table, or a new column,
is one change here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuwatch.report import figures as f
from gpuwatch.report.model import GPU_STATES, OwnedInputs
from gpuwatch.report.result import Report


class Name(str):
    """A table cell that holds a name from the data."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Table:
    """Headers, rows, and how many leading columns are text (left-aligned in HTML)."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    text_columns: int = 1


def waste(report: Report) -> Table:
    """The most wasteful GPUs with their action."""
    return Table(
        ("host", "GPU", "uuid", "idle + held", "held", "action", "saves / month"),
        tuple(
            (
                Name(i.gpu.host),
                Name(i.gpu.name),
                Name(i.gpu.uuid),
                f.usd(i.waste_usd),
                f.usd(i.gpu.totals.held_cost_usd),
                i.action_text,
                f.usd(i.action_usd_per_month),
            )
            for i in report.top_waste
        ),
        text_columns=3,
    )


def no_waste_text(report: Report) -> str:
    """What the waste section says when it lists no GPU: that no GPU was observed (an
    empty period), or that the observed GPUs wasted nothing."""
    if not report.gpus:
        return "No data for this period: no GPU was observed, so none can be called wasteful."
    return "No GPU wasted anything in this period."


def hosts(report: Report) -> Table:
    """One row per host."""
    return Table(
        ("host", "GPUs", "cost", "idle + held", "held", "busy ratio", "savings / month"),
        tuple(
            (
                Name(h.host),
                str(h.gpus),
                f.usd(h.totals.cost_usd),
                f.usd(h.totals.idle_cost_usd),
                f.usd(h.totals.held_cost_usd),
                f.percent(h.totals.busy_ratio),
                f.usd(h.savings_usd_per_month),
            )
            for h in report.hosts
        ),
    )


def gpus(report: Report) -> Table:
    """One row per GPU, with its recommendation."""
    return Table(
        (
            "host",
            "#",
            "GPU",
            "uuid",
            "observed",
            "cost",
            "idle + held",
            "held",
            "busy ratio",
            "recommendation",
        ),
        tuple(
            (
                Name(g.host),
                "" if g.gpu_index is None else str(g.gpu_index),
                Name(g.name),
                Name(g.uuid),
                f.hours(g.totals.observed_seconds),
                f.usd(g.totals.cost_usd),
                f.usd(g.totals.idle_cost_usd),
                f.usd(g.totals.held_cost_usd),
                f.percent(g.totals.busy_ratio),
                f"{f.plain_name(g.recommended_gpu)}: {f.usd(g.savings_usd_per_month)}/month"
                + (f"; {g.need_phrase}" if g.need_phrase else "")
                + (f"; candidates: {g.candidates_phrase}" if g.candidates_phrase else "")
                if g.recommended_gpu
                else "",
            )
            for g in report.gpus
        ),
        text_columns=4,
    )


def states(report: Report) -> Table:
    """One row per GPU: hours sampled in each analysis state and its mean activity."""
    return Table(
        (
            "host",
            "#",
            "GPU",
            "uuid",
            *STATE_HEADERS,
            "unknown",
            "mean activity",
        ),
        tuple(
            (
                Name(g.host),
                "" if g.gpu_index is None else str(g.gpu_index),
                Name(g.name),
                Name(g.uuid),
                *(f.hours(g.totals.state_seconds.get(s, 0.0)) for s in GPU_STATES),
                f.hours(g.totals.no_state_seconds),
                f.percent(g.totals.mean_activity_ratio),
            )
            for g in report.gpus
        ),
        text_columns=4,
    )


STATE_HEADERS = tuple(GPU_STATES)
"""The state table's columns of hours, in GPU_STATES order (busy ... pending)."""


def rent_vs_buy(report: Report) -> Table:
    """The fleet's rent-vs-buy position at the busy fraction and at mean activity."""
    return Table(
        ("utilization taken as", "rent - own / month", "position"),
        (
            (
                "busy fraction (underutilized counts as busy)",
                f.signed_usd(report.rent_vs_buy_monthly_delta_usd),
                f.rent_vs_buy_text(report.rent_vs_buy_monthly_delta_usd, "busy fraction"),
            ),
            (
                "mean activity",
                f.signed_usd(report.rent_vs_buy_activity_monthly_delta_usd),
                f.rent_vs_buy_text(report.rent_vs_buy_activity_monthly_delta_usd, "mean activity"),
            ),
        ),
    )


def rent_vs_buy_gpus(report: Report) -> Table:
    """Each GPU's rent-vs-buy position and what it is computed from."""
    return Table(
        (
            "host",
            "#",
            "uuid",
            "rent / h",
            "owned / year",
            "busy fraction",
            "mean activity",
            "rent - own at busy",
            "at activity",
        ),
        tuple(
            (
                Name(g.host),
                "" if g.gpu_index is None else str(g.gpu_index),
                Name(g.uuid),
                f.usd(g.rent_usd_per_hour),
                f.usd(g.owned_usd_per_year),
                f.percent(g.busy_ratio),
                f.percent(g.activity_ratio),
                f.signed_usd(g.monthly_delta_usd),
                f.signed_usd(g.activity_monthly_delta_usd),
            )
            for g in report.rent_vs_buy_gpus
        ),
        text_columns=3,
    )


def owned_inputs(report: Report) -> Table:
    """What owning costs behind the rent-vs-buy "owned / year" column: one row per GPU
    model and set of inputs, with how many GPUs it prices. Empty without inputs."""
    names = {(g.host, g.uuid): g.name for g in report.gpus}
    groups: dict[tuple[str, OwnedInputs], int] = {}
    for g in report.rent_vs_buy_gpus:
        if g.inputs is not None:
            key = (names.get((g.host, g.uuid), ""), g.inputs)
            groups[key] = groups.get(key, 0) + 1
    return Table(
        (
            "GPU",
            "GPUs",
            "purchase",
            "life",
            "cost of capital / year",
            "operations / GPU-year",
            "facility",
            "hosting / kW-month",
            "IT power",
        ),
        tuple(
            (
                Name(name),
                str(count),
                f.usd(i.capex_usd) + (" (GPU + host share)" if i.host_share else " (bare card)"),
                f"{i.life_years:g} years",
                f"{i.cost_of_capital * 100:.4g} %",
                f.usd(i.ops_usd_per_year),
                (
                    "colocation (PUE not applied)"
                    if i.facility == "colocation"
                    else f"{i.facility} (PUE {i.pue_applied:g})"
                ),
                f.usd(i.hosting_usd_per_kw_month),
                f"{i.it_power_watts:,.0f} W",
            )
            for (name, i), count in sorted(groups.items(), key=lambda item: item[0][0])
        ),
    )


def identities(report: Report) -> Table:
    """One row per GPU with its whole UUID (the other tables of a page may shorten it)."""
    return Table(
        ("host", "#", "GPU", "uuid"),
        tuple(
            (
                Name(g.host),
                "" if g.gpu_index is None else str(g.gpu_index),
                Name(g.name),
                Name(g.uuid),
            )
            for g in report.gpus
        ),
        text_columns=4,
    )


SHORT_UUID_CHARS = 12
"""A shortened UUID keeps at least this many characters ("GPU-2fc0195c": the prefix
and the first group), more when two GPUs of the report would share them."""


def short_uuids(uuids: Iterable[str]) -> dict[str, str]:
    """Each UUID shortened to its shortest prefix of at least SHORT_UUID_CHARS characters
    that no other UUID of `uuids` starts with, "…" marking a cut; whole when that is all."""
    unique = sorted(set(uuids))
    out = {}
    for uuid in unique:
        n = SHORT_UUID_CHARS
        while n < len(uuid) and any(o != uuid and o.startswith(uuid[:n]) for o in unique):
            n += 1
        out[uuid] = uuid if n >= len(uuid) else uuid[:n] + "…"
    return out


def tokens(report: Report) -> Table:
    """One row per token source, then the total."""
    return Table(
        (
            "host",
            "source",
            "prompt",
            "generation",
            "cost",
            "$/1M prompt",
            "$/1M generation",
            "$/1M all",
        ),
        tuple(
            (
                Name(t.host),
                Name(t.source or "all sources"),
                f"{t.tokens['prompt']:,.0f}",
                f"{t.tokens['generation']:,.0f}",
                f.usd(t.cost_usd),
                f.usd(t.usd_per_million("prompt")),
                f.usd(t.usd_per_million("generation")),
                f.usd(t.usd_per_million("all")),
            )
            for t in (*report.token_sources, report.tokens)
        ),
        text_columns=2,
    )


def slurm(report: Report, *, by_user: bool) -> Table:
    """Slurm chargeback: one row per account (or user), largest cost first."""
    lines = report.slurm_users if by_user else report.slurm_accounts
    reclaimed = any(n.reclaimed_usd is not None for n in lines)
    return Table(
        (
            "user" if by_user else "account",
            "jobs",
            "GPU-hours",
            "cost",
            "idle",
            "held",
            "share of GPU cost",
            *(("$ reclaimed",) if reclaimed else ()),
        ),
        tuple(
            (
                Name(n.name),
                str(n.jobs),
                f"{n.gpu_hours:,.2f}",
                f.usd(n.cost_usd),
                f.usd(n.idle_cost_usd),
                f.usd(n.held_cost_usd),
                f.percent(n.share_ratio),
                *((f.usd(n.reclaimed_usd),) if reclaimed else ()),
            )
            for n in lines
        ),
    )


def namespaces(report: Report) -> Table:
    """Chargeback: one row per Kubernetes namespace, largest cost first."""
    return Table(
        ("namespace", "pods", "cost", "unused share", "share of GPU cost"),
        tuple(
            (
                Name(n.namespace),
                str(n.pods),
                f.usd(n.cost_usd),
                f.usd(n.unused_share_usd),
                f.percent(n.share_ratio),
            )
            for n in report.namespaces
        ),
    )
