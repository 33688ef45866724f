"""Snapshots in, per GPU-hour, token-source-hour and pod-hour rows out (pure, no I/O);
the Slurm jobs' hours in `gpuwatch.history.job_rollup`, folded from here; one hour's
row in `gpuwatch.history.hour_rows`; each GPU's pods in `gpuwatch.history.gpu_pods`.

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

from collections.abc import Sequence
from dataclasses import dataclass

from gpuwatch.core.costs import GpuCost
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.history.gpu_pods import dra_gpus, pods_by_gpu
from gpuwatch.history.hour_rows import GpuHour, PodHour, TokenHour
from gpuwatch.history.job_rollup import JobRollup
from gpuwatch.history.rows import (
    GpuHourRow,
    GpuStateRow,
    JobHourRow,
    PodHourRow,
    TokenHourRow,
)


@dataclass(frozen=True, slots=True)
class TokenReadingTotals:
    """A token source's cumulative token counts as the tokens collector reads them."""

    source: str
    prompt_tokens_total: float
    generation_tokens_total: float


def hour_of(t: float) -> int:
    """Start (epoch s) of the UTC hour holding `t`."""
    return int(t // HOUR_SECONDS) * HOUR_SECONDS


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
        self._pods: dict[tuple[str, str, int], PodHour] = {}
        self._pod_totals: dict[tuple[str, str], tuple[float, float]] = {}  # at the last snapshot
        self.dirty_pods: set[tuple[str, str, int]] = set()
        self._gpus: dict[tuple[str, int], GpuHour] = {}
        self._tokens: dict[tuple[str, int], TokenHour] = {}
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
            hour.add_tick(gpu, verdict)
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
                hour = self._pods[hour_key] = PodHour(base)
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

    def _gpu_hour(self, uuid: str, start: int, like: GpuHour | None = None) -> GpuHour:
        key = (uuid, start)
        hour = self._gpus.get(key)
        if hour is None:
            base = self._gpu_bases.pop(key, None) or {"uuid": uuid, "hour_start": start}
            hour = self._gpus[key] = GpuHour(base)
            if like is not None:  # an hour the ledger still settles: same GPU identity
                hour.latest.update(
                    (k, like.latest[k]) for k in ("host", "gpu_index", "name") if k in like.latest
                )
        return hour

    def _token_hour(self, source: str, start: int, host: str, t: float) -> TokenHour:
        key = (source, start)
        hour = self._tokens.get(key)
        if hour is None:
            base = self._token_bases.pop(key, None) or {"source": source, "hour_start": start}
            hour = self._tokens[key] = TokenHour(base)
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
