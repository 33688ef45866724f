"""The report's input: what every source produces, in base units, one row per GPU-day.

Sources (the host's history, a Prometheus-compatible API) reduce their data to the same
rows, so every figure of a report is computed once, by `build.py`, whatever the source:

- `GpuDay`: one GPU on one UTC day of the period — seconds observed and seconds in each
  class (busy, idle, held, unknown; unsettled time is in none), its cost, idle and held
  cost in USD, energy in joules, the seconds sampled in each analysis state (busy,
  underutilized, idle, held, pending) and the activity seconds (mean activity x seconds),
  and the overprovisioning recommendation in force at the end of the day;
- `TokenDay`: one token source on one UTC day — tokens by kind and the cost charged to
  the source (a GPU named by n sources charges each 1/n);
- `PodDay`: one Kubernetes pod on one UTC day — the cost and idle cost the per-pod
  split charged it;
- `Period`: the UTC interval [start, end) the report covers; a month in progress ends at
  the last sample (month to date).

This module holds data only: no I/O, no formatting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

TIME_CLASSES = ("busy", "idle", "held", "unknown")
"""Classes of settled GPU time (gpuwatch.analysis.states)."""

GPU_STATES = ("busy", "underutilized", "idle", "held", "pending")
"""Analysis states a GPU is sampled in (gpuwatch.analysis.states), in report order;
seconds with a sample but no state are "unknown" in the report's state table."""

TOKEN_KINDS = ("prompt", "generation")
"""Kinds of counted tokens; "all" is their sum."""


@dataclass(frozen=True, slots=True)
class Period:
    """The UTC interval [start, end) a report covers, and what to call it."""

    start: datetime
    end: datetime
    label: str  # "2026-10", or "2026-10-03 to 2026-10-17"
    month_to_date: bool = False  # a month in progress: end is the last sample

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("period bounds must be timezone-aware (UTC)")
        if self.end <= self.start:
            raise ValueError("a period must end after it starts")

    @property
    def seconds(self) -> float:
        """Length of the period in seconds."""
        return (self.end - self.start).total_seconds()

    @property
    def start_epoch(self) -> float:
        """Start as Unix seconds."""
        return self.start.astimezone(UTC).timestamp()

    @property
    def end_epoch(self) -> float:
        """End as Unix seconds."""
        return self.end.astimezone(UTC).timestamp()


@dataclass(frozen=True, slots=True)
class GpuDay:
    """One GPU on one UTC day of the period."""

    host: str
    uuid: str
    name: str  # NVML name, e.g. "NVIDIA H100 80GB HBM3"
    day: date
    observed_seconds: float  # sampled seconds (settled or not)
    class_seconds: Mapping[str, float]  # TIME_CLASSES: settled seconds by class
    cost_usd: float
    idle_cost_usd: float  # idle and held
    held_cost_usd: float  # the held part of idle_cost_usd
    gpu_index: int | None = None
    energy_joules: float | None = None
    price_source: str | None = None  # static, pricing_api, cost_explorer, catalog
    recommended_gpu: str | None = None  # catalog id of a cheaper GPU that would do
    savings_usd_per_hour: float | None = None  # of that recommendation
    recommended_rule: str | None = None  # the candidates it was chosen from (Recommendation.rule)
    memory_peak_bytes: float | None = None
    need_basis: str | None = None  # what the memory need was (GpuVerdict.need_basis), last
    state_seconds: Mapping[str, float] = field(default_factory=dict)  # GPU_STATES: sampled
    activity_seconds: float = 0.0  # window mean activity x seconds, summed
    activity_sampled_seconds: float = 0.0  # the seconds with an activity figure


@dataclass(frozen=True, slots=True)
class TokenDay:
    """One token source on one UTC day of the period."""

    host: str
    source: str
    day: date
    tokens: Mapping[str, float]  # TOKEN_KINDS: tokens served that day
    cost_usd: float  # the cost charged to the source that day


@dataclass(frozen=True, slots=True)
class PodDay:
    """One Kubernetes pod on one UTC day: what the per-pod cost split charged it
    (gpuwatch.cost.pods), in USD."""

    host: str
    namespace: str
    pod: str
    day: date
    cost_usd: float  # busy and idle
    idle_cost_usd: float  # the unused part of the GPUs it held


