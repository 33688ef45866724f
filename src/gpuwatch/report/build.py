"""Every figure of the report, computed once from `ReportData` rows (any source).

`build_report(data, previous)` sums the GpuDay and TokenDay rows into a `Report`: the
KPIs, cost per day by class, per-host and per-GPU lines, the ten most wasteful GPUs,
month-over-month changes and the method appendix. Each figure is a plain sum or one
division of sums, so it can be re-derived by hand from the rows (docs/reports.md says
how). A figure without data is None ("absent"), never 0 or 1 by default.

Formats render a `Report`; none of them computes a figure. No I/O here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from typing import TYPE_CHECKING

from gpuwatch.core.text import counted, with_article
from gpuwatch.core.units import HOURS_PER_MONTH
from gpuwatch.report.model import (
    GPU_STATES,
    TIME_CLASSES,
    TOKEN_KINDS,
    GpuDay,
    Period,
    RentVsBuyGpu,
    ReportData,
)
from gpuwatch.snapshot import need_basis_phrase, recommendation_rule_phrase

if TYPE_CHECKING:
    from gpuwatch.plan.render import PlanReport

TOP_WASTE = 10
"""GPUs in the "most wasteful" table."""

COST_CLASSES = ("idle", "held", "other")
"""The stacks of the cost-per-day chart: idle (idle_cost - held_cost), held, and the
rest of the cost ("other": busy, unknown and unsettled time)."""

TOKEN_FIGURES = (*TOKEN_KINDS, "all")
"""Kinds of the $/1M tokens figures: each divides the same cost (docs/tokens.md)."""

IDLE_MEANING = (
    "A GPU is idle when it has no process and its activity stays under the noise floor "
    "for the whole analysis window (30 min by default); held when processes keep memory "
    "on it while its activity stays under the floor for the whole window. The seconds of "
    "such a spell are all idle or held once it reaches the window; a shorter pause is "
    "busy. Unknown seconds (no activity signal) and unsettled seconds count in no ratio. "
    "See docs/analysis.md, 'Which class each second is in'."
)
IDLE_MEANING_LINK = "docs/analysis.md#which-class-each-second-is-in"

SAVINGS_MEANING = (
    "Savings available per month = idle + held + right-sizing, one action per GPU: "
    "right-sizing (its latest recommendation's $/h saving x 730 h) when that saves at least "
    "as much as releasing it, else releasing it: its idle cost and held cost over the period "
    "÷ its own settled hours (busy + idle + held + unknown) x 730 h. The rate is the GPU's "
    "own, so it does not depend on the period's length or on when gpuwatch was installed."
)

TOKENS_MEANING = (
    "$/1M tokens = the cost charged to the token sources ÷ their tokens of the kind x "
    "1,000,000 (each kind divides the same cost), both counted only over the spans in which "
    "every GPU of the source was charged (a stalled or stopped agent's gap counts in "
    "neither), the rule of the live 1 h, 24 h and 30 d figures."
)

UNUSED_SHARE_MEANING = (
    "A GPU's idle cost is its whole ticks classed idle or held; a namespace's unused share "
    "is, on every tick, the part of its pods' GPU shares they left unused (busy ticks "
    "included), and is part of the namespace's cost. The two measure different things: the "
    "namespaces' unused shares can add up to more or less than the fleet's idle cost, and "
    "the cost of a GPU idle while no pod holds it is in no namespace."
)

STATES_MEANING = (
    "Time in each state is the seconds the analysis sampled the GPU in it: busy (mean "
    "activity over the analysis window at or above the underutilized target, 25 % by "
    "default), underutilized (busy, but its window mean activity under that target), "
    "idle, held, pending (not yet judged: the window is not full) and unknown (observed "
    "in no state: observed seconds - the states' seconds). Idle and held here start when "
    "the window confirms them; the cost classes settle a spell back to its start, so their idle "
    "seconds are larger. Mean activity = the time-weighted mean of the analysis window's "
    "mean activity (GPM SM activity, else kernel-busy time) over the seconds it was known."
)

RENT_VS_BUY_MEANING = (
    "Rent vs buy, per GPU as the agent computes it (docs/tco.md): rent $/h x 730 h x "
    "utilization - owned $/GPU-year ÷ 12, summed over the GPUs, over the 30 days before "
    "the period's end; positive: buying would be cheaper. At the busy fraction, "
    "utilization = busy ÷ (busy + idle + held) seconds, where busy counts every second "
    "not idle, held or unknown, underutilized seconds included, as 100 % used. At mean "
    "activity, utilization = the GPU's mean activity over the same 30 days, so an "
    "underutilized GPU counts at what it does."
)

OWNED_INPUTS_MEANING = (
    'What owning costs, behind "owned / year" (docs/tco.md): the purchase (the GPU, '
    "with its share of the host's server and networking unless priced as a bare card) "
    "financed over the life at the cost of capital and paid monthly, plus energy (the IT "
    "power x 8760 h x [rent_vs_buy] usd_per_kwh, x PUE in an owned room; colocation's "
    "fee covers cooling, so no PUE there), hosting (the fee per kW of IT power x 12) and "
    "operations per GPU-year."
)


def _ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator; None when the denominator is not positive."""
    return numerator / denominator if denominator > 0 else None


