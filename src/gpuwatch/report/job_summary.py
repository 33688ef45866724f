"""One Slurm job's summary from its stored hours (`job_hours`, and its GPUs' `gpu_hours`).

Every figure is a sum or extreme over the job's rows (docs/slurm.md gives the formulas):
GPU-hours = sum(held_seconds) / 3600; idle GPU-hours = sum(idle_seconds) / 3600 and
their $ = sum(held_cost_usd); $ = sum(cost_usd), of it the GPUs' idle part
sum(idle_cost_usd); mean activity = sum(activity_seconds) /
sum(activity_sampled_seconds); p95 activity = the lowest 1 % bin at or under which 95 %
of the sampled seconds fall (the hours' histograms added); peak memory = the maximum.

What to request next time reuses the agent's rules: fewer GPUs by the GPUs the job held
and never ran on (idle all along); a cheaper part by `sizing.cheapest_fitting` among
`sizing.candidates` (the need: the declared workload's need where one is known, else the
peak memory; the bandwidth: the GPUs' peak DRAM ratio x the part's bandwidth; the agent's
headroom); a MIG slice: the smallest profile of the part (`plan.mig`) whose memory holds
the need with headroom and whose compute share is at least the p95 activity. No I/O.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.history.rows import GpuHourRow, JobHourRow
from gpuwatch.plan.mig import mig_table
from gpuwatch.sizing import GpuCatalog
from gpuwatch.sizing.candidates import CandidateRules
from gpuwatch.sizing.fit import cheapest_fitting

P95 = 0.95


@dataclass(frozen=True, slots=True)
class JobGpu:
    """One GPU the job held: identity and its figures over the job (s, bytes, USD)."""

    uuid: str
    model: str
    host: str
    gpu_index: int | None
    held_seconds: float
    busy_seconds: float
    idle_seconds: float
    activity_mean_ratio: float | None
    memory_peak_bytes: float | None
    cost_usd: float
    idle_cost_usd: float
    idle_hours_cost_usd: float  # charged while it ran nothing on the GPU

    @property
    def idle_all_along(self) -> bool:
        """Held and never run on (every known second idle)."""
        return self.busy_seconds == 0.0 and self.idle_seconds > 0.0


@dataclass(frozen=True, slots=True)
class JobAdvice:
    """What to request next time; None where the rule found nothing better."""

    gpus: int  # GPUs to request (the held ones less those idle all along)
    gpu_model: str | None  # a cheaper catalog part that holds the job
    mig_profile: str | None  # a MIG profile of the current part that holds it
    rule: str | None  # which candidates the part was chosen from


@dataclass(frozen=True, slots=True)
class JobSummary:
    """A Slurm job's GPU use and cost, as the history recorded it."""

    job_id: str
    user: str
    account: str
    partition: str
    steps: tuple[str, ...]
    start_seconds: float
    end_seconds: float
    gpus: tuple[JobGpu, ...]
    gpu_hours: float
    idle_gpu_hours: float
    cost_usd: float
    idle_cost_usd: float  # the idle part of its GPUs' cost (the split rule's)
    idle_hours_cost_usd: float  # what its idle GPU-hours cost (Σ held_cost_usd)
    activity_mean_ratio: float | None
    activity_p95_ratio: float | None
    memory_peak_bytes: float | None
    need_bytes: float | None  # the declared workload's need (no headroom), where known
    advice: JobAdvice


def p95_of(histogram: dict[int, float]) -> float | None:
    """The lowest 1 % bin (as a ratio) at or under which 95 % of the seconds fall."""
    total = sum(histogram.values())
    if total <= 0:
        return None
    running = 0.0
    for bin_ in sorted(histogram):
        running += histogram[bin_]
        if running >= P95 * total:
            return bin_ / 100.0
    return max(histogram) / 100.0


def _gpu(rows: Sequence[JobHourRow]) -> JobGpu:
    last = rows[-1]
    sampled = sum(r["activity_sampled_seconds"] for r in rows)
    peaks = [r["memory_peak_bytes"] for r in rows if r["memory_peak_bytes"] is not None]
    return JobGpu(
        uuid=last["uuid"],
        model=last["name"],
        host=last["host"],
        gpu_index=last["gpu_index"],
        held_seconds=sum(r["held_seconds"] for r in rows),
        busy_seconds=sum(r["busy_seconds"] for r in rows),
        idle_seconds=sum(r["idle_seconds"] for r in rows),
        activity_mean_ratio=(
            sum(r["activity_seconds"] for r in rows) / sampled if sampled > 0 else None
        ),
        memory_peak_bytes=max(peaks) if peaks else None,
        cost_usd=sum(r["cost_usd"] for r in rows),
        idle_cost_usd=sum(r["idle_cost_usd"] for r in rows),
        idle_hours_cost_usd=sum(r["held_cost_usd"] for r in rows),
    )


