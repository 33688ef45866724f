"""The cost engine's per-tick records: prices, windows, $/token, rent vs buy, pod splits.

`CostSummary` is what `gpuwatch.cost` adds to each tick's `FleetSnapshot`; every money
figure is in USD and names its unit. Frozen records only: the arithmetic that fills
them is `gpuwatch.cost`'s, and nothing here imports another gpuwatch module.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuPrice:
    """What one GPU-hour costs and where the figure comes from."""

    usd_per_hour: float
    source: str  # static, pricing_api, cost_explorer, catalog


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """One GPU's settled time and cost over one window (1 h, 24 h, 30 d).

    Covers the settled samples in (`start_seconds`, `end_seconds`]: from the oldest
    checkpoint inside the window to the newest settled sample. Seconds not yet settled
    (pending period, open inactive spell) are in no window yet.
    """

    window: str
    start_seconds: float
    end_seconds: float
    busy_seconds: float
    idle_seconds: float
    held_seconds: float
    unknown_seconds: float
    cost_usd: float  # all settled cost in the window, any class
    idle_cost_usd: float  # idle and held

    @property
    def judged_seconds(self) -> float:
        """Seconds classed busy, idle or held (unknown excluded)."""
        return self.busy_seconds + self.idle_seconds + self.held_seconds

    @property
    def busy_ratio(self) -> float | None:
        """busy / (busy + idle + held); None when no second was judged."""
        judged = self.judged_seconds
        return None if judged <= 0 else self.busy_seconds / judged


@dataclass(frozen=True, slots=True)
class HourTotals:
    """What the ledger booked to one UTC hour of one GPU since the agent started.

    Seconds and cost are booked at the tick's own time, so a tick settled late still
    lands in its hour; the hour's figures grow until its last tick is settled. Columns
    of `class_seconds` and `class_cost_usd` are in the order of TIME_CLASSES (busy,
    idle, held, unknown). The history store adds these to what earlier runs stored.
    """

    hour_start_seconds: float  # epoch seconds, a multiple of 3600
    observed_seconds: float  # every sampled second, settled or not
    cost_usd: float  # all cost charged in the hour, settled or not
    class_seconds: tuple[float, float, float, float]
    class_cost_usd: tuple[float, float, float, float]
    last_tick_seconds: float  # epoch s of the newest tick booked or charged in the hour
    # epoch s where the earliest sampled span charged to the hour starts (t - tick seconds;
    # a run's first tick: its own time); it may lie in the hour before. None: no tick
    first_span_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class GpuCost:
    """One GPU's accrued cost and classed time since the agent started."""

    gpu_index: int
    uuid: str
    price: GpuPrice | None
    cost_usd_total: float  # every sampled second, settled or not
    idle_cost_usd_total: float  # settled idle and held seconds
    busy_seconds_total: float  # settled busy seconds
    observed_seconds_total: float  # every sampled second
    held_cost_usd_total: float = 0.0  # the held part of the idle cost
    idle_seconds_total: float = 0.0  # settled idle seconds (held not included)
    held_seconds_total: float = 0.0
    unknown_seconds_total: float = 0.0  # no activity signal
    unsettled_seconds: float = 0.0  # sampled, not yet classed
    windows: tuple[TimeWindow, ...] = ()
    hours: tuple[HourTotals, ...] = ()  # the hours that may still change, oldest first


TOKEN_KINDS = ("prompt", "generation", "all")
"""Kinds of tokens a realized cost per token is computed for ("all" = prompt + generation)."""


@dataclass(frozen=True, slots=True)
class TokenCostWindow:
    """Realized cost per token of one kind of one token source over one window.

    `tokens` and `cost_usd` cover the same scrape-to-scrape spans: only spans over which
    every GPU of the source was charged in full count (see gpuwatch.cost.engine).
    """

    source: str
    window: str  # "1h", "24h", "30d"
    kind: str  # one of TOKEN_KINDS
    covered_seconds: float  # scrape to scrape; less than the window while the agent is younger
    tokens: float
    cost_usd: float
    usd_per_million_tokens: float | None  # None when no token of this kind was counted


@dataclass(frozen=True, slots=True)
class TokenSourceCost:
    """What a token source has been charged since the agent started: each of its GPUs'
    cost divided by the number of sources that name that GPU."""

    source: str
    cost_usd_total: float
    # the tokens and cost of the scrape-to-scrape spans in which every GPU of the source
    # was charged in full (the $/1M-token windows count only these), since the start
    counted_prompt_tokens_total: float = 0.0
    counted_generation_tokens_total: float = 0.0
    counted_cost_usd_total: float = 0.0


