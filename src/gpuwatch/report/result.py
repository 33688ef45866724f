"""What `build_report` returns (`build.py` computes it): the `Report` and its lines
(totals, GPUs, hosts, days, waste items, savings, tokens, namespaces, changes), with the
meaning texts every format shows beside a figure. Plain data, no I/O, no computation but
one division of sums per derived figure; formats render it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date

from gpuwatch.core.units import HOUR_SECONDS, HOURS_PER_MONTH
from gpuwatch.core.verdict import need_basis_phrase, recommendation_rule_phrase
from gpuwatch.plan.render import PlanReport
from gpuwatch.report.model import (
    TOKEN_KINDS,
    Period,
    RentVsBuyGpu,
)

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
        return _ratio(usd * HOURS_PER_MONTH * HOUR_SECONDS, self.settled_seconds)


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
class SlurmLine:
    """One Slurm account's or user's GPU time and cost over the period (GPU-hours, USD)."""

    name: str
    jobs: int  # distinct jobs charged in the period
    gpu_hours: float  # held
    cost_usd: float  # busy and idle charged to its jobs
    idle_cost_usd: float  # part of cost_usd: the idle part of the GPUs its jobs held
    held_cost_usd: float | None  # part of cost_usd: charged while its jobs held GPUs running
    # nothing; None from Prometheus when an agent older than the held counter reported it
    share_ratio: float | None  # of the period's GPU cost; None when that is 0
    reclaimed_usd: float | None = None  # reclaim's credit for its cancelled jobs; None: n/a


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
    slurm_accounts: tuple[SlurmLine, ...] = ()  # by cost, largest first; () without jobs
    slurm_users: tuple[SlurmLine, ...] = ()

    @property
    def slurm_reclaimed_usd(self) -> float | None:
        """Reclaim's $ for the period's cancelled jobs, over all accounts; None: n/a."""
        known = [n.reclaimed_usd for n in self.slurm_accounts if n.reclaimed_usd is not None]
        return sum(known) if known else None

    def usd_per_million_tokens(self, kind: str) -> float | None:
        """Realized $/1M tokens of `kind` (TOKEN_FIGURES) over all sources."""
        return self.tokens.usd_per_million(kind)

    @property
    def idle_only_cost_usd(self) -> float:
        """Idle cost without the held part, USD."""
        return self.totals.idle_cost_usd - self.totals.held_cost_usd