def gpu_hour_figures(
    rows: Sequence[JobHourRow], gpu_rows: Sequence[GpuHourRow]
) -> tuple[float | None, float | None]:
    """(the declared workload's need in bytes, the peak DRAM bandwidth ratio) over the
    job's GPU-hours, from `gpu_hours` rows (any superset); None where none has one."""
    hours = {(r["uuid"], r["hour_start"]) for r in rows}
    mine = [r for r in gpu_rows if (r["uuid"], r["hour_start"]) in hours]
    needs = [
        r["need_bytes"]
        for r in mine
        if r["need_basis"] == "declared" and r["need_bytes"] is not None
    ]
    dram = [r["dram_peak_ratio"] for r in mine if r["dram_peak_ratio"] is not None]
    return (max(needs) if needs else None, max(dram) if dram else None)


def summarize(
    rows: Sequence[JobHourRow],
    catalog: GpuCatalog,
    *,
    need_bytes: float | None,
    dram_peak_ratio: float | None,
    headroom_ratio: float,
    candidate_gpus: Sequence[str] | None = None,
) -> JobSummary:
    """The summary of one job's rows (non-empty); `need_bytes`, `dram_peak_ratio`: its
    GPUs' figures over its hours (`gpu_hour_figures`)."""
    by_gpu: dict[str, list[JobHourRow]] = {}
    histogram: dict[int, float] = {}
    for row in sorted(rows, key=lambda r: (r["uuid"], r["hour_start"])):
        by_gpu.setdefault(row["uuid"], []).append(row)
        for bin_, seconds in json.loads(row["activity_histogram"] or "{}").items():
            histogram[int(bin_)] = histogram.get(int(bin_), 0.0) + float(seconds)
    gpus = tuple(_gpu(g) for g in by_gpu.values())
    latest = max(rows, key=lambda r: r["last_seconds"])
    named = [r for r in rows if r["user"] or r["account"]]
    who = max(named, key=lambda r: r["last_seconds"]) if named else latest
    sampled = sum(r["activity_sampled_seconds"] for r in rows)
    peaks = [g.memory_peak_bytes for g in gpus if g.memory_peak_bytes is not None]
    summary = JobSummary(
        job_id=latest["job_id"],
        user=who["user"],
        account=who["account"],
        partition=who["partition"],
        steps=tuple(sorted({s for r in rows for s in json.loads(r["steps"] or "[]")})),
        start_seconds=min(r["first_seconds"] for r in rows),
        end_seconds=max(r["last_seconds"] for r in rows),
        gpus=gpus,
        gpu_hours=sum(g.held_seconds for g in gpus) / HOUR_SECONDS,
        idle_gpu_hours=sum(g.idle_seconds for g in gpus) / HOUR_SECONDS,
        cost_usd=sum(g.cost_usd for g in gpus),
        idle_cost_usd=sum(g.idle_cost_usd for g in gpus),
        idle_hours_cost_usd=sum(g.idle_hours_cost_usd for g in gpus),
        activity_mean_ratio=(
            sum(r["activity_seconds"] for r in rows) / sampled if sampled > 0 else None
        ),
        activity_p95_ratio=p95_of(histogram),
        memory_peak_bytes=max(peaks) if peaks else None,
        need_bytes=need_bytes,
        advice=JobAdvice(len(gpus), None, None, None),
    )
    advice = advise(
        summary,
        catalog,
        dram_peak_ratio=dram_peak_ratio,
        headroom_ratio=headroom_ratio,
        candidate_gpus=candidate_gpus,
    )
    return dataclasses.replace(summary, advice=advice)


def advise(
    summary: JobSummary,
    catalog: GpuCatalog,
    *,
    dram_peak_ratio: float | None,
    headroom_ratio: float,
    candidate_gpus: Sequence[str] | None = None,
) -> JobAdvice:
    """What to request next time (see the module docstring)."""
    used = [g for g in summary.gpus if not g.idle_all_along]
    count = len(used)
    models = {g.model for g in used}
    need = summary.need_bytes if summary.need_bytes is not None else summary.memory_peak_bytes
    spec = catalog.match_nvml_name(next(iter(models))) if len(models) == 1 else None
    if spec is None or need is None or not used:
        return JobAdvice(count, None, None, None)
    model = rule = None
    if dram_peak_ratio is not None:
        candidates, rule = CandidateRules(catalog, candidate_gpus).candidates(spec)
        bandwidth = dram_peak_ratio * spec.memory_bandwidth_bytes_per_second
        cheaper = cheapest_fitting(candidates, need, bandwidth, headroom_ratio)
        if cheaper is not None and cheaper.rent_usd_per_hour < spec.rent_usd_per_hour:
            model = cheaper.id
    profile = None
    table = mig_table(spec.id)
    p95 = summary.activity_p95_ratio
    if table is not None and p95 is not None:
        profile = next(
            (
                p.name
                for p in table.profiles
                if p.memory_bytes >= need * (1 + headroom_ratio)
                and p.compute_fraction >= p95
                and p.compute_slices < table.compute_slices
            ),
            None,
        )
    return JobAdvice(count, model, profile, rule if model is not None else None)
