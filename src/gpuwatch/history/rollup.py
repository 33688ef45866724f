"""Snapshots in, per GPU-hour, token-source-hour and pod-hour rows out (pure, no I/O);
the Slurm jobs' hours in `gpuwatch.history.job_rollup`, folded from here.

Every row is *base + this run*: `base` is the row as stored when this run first touched
the hour (an agent restarted within an hour continues that hour's figures), and this
run's part is

- for the ledger's columns (observed seconds, cost, seconds and cost by class), the
  cumulative per-hour totals the snapshot carries (`GpuCost.hours`), which include
  seconds settled late at their tick's own time, so a snapshot that is skipped loses
  nothing;
- for the others, sums over the snapshots taken here: seconds by analysis state
  (`tick_seconds` of the verdict's state), energy (increase of the GPU's energy counter
  between two snapshots), memory (peak, and byte-seconds for the mean), activity (the
  verdict's window mean activity x `tick_seconds`, and those seconds), kernel-busy time
  (NVML utilization x `tick_seconds`, and those seconds), the peak DRAM
  bandwidth ratio, per token source the increase of its token counts and of the cost
  charged to it, and per Kubernetes pod the increase of its cost and idle cost (a pod
  that appears, or reappears after it left, starts from 0).

Prices and recommendations are the latest seen in the hour, and so is the need's basis
(`GpuVerdict.need_basis`); the need's maximum and time-weighted p95 (without headroom)
are over the ticks of the hour on that basis (`GpuVerdict.need_sample_bytes`), a stored
row's figures kept (the larger of its and this run's) when its basis is the same. The
hour's pods are the union, over its snapshots, of the pods that hold the GPU or run a
process on it (attribution). Because a row is always written whole and absolute,
writing it twice never counts anything twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from gpuwatch.analysis.activity import dram_bandwidth_ratio_of
from gpuwatch.analysis.rolling import QuantileSketch
from gpuwatch.core.costs import GpuCost, HourTotals
from gpuwatch.core.snapshot import FleetSnapshot, GpuSample, PodRef
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.core.verdict import GPU_STATES
from gpuwatch.history.job_rollup import JobRollup
from gpuwatch.history.rows import (
    GpuHourRow,
    GpuStateRow,
    JobHourRow,
    PodHourRow,
    TokenHourRow,
)
from gpuwatch.history.schema import GPU_CLASS_COLUMNS, STATE_COLUMNS
from gpuwatch.kube.dra import NVIDIA_GPU_DRIVER

_ADDITIVE_GPU = (
    "observed_seconds",
    "cost_usd",
    *GPU_CLASS_COLUMNS,
    *STATE_COLUMNS,
    "memory_byte_seconds",
    "memory_seconds",
    "activity_seconds",
    "activity_sampled_seconds",
    "kernel_busy_seconds",
    "kernel_busy_sampled_seconds",
)
_STATE_COLUMN = dict(zip(GPU_STATES, STATE_COLUMNS, strict=True))


@dataclass(frozen=True, slots=True)
class TokenReadingTotals:
    """A token source's cumulative token counts as the tokens collector reads them."""

    source: str
    prompt_tokens_total: float
    generation_tokens_total: float


def pod_name(pod: PodRef) -> str:
    """A pod as the history names it: "namespace/pod"."""
    return f"{pod.namespace}/{pod.pod}"


def pods_by_gpu(snapshot: FleetSnapshot) -> dict[str, set[str]]:
    """The pods ("namespace/pod") holding or using each GPU (by uuid) in a snapshot:
    attribution's allocations and pods running on it without one, the GPU's holder and
    its processes' pods; empty without attribution."""
    pods: dict[str, set[str]] = {}
    attribution = snapshot.attribution
    if attribution is not None:
        for gpu_attribution in attribution.gpus:
            names = pods.setdefault(gpu_attribution.uuid, set())
            names.update(pod_name(a.pod) for a in gpu_attribution.allocations)
            names.update(pod_name(pod) for pod, _ in gpu_attribution.unallocated)
    for gpu in snapshot.gpus:
        names = pods.setdefault(gpu.identity.uuid, set())
        names.update(pod_name(pod) for pod in _sample_pods(gpu))
    return pods