@dataclass(frozen=True, slots=True)
class JobDay:
    """One Slurm job on one UTC day, on one host: its GPU time and what the jobs' cost
    split charged it (`job_hours`), in seconds and USD."""

    host: str
    job_id: str
    account: str
    user: str
    day: date
    held_seconds: float  # GPU-seconds it held
    cost_usd: float  # busy and idle
    idle_cost_usd: float  # the idle part of the GPUs it held
    held_cost_usd: float  # charged while it held a GPU and ran nothing on it
    reclaimed_usd: float | None = None  # reclaim's credit for cancelling it; None: n/a


@dataclass(frozen=True, slots=True)
class SlurmDay:
    """One Slurm account's (or user's) day on one host from Prometheus: its counters'
    growth (USD) and its jobs' GPU time (`gpuwatch_gpu_job_info` samples x the scrape
    interval, seconds)."""

    kind: str  # "account" or "user"
    host: str
    name: str
    day: date
    cost_usd: float
    idle_cost_usd: float
    held_cost_usd: float | None  # None: its cost counter grew with no held counter beside
    # it (an agent older than `gpuwatch_slurm_*_held_cost_usd_total`)
    reclaimed_usd: float
    gpu_seconds: float
    job_ids: tuple[str, ...]  # the jobs seen holding a GPU that day, sorted


@dataclass(frozen=True, slots=True)
class OwnedInputs:
    """What a GPU's owned $/year is computed from (docs/tco.md), as the agent resolved
    them (`RentVsBuyConfig.owned_inputs_for`, exported as `gpuwatch_rent_vs_buy_inputs_info`)."""

    capex_usd: float  # the purchase: the GPU's price, plus its host share when host_share
    host_share: bool  # False: a bare card
    life_years: float  # amortization life
    cost_of_capital: float  # yearly rate, 0-1
    ops_usd_per_year: float  # operations per GPU
    facility: str  # "colocation" (the fee covers cooling: PUE not applied) or "owned"
    pue_applied: float  # the PUE energy was multiplied by (1 in colocation)
    hosting_usd_per_kw_month: float  # per kW of IT power
    it_power_watts: float  # the GPU's power plus its host share's


@dataclass(frozen=True, slots=True)
class RentVsBuyGpu:
    """One GPU's rent-vs-buy position at the period's end (the 30 days before it), with
    what it is computed from: rent $/h x 730 h x utilization - owned $/year / 12, and
    the owning inputs behind owned $/year (None where the source has none)."""

    host: str
    uuid: str
    gpu_index: int | None
    rent_usd_per_hour: float
    owned_usd_per_year: float
    busy_ratio: float | None  # busy / (busy + idle + held) seconds
    activity_ratio: float | None  # mean activity
    monthly_delta_usd: float | None  # at busy_ratio
    activity_monthly_delta_usd: float | None  # at activity_ratio
    inputs: OwnedInputs | None = None


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything a source found for a period; `build.py` computes the report from it.

    `expected_gpu_seconds`: GPU-seconds the period should hold (GPUs known x their part
    of the period), the denominator of the coverage ratio; None when the source cannot
    tell. `notes`: what the source wants the method appendix to say (gaps, fallbacks).
    """

    period: Period
    gpu_days: tuple[GpuDay, ...]
    token_days: tuple[TokenDay, ...] = ()
    pod_days: tuple[PodDay, ...] = ()  # empty without Kubernetes attribution
    job_days: tuple[JobDay, ...] = ()  # empty without Slurm attribution
    slurm_days: tuple[SlurmDay, ...] = ()  # Prometheus's per account/user figures
    expected_gpu_seconds: float | None = None
    rent_vs_buy_monthly_delta_usd: float | None = None
    rent_vs_buy_activity_monthly_delta_usd: float | None = None  # at mean activity
    rent_vs_buy_gpus: tuple[RentVsBuyGpu, ...] = ()  # the GPUs behind the two sums
    source: str = "local"  # "local" or the Prometheus-compatible URL (no credentials)
    notes: tuple[str, ...] = field(default=())