@dataclass(frozen=True, slots=True)
class Totals:
    """Sums over a set of GPU-days (USD, seconds)."""

    gpu_days: int
    observed_seconds: float
    class_seconds: Mapping[str, float]  # TIME_CLASSES
    cost_usd: float
    idle_cost_usd: float  # idle and held
    held_cost_usd: float
    energy_joules: float | None  # None when no row had energy
    state_seconds: Mapping[str, float] = field(default_factory=dict)  # GPU_STATES: sampled
    activity_seconds: float = 0.0  # window mean activity x seconds
    activity_sampled_seconds: float = 0.0  # seconds with an activity figure

    @property
    def no_state_seconds(self) -> float:
        """Observed seconds sampled in no analysis state (no verdict: GPU lost, no
        signal): observed - the states' seconds, at least 0."""
        return max(self.observed_seconds - sum(self.state_seconds.values()), 0.0)

    @property
    def mean_activity_ratio(self) -> float | None:
        """activity seconds / seconds with an activity figure: the time-weighted mean of
        the analysis window's mean activity; None without any."""
        return _ratio(self.activity_seconds, self.activity_sampled_seconds)

    @property
    def busy_ratio(self) -> float | None:
        """busy / (busy + idle + held) seconds; None without such seconds."""
        busy = self.class_seconds.get("busy", 0.0)
        judged = busy + self.class_seconds.get("idle", 0.0) + self.class_seconds.get("held", 0.0)
        return _ratio(busy, judged)

    @property
    def idle_ratio(self) -> float | None:
        """Idle (and held) cost / total cost; None when nothing cost anything."""
        return _ratio(self.idle_cost_usd, self.cost_usd)

    @property
    def waste_usd(self) -> float:
        """Idle and held cost, USD (idle_cost_usd already holds the held part)."""
        return self.idle_cost_usd

    @property
    def settled_seconds(self) -> float:
        """Seconds whose class is known (busy + idle + held + unknown): the span a
        rate of idle or held cost is taken over (unsettled seconds are in no class)."""
        return sum(self.class_seconds.values())

    def usd_per_month(self, usd: float) -> float | None:
        """`usd` spent over the settled seconds, as a rate per 730-hour month; None
        without settled seconds. Independent of the period's length and of when the
        GPU was first observed."""
        return _ratio(usd * HOURS_PER_MONTH * 3600.0, self.settled_seconds)


def _totals(rows: Iterable[GpuDay]) -> Totals:
    count = 0
    observed = cost = idle = held = 0.0
    seconds = dict.fromkeys(TIME_CLASSES, 0.0)
    energy: float | None = None
    states = dict.fromkeys(GPU_STATES, 0.0)
    activity = sampled = 0.0
    for row in rows:
        count += 1
        for name in GPU_STATES:
            states[name] += row.state_seconds.get(name, 0.0)
        activity += row.activity_seconds
        sampled += row.activity_sampled_seconds
        observed += row.observed_seconds
        cost += row.cost_usd
        idle += row.idle_cost_usd
        held += row.held_cost_usd
        for name in TIME_CLASSES:
            seconds[name] += row.class_seconds.get(name, 0.0)
        if row.energy_joules is not None:
            energy = (energy or 0.0) + row.energy_joules
    return Totals(count, observed, seconds, cost, idle, held, energy, states, activity, sampled)