def dra_gpus(snapshot: FleetSnapshot) -> set[str]:
    """The GPUs (uuids) a container holds through a DRA claim of NVIDIA's driver."""
    attribution = snapshot.attribution
    if attribution is None:
        return set()
    return {
        g.uuid
        for g in attribution.gpus
        if any(a.resource_name == NVIDIA_GPU_DRIVER for a in g.allocations)
    }


def _sample_pods(gpu: GpuSample) -> list[PodRef]:
    found = [] if gpu.pod is None else [gpu.pod]
    found += [p.pod for p in gpu.processes or () if p.pod is not None]
    return found


def hour_of(t: float) -> int:
    """Start (epoch s) of the UTC hour holding `t`."""
    return int(t // HOUR_SECONDS) * HOUR_SECONDS


@dataclass(slots=True)
class _GpuHour:
    base: dict[str, Any]
    run: dict[str, float] = field(default_factory=dict)  # this run's additive sums
    ledger: HourTotals | None = None
    latest: dict[str, Any] = field(default_factory=dict)
    energy: float = 0.0
    energy_seen: bool = False
    peak: float | None = None
    dram_peak: float | None = None
    need_basis: str | None = None
    need_peak: float | None = None
    need_sketch: QuantileSketch = field(default_factory=QuantileSketch)
    pods: set[str] = field(default_factory=set)
    dra: bool = False  # a pod held the GPU through a gpu.nvidia.com claim this run

    def add_need(self, basis: str | None, need: int | None, dt: float) -> None:
        """One tick's need on `basis` (None: no need); a new basis starts the hour's
        need figures over."""
        if basis is None:
            return
        if basis != self.need_basis:
            self.need_basis = basis
            self.need_peak = None
            self.need_sketch = QuantileSketch()
        if need is None:
            return
        self.need_peak = need if self.need_peak is None else max(self.need_peak, need)
        self.need_sketch.add(float(need), dt)

    def row(self) -> GpuHourRow:
        row = dict(self.base)
        row.update((k, v) for k, v in self.latest.items() if v is not None or k not in row)
        for column in _ADDITIVE_GPU:
            row[column] = (row.get(column) or 0.0) + self.run.get(column, 0.0)
        ledger = self.ledger
        if ledger is not None:
            row["observed_seconds"] += ledger.observed_seconds
            row["cost_usd"] += ledger.cost_usd
            for column, value in zip(
                GPU_CLASS_COLUMNS, (*ledger.class_seconds, *ledger.class_cost_usd), strict=True
            ):
                row[column] += value
            row["last_seconds"] = max(row.get("last_seconds") or 0.0, ledger.last_tick_seconds)
            first = ledger.first_span_seconds
            if first is not None:
                stored = row.get("first_seconds")
                row["first_seconds"] = first if stored is None else min(stored, first)
        if self.energy_seen:
            row["energy_joules"] = (row.get("energy_joules") or 0.0) + self.energy
        for column, peak in (("memory_peak_bytes", self.peak), ("dram_peak_ratio", self.dram_peak)):
            if peak is not None:
                stored = row.get(column)
                row[column] = peak if stored is None else max(stored, peak)
        self._need_columns(row)
        if self.pods or row.get("pods") is None:
            stored_pods = json.loads(row["pods"]) if row.get("pods") else []
            row["pods"] = json.dumps(sorted({*stored_pods, *self.pods}), ensure_ascii=False)
        if self.dra or row.get("dra") is None:
            row["dra"] = int(self.dra or bool(row.get("dra")))
        return cast("GpuHourRow", row)  # the stored row, or a new hour's every column

    def _need_columns(self, row: dict[str, Any]) -> None:
        """need_basis, need_bytes and need_p95_bytes: this run's on top of the stored
        row's when both have the same basis, else this run's alone."""
        if self.need_basis is None:
            return
        same = row.get("need_basis") == self.need_basis
        row["need_basis"] = self.need_basis
        p95 = self.need_sketch.quantile(0.95)
        if p95 is not None and self.need_peak is not None:
            p95 = min(p95, self.need_peak)  # the sketch's bin edge is within 1 % above
        for column, value in (("need_bytes", self.need_peak), ("need_p95_bytes", p95)):
            stored = row.get(column) if same else None
            row[column] = (
                stored if value is None else value if stored is None else max(stored, value)
            )


@dataclass(slots=True)
class _TokenHour:
    base: dict[str, Any]
    prompt: float = 0.0
    generation: float = 0.0
    cost: float = 0.0
    charged: tuple[float, float, float] = (0.0, 0.0, 0.0)  # prompt, generation, USD
    host: str = ""
    last: float = 0.0

    def row(self) -> TokenHourRow:
        base = self.base
        charged = {
            column: (base.get(column) or 0.0) + value
            for column, value in zip(
                ("charged_prompt_tokens", "charged_generation_tokens", "charged_cost_usd"),
                self.charged,
                strict=True,
            )
        }
        return {
            "charged_prompt_tokens": charged["charged_prompt_tokens"],
            "charged_generation_tokens": charged["charged_generation_tokens"],
            "charged_cost_usd": charged["charged_cost_usd"],
            "source": base["source"],
            "hour_start": base["hour_start"],
            "host": self.host or base.get("host", ""),
            "prompt_tokens": (base.get("prompt_tokens") or 0.0) + self.prompt,
            "generation_tokens": (base.get("generation_tokens") or 0.0) + self.generation,
            "cost_usd": (base.get("cost_usd") or 0.0) + self.cost,
            "last_seconds": max(base.get("last_seconds") or 0.0, self.last),
        }


@dataclass(slots=True)
class _PodHour:
    base: dict[str, Any]
    cost: float = 0.0
    idle: float = 0.0
    host: str = ""
    last: float = 0.0

    def row(self) -> PodHourRow:
        base = self.base
        return {
            "namespace": base["namespace"],
            "pod": base["pod"],
            "hour_start": base["hour_start"],
            "host": self.host or base.get("host", ""),
            "cost_usd": (base.get("cost_usd") or 0.0) + self.cost,
            "idle_cost_usd": (base.get("idle_cost_usd") or 0.0) + self.idle,
            "last_seconds": max(base.get("last_seconds") or 0.0, self.last),
        }


class Rollup:
    """This run's hours, on top of the stored rows it was given as bases."""

    def __init__(
        self,
        gpu_bases: Sequence[GpuHourRow] = (),
        token_bases: Sequence[TokenHourRow] = (),
        pod_bases: Sequence[PodHourRow] = (),
        job_bases: Sequence[JobHourRow] = (),
    ) -> None:
        self.jobs = JobRollup(job_bases)  # the Slurm jobs' hours
        self._gpu_bases = {(r["uuid"], int(r["hour_start"])): dict(r) for r in gpu_bases}
        self._token_bases = {(r["source"], int(r["hour_start"])): dict(r) for r in token_bases}
        self._pod_bases = {
            (r["namespace"], r["pod"], int(r["hour_start"])): dict(r) for r in pod_bases
        }
        self._pods: dict[tuple[str, str, int], _PodHour] = {}
        self._pod_totals: dict[tuple[str, str], tuple[float, float]] = {}  # at the last snapshot
        self.dirty_pods: set[tuple[str, str, int]] = set()
        self._gpus: dict[tuple[str, int], _GpuHour] = {}
        self._tokens: dict[tuple[str, int], _TokenHour] = {}
        self._energy: dict[str, float] = {}  # uuid: energy counter at the last snapshot
        self._readings: dict[str, tuple[float, float]] = {}  # source: (prompt, generation)
        self._source_cost: dict[str, float] = {}
        # source: (prompt, generation, USD) counted over fully charged spans, last snapshot
        self._source_counted: dict[str, tuple[float, float, float]] = {}
        self.states: dict[str, GpuStateRow] = {}  # uuid: gpu_state row
        self._floor: int | None = None  # oldest hour the last snapshot can still change
        self.dirty_gpus: set[tuple[str, int]] = set()
        self.dirty_tokens: set[tuple[str, int]] = set()

    def add(self, snapshot: FleetSnapshot, readings: Sequence[TokenReadingTotals] = ()) -> None:
        """Fold one snapshot (and the token readings taken with it) into the hours."""
        t = snapshot.timestamp_seconds
        costs: dict[str, GpuCost] = {c.uuid: c for c in snapshot.cost.gpus}
        open_hours = [int(c.hours[0].hour_start_seconds) for c in costs.values() if c.hours]
        self._floor = min([hour_of(t), *open_hours])
        verdicts = {v.uuid: v for v in snapshot.verdicts}
        pods = pods_by_gpu(snapshot)
        dra = dra_gpus(snapshot)
        for gpu in snapshot.gpus:
            uuid = gpu.identity.uuid
            hour = self._gpu_hour(uuid, hour_of(t))
            verdict = verdicts.get(uuid)
            cost = costs.get(uuid)
            recommendation = None if verdict is None else verdict.recommendation
            hour.latest.update(
                host=snapshot.hostname,
                gpu_index=gpu.identity.index,
                name=gpu.identity.name,
                last_seconds=max(hour.latest.get("last_seconds", 0.0), t),
                recommended_gpu=None if recommendation is None else recommendation.gpu_id,
                recommended_rule=None if recommendation is None else recommendation.rule or None,
                savings_usd_per_hour=(
                    None if recommendation is None else recommendation.savings_usd_per_hour
                ),
            )
            if cost is not None and cost.price is not None:
                hour.latest.update(
                    price_usd_per_hour=cost.price.usd_per_hour, price_source=cost.price.source
                )
            self.dirty_gpus.add((uuid, hour_of(t)))
            hour.pods.update(pods.get(uuid, ()))
            hour.dra = hour.dra or uuid in dra
            dt = 0.0 if verdict is None else verdict.tick_seconds
            if verdict is not None:
                hour.add_need(verdict.need_basis, verdict.need_sample_bytes, dt)
            if verdict is not None and dt > 0:
                column = _STATE_COLUMN.get(verdict.state)
                if column is not None:
                    hour.run[column] = hour.run.get(column, 0.0) + dt
                activity = verdict.activity_mean_ratio
                if activity is not None:
                    hour.run["activity_seconds"] = (
                        hour.run.get("activity_seconds", 0.0) + activity * dt
                    )
                    hour.run["activity_sampled_seconds"] = (
                        hour.run.get("activity_sampled_seconds", 0.0) + dt
                    )
                busy = gpu.utilization_ratio  # kernel-busy time: adds up when time-sliced
                if busy is not None:
                    hour.run["kernel_busy_seconds"] = (
                        hour.run.get("kernel_busy_seconds", 0.0) + busy * dt
                    )
                    hour.run["kernel_busy_sampled_seconds"] = (
                        hour.run.get("kernel_busy_sampled_seconds", 0.0) + dt
                    )
            if gpu.memory_used_bytes is not None:
                used = float(gpu.memory_used_bytes)
                hour.peak = used if hour.peak is None else max(hour.peak, used)
                if dt > 0:
                    hour.run["memory_byte_seconds"] = (
                        hour.run.get("memory_byte_seconds", 0.0) + used * dt
                    )
                    hour.run["memory_seconds"] = hour.run.get("memory_seconds", 0.0) + dt
            dram = dram_bandwidth_ratio_of(gpu)
            # as the analysis: not a run's first tick (GPM has no interval yet there, and
            # memory-busy time stands in for the DRAM bandwidth)
            if dram is not None and dt > 0:
                hour.dram_peak = dram if hour.dram_peak is None else max(hour.dram_peak, dram)
            energy = gpu.energy_joules_total
            if energy is not None:
                previous = self._energy.get(uuid)
                self._energy[uuid] = energy
                if previous is not None and energy >= previous:
                    hour.energy += energy - previous
                    hour.energy_seen = True
            if cost is not None:
                for totals in cost.hours:
                    start = int(totals.hour_start_seconds)
                    self._gpu_hour(uuid, start, like=hour).ledger = totals
                    self.dirty_gpus.add((uuid, start))
            if verdict is not None:
                self.states[uuid] = {
                    "uuid": uuid,
                    "gpu_index": gpu.identity.index,
                    "name": gpu.identity.name,
                    "state": verdict.state,
                    "state_since_seconds": verdict.state_since_seconds,
                    "inactive_since_seconds": verdict.inactive_since_seconds,
                    "inactive_seconds": verdict.inactive_seconds,
                    "activity_mean_ratio": verdict.activity_mean_ratio,
                    "last_seconds": t,
                }
        self._add_tokens(snapshot, readings)
        self._add_pods(snapshot)
        self.jobs.add(snapshot)

    def _add_pods(self, snapshot: FleetSnapshot) -> None:
        """Each pod's cost increase since the last snapshot, into the snapshot's hour."""
        t = snapshot.timestamp_seconds
        totals = {}
        for pod in snapshot.cost.pods:
            key = (pod.namespace, pod.pod)
            totals[key] = (pod.cost_usd_total, pod.idle_cost_usd_total)
            cost, idle = self._pod_totals.get(key, (0.0, 0.0))
            hour_key = (pod.namespace, pod.pod, hour_of(t))
            hour = self._pods.get(hour_key)
            if hour is None:
                base = self._pod_bases.pop(hour_key, None) or dict(
                    zip(("namespace", "pod", "hour_start"), hour_key, strict=True)
                )
                hour = self._pods[hour_key] = _PodHour(base)
            hour.cost += max(pod.cost_usd_total - cost, 0.0)
            hour.idle += max(pod.idle_cost_usd_total - idle, 0.0)
            hour.host = snapshot.hostname
            hour.last = max(hour.last, t)
            self.dirty_pods.add(hour_key)
        self._pod_totals = totals  # a pod gone is forgotten: back, it starts from 0

    def take_dirty_pods(self) -> list[PodHourRow]:
        """Pod-hour rows changed since the last call; `untake_pods` them on a failed write."""
        rows = [self._pods[k].row() for k in sorted(self.dirty_pods)]
        self.dirty_pods = set()
        return rows

    def untake_pods(self, rows: Sequence[PodHourRow]) -> None:
        """Mark pod-hour rows of a failed write as changed again."""
        self.dirty_pods.update((r["namespace"], r["pod"], int(r["hour_start"])) for r in rows)

    def _add_tokens(self, snapshot: FleetSnapshot, readings: Sequence[TokenReadingTotals]) -> None:
        t = snapshot.timestamp_seconds
        for reading in readings:
            previous = self._readings.get(reading.source)
            now = (reading.prompt_tokens_total, reading.generation_tokens_total)
            self._readings[reading.source] = now
            hour = self._token_hour(reading.source, hour_of(t), snapshot.hostname, t)
            if previous is not None:
                hour.prompt += max(now[0] - previous[0], 0.0)
                hour.generation += max(now[1] - previous[1], 0.0)
        for charged in snapshot.cost.token_sources:
            previous_cost = self._source_cost.get(charged.source)
            self._source_cost[charged.source] = charged.cost_usd_total
            hour = self._token_hour(charged.source, hour_of(t), snapshot.hostname, t)
            if previous_cost is not None:
                hour.cost += max(charged.cost_usd_total - previous_cost, 0.0)
            counted = (
                charged.counted_prompt_tokens_total,
                charged.counted_generation_tokens_total,
                charged.counted_cost_usd_total,
            )
            before = self._source_counted.get(charged.source)
            self._source_counted[charged.source] = counted
            if before is not None:
                prompt, generation, usd = (
                    max(now - was, 0.0) for now, was in zip(counted, before, strict=True)
                )
                a, b, c = hour.charged
                hour.charged = (a + prompt, b + generation, c + usd)

    def _gpu_hour(self, uuid: str, start: int, like: _GpuHour | None = None) -> _GpuHour:
        key = (uuid, start)
        hour = self._gpus.get(key)
        if hour is None:
            base = self._gpu_bases.pop(key, None) or {"uuid": uuid, "hour_start": start}
            hour = self._gpus[key] = _GpuHour(base)
            if like is not None:  # an hour the ledger still settles: same GPU identity
                hour.latest.update(
                    (k, like.latest[k]) for k in ("host", "gpu_index", "name") if k in like.latest
                )
        return hour

    def _token_hour(self, source: str, start: int, host: str, t: float) -> _TokenHour:
        key = (source, start)
        hour = self._tokens.get(key)
        if hour is None:
            base = self._token_bases.pop(key, None) or {"source": source, "hour_start": start}
            hour = self._tokens[key] = _TokenHour(base)
        hour.host = host
        hour.last = max(hour.last, t)
        self.dirty_tokens.add(key)
        return hour

    def take_dirty(self) -> tuple[list[GpuHourRow], list[TokenHourRow], list[GpuStateRow]]:
        """(GPU rows, token rows, state rows) changed since the last `take_dirty`;
        hand them back with `untake` when the write fails."""
        gpu_rows = [self._gpus[k].row() for k in sorted(self.dirty_gpus)]
        token_rows = [self._tokens[k].row() for k in sorted(self.dirty_tokens)]
        self.dirty_gpus = set()
        self.dirty_tokens = set()
        return gpu_rows, token_rows, list(self.states.values())

    def untake(self, gpu_rows: Sequence[GpuHourRow], token_rows: Sequence[TokenHourRow]) -> None:
        """Mark rows of a failed write as changed again (their latest values are written)."""
        self.dirty_gpus.update((r["uuid"], int(r["hour_start"])) for r in gpu_rows)
        self.dirty_tokens.update((r["source"], int(r["hour_start"])) for r in token_rows)

    def untake_all(self) -> None:
        """Mark every hour in memory as changed (a fresh file replaced a damaged one)."""
        self.dirty_gpus.update(self._gpus)
        self.dirty_tokens.update(self._tokens)
        self.dirty_pods.update(self._pods)
        self.jobs.untake_all()

    def forget_final(self) -> None:
        """Drop clean hours no snapshot can change any more (their rows are stored):
        older than the oldest hour the ledger still settles and than the current hour."""
        if self._floor is None:
            return
        hour_start = self._floor
        for key in [k for k in self._gpus if k[1] < hour_start and k not in self.dirty_gpus]:
            del self._gpus[key]
        for key in [k for k in self._tokens if k[1] < hour_start and k not in self.dirty_tokens]:
            del self._tokens[key]
        for pod in [k for k in self._pods if k[2] < hour_start and k not in self.dirty_pods]:
            del self._pods[pod]
        self.jobs.forget_before(hour_start)

    @property
    def pending_rows(self) -> int:
        """Rows changed and not yet written."""
        pending = len(self.dirty_gpus) + len(self.dirty_tokens) + len(self.dirty_pods)
        return pending + len(self.jobs.dirty)