@dataclass(frozen=True, slots=True)
class RentVsBuyPosition:
    """Rent vs buy for one GPU at its own measured 30-day busy fraction."""

    gpu_index: int
    uuid: str
    breakeven_utilization_ratio: float
    monthly_delta_usd: float  # positive when buying would be cheaper
    busy_ratio: float = 0.0  # the GPU's busy fraction it was judged at
    owned_usd_per_year: float = 0.0  # GPU and host share
    rent_usd_per_hour: float = 0.0  # the rent it was judged against
    # the inputs the owned cost used (RentVsBuyConfig.owned_inputs_for; docs/tco.md)
    life_years: float = 0.0
    cost_of_capital: float = 0.0  # yearly rate, 0-1
    ops_usd_per_year: float = 0.0
    facility: str = ""  # "colocation" (PUE not applied) or "owned" (energy x PUE)
    pue_applied: float = 1.0
    hosting_usd_per_kw_month: float = 0.0
    host_share: bool = True  # False: a bare card
    capex_usd: float = 0.0  # the GPU's price plus its host's server and networking
    it_power_watts: float = 0.0  # the GPU's power plus its host's


@dataclass(frozen=True, slots=True)
class PodCostShare:
    """One pod's part of one GPU's cost in one tick, in USD (see gpuwatch.cost.pods)."""

    namespace: str
    pod: str
    busy_cost_usd: float  # its processes' share of the GPU's active fraction
    idle_cost_usd: float  # its share of the GPU's unused fraction, as an allocation holder


@dataclass(frozen=True, slots=True)
class GpuCostSplit:
    """One GPU's cost of one tick split among pods; the parts sum to `tick_cost_usd`
    exactly (bit for bit, in any order)."""

    gpu_index: int
    uuid: str
    tick_cost_usd: float
    pods: tuple[PodCostShare, ...]
    unattributed_cost_usd: float  # busy part of processes in no pod
    unallocated_idle_cost_usd: float  # idle part no pod holds (charged to nobody)

    def parts(self) -> tuple[float, ...]:
        """Every part of the split: each pod's busy and idle, then the GPU's own two."""
        pods = tuple(x for s in self.pods for x in (s.busy_cost_usd, s.idle_cost_usd))
        return (*pods, self.unattributed_cost_usd, self.unallocated_idle_cost_usd)


@dataclass(frozen=True, slots=True)
class PodCost:
    """One pod's cost since the agent started (or since the pod appeared), in USD."""

    namespace: str
    pod: str
    cost_usd_total: float  # busy and idle
    idle_cost_usd_total: float  # the idle part of the GPUs it holds


@dataclass(frozen=True, slots=True)
class GroupCost:
    """A Slurm account's or user's cost since the agent started, in USD."""

    name: str
    cost_usd_total: float  # busy and idle
    idle_cost_usd_total: float  # the idle part of the GPUs its jobs hold
    held_cost_usd_total: float  # charged at ticks its jobs held a GPU and ran nothing on it


@dataclass(frozen=True, slots=True)
class GpuUnattributedCost:
    """The part of one GPU's cost charged to no pod since the agent started, in USD."""

    gpu_index: int
    uuid: str
    cost_usd_total: float


@dataclass(frozen=True, slots=True)
class CostSummary:
    """Everything the cost engine derived from one tick."""

    gpus: tuple[GpuCost, ...] = ()
    tokens: tuple[TokenCostWindow, ...] = ()
    utilization_busy: tuple[tuple[str, float], ...] = ()  # (window, ratio), the host's
    rent_vs_buy: tuple[RentVsBuyPosition, ...] = ()
    rent_vs_buy_host_monthly_delta_usd: float | None = None  # the sum over its GPUs
    token_sources: tuple[TokenSourceCost, ...] = ()
    splits: tuple[GpuCostSplit, ...] = ()  # this tick's per-pod split; () without attribution
    pods: tuple[PodCost, ...] = ()  # pods present now, with their totals
    unattributed: tuple[GpuUnattributedCost, ...] = ()  # per GPU, with attribution on
    slurm_accounts: tuple[GroupCost, ...] = ()  # with [slurm] on
    slurm_users: tuple[GroupCost, ...] = ()  # with [slurm] on