@dataclass(frozen=True, slots=True)
class GpuLine:
    """One GPU over the period."""

    host: str
    uuid: str
    name: str
    gpu_index: int | None
    totals: Totals
    price_sources: tuple[str, ...]
    recommended_gpu: str | None  # from the GPU's latest day
    savings_usd_per_hour: float | None  # of that recommendation
    recommended_rule: str | None = None  # the candidates it was chosen from
    need_basis: str | None = None  # what the memory need was on the latest day

    @property
    def candidates_phrase(self) -> str:
        """Which candidates the recommendation came from, in words ("" when unknown)."""
        return recommendation_rule_phrase(self.recommended_rule or "")

    @property
    def need_phrase(self) -> str:
        """What the recommendation's memory need was, in words ("" when unknown)."""
        return need_basis_phrase(self.need_basis)

    @property
    def savings_usd_per_month(self) -> float | None:
        """savings $/h x 730 h; None without a recommendation."""
        if self.savings_usd_per_hour is None:
            return None
        return self.savings_usd_per_hour * HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class HostLine:
    """One host over the period."""

    host: str
    gpus: int
    totals: Totals
    savings_usd_per_month: float | None  # sum of its GPUs' actions (WasteItem); None: none


@dataclass(frozen=True, slots=True)
class DayLine:
    """One UTC day: cost by COST_CLASSES (USD), and the day's GPU-day sums."""

    day: date
    cost_by_class_usd: Mapping[str, float]
    totals: Totals


@dataclass(frozen=True, slots=True)
class WasteItem:
    """A GPU among the most wasteful, with what to do about it."""

    gpu: GpuLine
    waste_usd: float  # idle + held cost over the period
    action: str  # "rightsize", "release held", "release idle"
    action_text: str  # one line a reader can act on (names are data: escape them)
    action_usd_per_month: float  # what the action saves per month
    idle_usd_per_month: float = 0.0  # the part of it that is idle cost (release idle)
    held_usd_per_month: float = 0.0  # the part that is held cost (release held)
    rightsizing_usd_per_month: float = 0.0  # the part that is right-sizing


@dataclass(frozen=True, slots=True)
class Savings:
    """What acting on every GPU would save per month, USD: each GPU's one action
    (WasteItem), split by kind. Idle and held are the GPU's idle-only and held cost
    per settled hour x 730 h; right-sizing is its recommendation's $/h x 730 h."""

    idle_usd_per_month: float
    held_usd_per_month: float
    rightsizing_usd_per_month: float

    @property
    def total_usd_per_month(self) -> float:
        """idle + held + right-sizing."""
        return self.idle_usd_per_month + self.held_usd_per_month + self.rightsizing_usd_per_month


@dataclass(frozen=True, slots=True)
class TokenLine:
    """Tokens and the cost charged to them, over the period (one source, or all)."""

    source: str  # "" for the sum over sources
    host: str
    tokens: Mapping[str, float]  # TOKEN_KINDS plus "all"
    cost_usd: float

    def usd_per_million(self, kind: str) -> float | None:
        """cost / tokens of `kind` x 1e6; None when no such tokens were served."""
        tokens = self.tokens.get(kind, 0.0)
        return self.cost_usd / tokens * 1e6 if tokens > 0 else None


@dataclass(frozen=True, slots=True)
class Change:
    """A KPI against the previous period."""

    name: str
    unit: str  # "usd", "ratio", "usd_per_million"
    current: float | None
    previous: float | None

    @property
    def delta(self) -> float | None:
        """current - previous; None when either is absent."""
        if self.current is None or self.previous is None:
            return None
        return self.current - self.previous

    @property
    def relative(self) -> float | None:
        """delta / previous; None when absent or previous is 0."""
        delta = self.delta
        if delta is None or self.previous is None or self.previous == 0:
            return None
        return delta / abs(self.previous)


@dataclass(frozen=True, slots=True)
class NamespaceLine:
    """One Kubernetes namespace's chargeback over the period (USD)."""

    namespace: str
    pods: int  # distinct pods charged in the period
    cost_usd: float  # busy and idle charged to its pods
    unused_share_usd: float  # part of cost_usd: its pods' share of each tick they left
    # unused (what they reserved and did not use, busy ticks included); not the GPU's
    # idle cost, which is whole ticks classed idle or held (docs/reports.md)
    share_ratio: float | None  # of the period's GPU cost; None when that is 0


