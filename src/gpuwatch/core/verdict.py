"""The waste analysis's per-tick records: a GPU's state and its cheaper-GPU advice.

`GpuVerdict` is what `gpuwatch.analysis` adds to each tick's `FleetSnapshot`; the words
for its need basis and recommendation rule live beside it so every renderer says them
alike. Records and phrases only: no analysis, no catalog, no rendering here.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_STATES = ("pending", "busy", "idle", "held", "underutilized")
"""Waste-analysis states, in the order they are exported."""

NEED_BASES = ("declared", "measured", "observed")
"""What a GPU's memory need is, in the order the analysis prefers them: the sizing
model's figure for a `[[workloads]]` declaration, the need measured from the inference
server's KV cache use (`gpuwatch.analysis.measured`), the peak memory NVML observed."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A cheaper catalog GPU that meets the workload's memory and bandwidth need.

    `rule` says which candidates it was chosen from (see `recommendation_rule_phrase`):
    "same_class:<tier>", "allow_list" or "aws:<region>"; "" when not known.
    """

    gpu_id: str  # catalog id, e.g. "A100-SXM-80GB"
    rent_usd_per_hour: float
    savings_usd_per_hour: float
    rule: str = ""


_BASIS_WORDS = {
    "declared": "need from its workload declaration",
    "measured": "need measured from the server's KV cache use",
    "observed": "need from the memory it was seen using",
}


def need_basis_phrase(basis: str | None) -> str:
    """Words for a `GpuVerdict.need_basis` ("need measured from the server's KV cache
    use"); "" for None (an unknown basis is returned as is)."""
    if basis is None:
        return ""
    return _BASIS_WORDS.get(basis, basis)


_TIER_WORDS = {"datacenter": "data-centre", "workstation": "workstation", "consumer": "consumer"}


def recommendation_rule_phrase(rule: str) -> str:
    """Words for a `Recommendation.rule`: "same class (data-centre)", "allow-list",
    "rented by AWS in us-east-1"; "" for "" (an unknown rule is returned as is)."""
    kind, _, detail = rule.partition(":")
    if kind == "same_class":
        return f"same class ({_TIER_WORDS.get(detail, detail)})"
    if kind == "allow_list":
        return "allow-list"
    if kind == "aws":
        return f"rented by AWS in {detail}"
    return rule


@dataclass(frozen=True, slots=True)
class GpuVerdict:
    """The waste analysis of one GPU at one tick (see gpuwatch.analysis)."""

    gpu_index: int
    uuid: str
    state: str  # one of GPU_STATES
    state_since_seconds: float  # epoch seconds the current state began
    inactive_since_seconds: float | None  # start of the inactivity the window confirmed
    idle_seconds_total: float  # settled seconds spent idle or held
    activity_mean_ratio: float | None  # mean activity over the window
    inactive_seconds: float = 0.0  # sampled seconds of the current inactivity (0: active)
    unsettled_seconds: float = 0.0  # sampled seconds not yet classed (pending, open spell)
    tick_seconds: float = 0.0  # sampled seconds this tick adds (0 after a gap)
    tick_class: str | None = None  # this tick's class when known at once, else unsettled
    settlements: tuple[tuple[str, int], ...] = ()  # (class, oldest unsettled ticks) settled
    required_memory_bytes: tuple[tuple[str, int], ...] = ()  # (source, bytes)
    required_bandwidth_bytes_per_second: float | None = None
    catalog_gpu_id: str | None = None  # this GPU's catalog entry, when matched
    overprovisioned: bool | None = None  # None: not evaluated yet / not in the catalog
    recommendation: Recommendation | None = None
    workload: str | None = None  # the declared (else measured) workload's model name
    theoretical_tokens_per_second: float | None = None  # sizing model, declared workload
    need_basis: str | None = None  # NEED_BASES: what the need judged is; None: no need
    need_sample_bytes: int | None = None  # this tick's need on that basis, no headroom