@dataclass(frozen=True, slots=True)
class Report:
    """Every figure of one report; formats only render these."""

    period: Period
    source: str
    coverage_ratio: float | None  # observed / expected GPU-seconds; None when unknown
    observed_gpu_seconds: float
    expected_gpu_seconds: float | None
    totals: Totals
    savings_usd_per_month: float | None  # savings.total_usd_per_month; None without GPUs
    savings: Savings | None  # idle + held + right-sizing over every GPU; None without GPUs
    tokens: TokenLine  # summed over sources
    token_sources: tuple[TokenLine, ...]
    rent_vs_buy_monthly_delta_usd: float | None  # > 0: buying would be cheaper
    rent_vs_buy_activity_monthly_delta_usd: float | None  # the same at mean activity
    rent_vs_buy_gpus: tuple[RentVsBuyGpu, ...]  # per GPU, by host and index
    days: tuple[DayLine, ...]
    hosts: tuple[HostLine, ...]
    gpus: tuple[GpuLine, ...]
    top_waste: tuple[WasteItem, ...]
    namespaces: tuple[NamespaceLine, ...]  # by cost, largest first; () without pods
    changes: tuple[Change, ...]  # empty without a previous period
    previous_label: str | None
    price_sources: Mapping[str, int]  # price source -> GPU-days priced by it
    notes: tuple[str, ...]
    fleet_plan: PlanReport | None = None  # "What the fleet should be" (gpuwatch.plan)

    def usd_per_million_tokens(self, kind: str) -> float | None:
        """Realized $/1M tokens of `kind` (TOKEN_FIGURES) over all sources."""
        return self.tokens.usd_per_million(kind)

    @property
    def idle_only_cost_usd(self) -> float:
        """Idle cost without the held part, USD."""
        return self.totals.idle_cost_usd - self.totals.held_cost_usd


def _gpu_lines(rows: tuple[GpuDay, ...]) -> tuple[GpuLine, ...]:
    by_gpu: dict[tuple[str, str], list[GpuDay]] = defaultdict(list)
    for row in rows:
        by_gpu[(row.host, row.uuid)].append(row)
    lines = []
    for (host, uuid), days in by_gpu.items():
        days.sort(key=lambda r: r.day)
        latest = days[-1]
        sources = sorted({r.price_source for r in days if r.price_source})
        savings = latest.savings_usd_per_hour if latest.recommended_gpu is not None else None
        lines.append(
            GpuLine(
                host=host,
                uuid=uuid,
                name=latest.name,
                gpu_index=latest.gpu_index,
                totals=_totals(days),
                price_sources=tuple(sources),
                recommended_gpu=latest.recommended_gpu,
                savings_usd_per_hour=savings,
                recommended_rule=latest.recommended_rule,
                need_basis=latest.need_basis,
            )
        )
    lines.sort(key=lambda g: (g.host, g.gpu_index if g.gpu_index is not None else -1, g.uuid))
    return tuple(lines)


def _sum_optional(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _host_lines(
    rows: tuple[GpuDay, ...], gpus: tuple[GpuLine, ...], actions: Iterable[WasteItem]
) -> tuple[HostLine, ...]:
    by_host: dict[str, list[GpuDay]] = defaultdict(list)
    for row in rows:
        by_host[row.host].append(row)
    saves: dict[str, float] = defaultdict(float)
    for item in actions:
        saves[item.gpu.host] += item.action_usd_per_month
    lines = []
    for host in sorted(by_host):
        own = [g for g in gpus if g.host == host]
        lines.append(HostLine(host, len(own), _totals(by_host[host]), saves.get(host)))
    return tuple(lines)


def _day_lines(rows: tuple[GpuDay, ...]) -> tuple[DayLine, ...]:
    by_day: dict[date, list[GpuDay]] = defaultdict(list)
    for row in rows:
        by_day[row.day].append(row)
    lines = []
    for day in sorted(by_day):
        totals = _totals(by_day[day])
        idle_only = totals.idle_cost_usd - totals.held_cost_usd
        by_class = {
            "idle": idle_only,
            "held": totals.held_cost_usd,
            "other": totals.cost_usd - totals.idle_cost_usd,
        }
        lines.append(DayLine(day, by_class, totals))
    return tuple(lines)


def _waste_item(gpu: GpuLine) -> WasteItem | None:
    """What to do about `gpu`: rightsize when that saves more per month than releasing
    its idle/held time would; None with nothing to gain. Releasing saves the GPU's idle
    and held cost per *settled* hour of its own x 730 h (`Totals.usd_per_month`), so the
    figure does not depend on the period's length or on when the GPU was first seen."""
    totals = gpu.totals
    waste = totals.waste_usd
    held = totals.held_cost_usd
    idle_rate = totals.usd_per_month(waste - held)
    held_rate = totals.usd_per_month(held)
    release = None if idle_rate is None or held_rate is None else idle_rate + held_rate
    rightsize = gpu.savings_usd_per_month
    if waste <= 0 and not rightsize:
        return None
    if (
        rightsize is not None
        and gpu.recommended_gpu is not None
        and (release is None or rightsize >= release)
    ):
        text = f"move the workload to {with_article(gpu.recommended_gpu)}"
        why = [gpu.need_phrase] if gpu.need_phrase else []
        why += [f"candidates: {gpu.candidates_phrase}"] if gpu.candidates_phrase else []
        if why:
            text += f" ({'; '.join(why)})"
        return WasteItem(
            gpu, waste, "rightsize", text, rightsize, rightsizing_usd_per_month=rightsize
        )
    if release is None or idle_rate is None or held_rate is None:
        return None
    if held >= waste - held:
        action = "release held"
        text = "stop the processes that hold memory on it and compute nothing, or release it"
    else:
        action = "release idle"
        text = "release or scale down the GPU while it has no work"
    return WasteItem(gpu, waste, action, text, release, idle_rate, held_rate)


def _actions(gpus: tuple[GpuLine, ...]) -> tuple[WasteItem, ...]:
    """Every GPU's action, most wasteful first."""
    items = [item for g in gpus if (item := _waste_item(g)) is not None]
    items.sort(key=lambda i: (-i.waste_usd, -(i.gpu.savings_usd_per_month or 0.0), i.gpu.uuid))
    return tuple(items)


def _savings(gpus: tuple[GpuLine, ...], actions: tuple[WasteItem, ...]) -> Savings | None:
    """The sum of every GPU's action by kind; None without a GPU that has settled time
    or a recommendation (nothing to take a rate from)."""
    if not any(g.totals.settled_seconds > 0 or g.savings_usd_per_month is not None for g in gpus):
        return None
    return Savings(
        sum(i.idle_usd_per_month for i in actions),
        sum(i.held_usd_per_month for i in actions),
        sum(i.rightsizing_usd_per_month for i in actions),
    )


def _token_lines(data: ReportData) -> tuple[TokenLine, tuple[TokenLine, ...]]:
    by_source: dict[tuple[str, str], list[float]] = {}
    for row in data.token_days:
        sums = by_source.setdefault((row.host, row.source), [0.0] * (len(TOKEN_KINDS) + 1))
        for i, kind in enumerate(TOKEN_KINDS):
            sums[i] += row.tokens.get(kind, 0.0)
        sums[-1] += row.cost_usd

    def line(source: str, host: str, sums: list[float]) -> TokenLine:
        tokens = dict(zip(TOKEN_KINDS, sums[:-1], strict=True))
        tokens["all"] = sum(sums[:-1])
        return TokenLine(source, host, tokens, sums[-1])

    per_source = tuple(line(s, h, v) for (h, s), v in sorted(by_source.items()))
    total = [sum(column) for column in zip(*by_source.values(), strict=True)] or [0.0] * (
        len(TOKEN_KINDS) + 1
    )
    return line("", "", total), per_source


def _namespace_lines(data: ReportData, total_cost_usd: float) -> tuple[NamespaceLine, ...]:
    """Pods' days summed per namespace; the share is of all GPU cost in the period (the
    rest is the GPUs' cost charged to no pod)."""
    sums: dict[str, list[float]] = {}
    pods: dict[str, set[str]] = defaultdict(set)
    for row in data.pod_days:
        line = sums.setdefault(row.namespace, [0.0, 0.0])
        line[0] += row.cost_usd
        line[1] += row.idle_cost_usd
        pods[row.namespace].add(row.pod)
    lines = [
        NamespaceLine(name, len(pods[name]), cost, idle, _ratio(cost, total_cost_usd))
        for name, (cost, idle) in sums.items()
    ]
    return tuple(sorted(lines, key=lambda n: (-n.cost_usd, n.namespace)))


def _notes(data: ReportData, totals: Totals, coverage: float | None) -> tuple[str, ...]:
    notes = list(data.notes)
    if data.expected_gpu_seconds is None:
        notes.append("coverage unknown: the source cannot tell how many GPU-hours to expect")
    elif totals.observed_seconds > data.expected_gpu_seconds:
        extra = (totals.observed_seconds - data.expected_gpu_seconds) / 3600.0
        notes.append(
            f"{extra:,.2f} GPU-hours were observed beyond the expected span: coverage "
            "is shown as 100 %"
        )
    elif coverage is not None and coverage < 1.0:
        missing_hours = (data.expected_gpu_seconds - totals.observed_seconds) / 3600.0
        notes.append(
            f"{missing_hours:,.1f} GPU-hours of the period were not observed (agent down, "
            "host off, or gaps): they are in no figure"
        )
    if not data.gpu_days:
        notes.append("no GPU data for the period")
    if not data.token_days:
        notes.append("no token counts for the period: no $/1M tokens")
    unpriced = sum(1 for r in data.gpu_days if r.price_source is None and r.cost_usd == 0)
    if unpriced:
        notes.append(
            f"{counted(unpriced, 'GPU-day')} without a price: "
            f"{'it costs' if unpriced == 1 else 'they cost'} $0 in this report"
        )
    if data.period.month_to_date:
        notes.append("month to date: the period ends at the last sample")
    return tuple(notes)


def _changes(current: Report, previous: Report) -> tuple[Change, ...]:
    pairs = (
        ("total cost", "usd", current.totals.cost_usd, previous.totals.cost_usd),
        ("idle and held cost", "usd", current.totals.idle_cost_usd, previous.totals.idle_cost_usd),
        ("held cost", "usd", current.totals.held_cost_usd, previous.totals.held_cost_usd),
        ("busy ratio", "ratio", current.totals.busy_ratio, previous.totals.busy_ratio),
        (
            "savings available per month",
            "usd",
            current.savings_usd_per_month,
            previous.savings_usd_per_month,
        ),
        (
            "$/1M generated tokens",
            "usd_per_million",
            current.usd_per_million_tokens("generation"),
            previous.usd_per_million_tokens("generation"),
        ),
    )
    return tuple(Change(name, unit, now, before) for name, unit, now, before in pairs)


def build_report(data: ReportData, previous: ReportData | None = None) -> Report:
    """The report of `data`; `previous` (the period before) adds month-over-month changes."""
    rows = data.gpu_days
    totals = _totals(rows)
    expected = data.expected_gpu_seconds
    coverage = _ratio(totals.observed_seconds, expected) if expected is not None else None
    if coverage is not None and coverage > 1.0:
        # a source that counts a sampled second outside the span it expects; the local
        # history and the Prometheus source each bound the two to the same span, so this
        # guard only keeps a ratio from reading above 100 % (a note says by how much)
        coverage = 1.0
    gpus = _gpu_lines(rows)
    actions = _actions(gpus)
    savings = _savings(gpus, actions)
    tokens, token_sources = _token_lines(data)
    price_sources: dict[str, int] = defaultdict(int)
    for row in rows:
        price_sources[row.price_source or "none"] += 1
    report = Report(
        period=data.period,
        source=data.source,
        coverage_ratio=coverage,
        observed_gpu_seconds=totals.observed_seconds,
        expected_gpu_seconds=expected,
        totals=totals,
        savings_usd_per_month=None if savings is None else savings.total_usd_per_month,
        savings=savings,
        tokens=tokens,
        token_sources=token_sources,
        rent_vs_buy_monthly_delta_usd=data.rent_vs_buy_monthly_delta_usd,
        rent_vs_buy_activity_monthly_delta_usd=data.rent_vs_buy_activity_monthly_delta_usd,
        rent_vs_buy_gpus=tuple(
            sorted(
                data.rent_vs_buy_gpus,
                key=lambda g: (g.host, -1 if g.gpu_index is None else g.gpu_index, g.uuid),
            )
        ),
        days=_day_lines(rows),
        hosts=_host_lines(rows, gpus, actions),
        gpus=gpus,
        top_waste=actions[:TOP_WASTE],
        namespaces=_namespace_lines(data, totals.cost_usd),
        changes=(),
        previous_label=None,
        price_sources=dict(sorted(price_sources.items())),
        notes=_notes(data, totals, coverage),
    )
    if previous is None:
        return report
    before = build_report(previous)
    return replace(
        report,
        changes=_changes(report, before),
        previous_label=previous.period.label,
        notes=(*report.notes, _comparison_note(data.period, previous.period)),
    )


def _comparison_note(period: Period, previous: Period) -> str:
    """What the month-over-month changes compare, in words."""
    days = period.seconds / 86400.0
    before = previous.seconds / 86400.0
    if period.month_to_date:
        return (
            f"month over month: this month to date ({days:,.2f} days) against the same span "
            f"from the start of the month before ({previous.label}, {before:,.2f} days)"
        )
    return (
        f"month over month: {period.label} ({days:,.2f} days) against {previous.label} "
        f"({before:,.2f} days), whole month against whole month"
    )
