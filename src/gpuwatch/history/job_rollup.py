"""Snapshots in, per Slurm job and GPU-hour rows (`job_hours`) out (pure, no I/O).

For every GPU a job holds in a snapshot (`FleetSnapshot.jobs`), the snapshot's hour of
(job, GPU) gains, over the verdict's `tick_seconds` dt:

- held seconds dt; busy seconds dt when the job runs on it (its allocated-idle False),
  idle seconds dt when it runs nothing there (True); neither when unknown;
- activity: the GPU's activity ratio (`activity_of`) x dt, dt, and dt in its 1 % bin;
- cost and idle cost: the GPU's tick cost (price x dt) split among its jobs by the pods'
  rule (`gpuwatch.cost.jobs.split_gpu_jobs`), the job's busy + idle part and idle part,
  and held cost: the job's part at ticks it ran nothing on the GPU (allocated-idle);
- memory: the peak of its processes' memory on the GPU, else, when it holds the GPU
  alone, of the GPU's memory used.

A snapshot whose job listing is stale is skipped, as the account ledger skips it (but
not its reclaim credits). A row is base (as stored when this run first touched the hour)
+ this run's sums, written whole. Reclaim's credits (`JobAttribution.reclaimed`, this
run's cancels, repeated in snapshots for a while) are set, never added, on the row of
the job, GPU and hour of the cancel: `reclaimed_usd` is base + this run's credit there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from gpuwatch.analysis.activity import activity_of
from gpuwatch.core.jobs import GpuJobs, JobAllocationSample, JobReclaim
from gpuwatch.core.snapshot import FleetSnapshot, GpuSample
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.cost.jobs import split_gpu_jobs
from gpuwatch.cost.ledger import tick_cost_usd
from gpuwatch.history.rows import JobHourRow

JobHourKey = tuple[str, str, int]  # (job_id, uuid, hour_start)

_ADDITIVE = (
    "held_seconds",
    "busy_seconds",
    "idle_seconds",
    "activity_seconds",
    "activity_sampled_seconds",
    "cost_usd",
    "idle_cost_usd",
    "held_cost_usd",
)


def activity_bin(ratio: float) -> int:
    """The 1 % bin (0-100) of an activity ratio."""
    return min(max(int(ratio * 100.0), 0), 100)


@dataclass(slots=True)
class _JobHour:
    base: dict[str, Any]
    latest: dict[str, Any] = field(default_factory=dict)
    run: dict[str, float] = field(default_factory=dict)
    histogram: dict[int, float] = field(default_factory=dict)
    steps: set[str] = field(default_factory=set)
    peak: float | None = None
    reclaimed: float = 0.0  # this run's credit (set, not summed)
    first: float | None = None
    last: float = 0.0

    def add(self, column: str, value: float) -> None:
        self.run[column] = self.run.get(column, 0.0) + value

    def row(self) -> JobHourRow:
        row = dict(self.base)
        for key, value in self.latest.items():
            if value or key not in row:  # "" (a job not listed yet) keeps a stored name
                row[key] = value
        for column in _ADDITIVE:
            row[column] = (row.get(column) or 0.0) + self.run.get(column, 0.0)
        row["reclaimed_usd"] = (row.get("reclaimed_usd") or 0.0) + self.reclaimed
        stored: dict[str, float] = json.loads(row.get("activity_histogram") or "{}")
        for bin_, seconds in self.histogram.items():
            stored[str(bin_)] = stored.get(str(bin_), 0.0) + seconds
        row["activity_histogram"] = json.dumps(
            {k: stored[k] for k in sorted(stored, key=int)}, separators=(",", ":")
        )
        steps = json.loads(row.get("steps") or "[]")
        row["steps"] = json.dumps(sorted({*steps, *self.steps}), ensure_ascii=False)
        if self.first is not None:
            first = row.get("first_seconds")
            row["first_seconds"] = self.first if first is None else min(first, self.first)
        row["last_seconds"] = max(row.get("last_seconds") or 0.0, self.last)
        if self.peak is not None:
            peak = row.get("memory_peak_bytes")
            row["memory_peak_bytes"] = self.peak if peak is None else max(peak, self.peak)
        row.setdefault("memory_peak_bytes", None)
        row.setdefault("price_usd_per_hour", None)
        return cast("JobHourRow", row)


def _memory_bytes(gpu: GpuSample, held: GpuJobs, allocation: JobAllocationSample) -> float | None:
    """The job's memory on the GPU: its processes', else the GPU's when it holds it alone."""
    own = [
        p.memory_used_bytes
        for p in gpu.processes or ()
        if p.pid in allocation.running_pids and p.memory_used_bytes is not None
    ]
    if own:
        return float(sum(own))
    if len(held.allocations) == 1 and gpu.memory_used_bytes is not None:
        return float(gpu.memory_used_bytes)
    return None


class JobRollup:
    """This run's job hours, on top of the stored rows it was given as bases."""

    def __init__(self, bases: Sequence[JobHourRow] = ()) -> None:
        self._bases = {(r["job_id"], r["uuid"], int(r["hour_start"])): dict(r) for r in bases}
        self._hours: dict[JobHourKey, _JobHour] = {}
        self.dirty: set[JobHourKey] = set()
        self._credited: dict[JobHourKey, float] = {}  # reclaim credits set, by row

    def add(self, snapshot: FleetSnapshot) -> None:
        """Fold one snapshot's job holds and reclaim credits into the hours."""
        jobs = snapshot.jobs
        if jobs is None:
            return
        self._reclaims(snapshot, jobs.reclaimed)
        if jobs.stale:
            return
        t = snapshot.timestamp_seconds
        start = int(t // HOUR_SECONDS) * HOUR_SECONDS
        samples = {g.identity.uuid: g for g in snapshot.gpus}
        verdicts = {v.uuid: v for v in snapshot.verdicts}
        prices = {c.uuid: c.price for c in snapshot.cost.gpus}
        for held in jobs.gpus:
            gpu = samples.get(held.uuid)
            verdict = verdicts.get(held.uuid)
            if gpu is None or verdict is None or not held.allocations:
                continue
            dt = verdict.tick_seconds
            price = prices.get(held.uuid)
            shares = split_gpu_jobs(gpu, held, tick_cost_usd(price, dt)).shares
            activity = activity_of(gpu)
            for allocation in held.allocations:
                job = allocation.job
                hour = self._hour((job.job_id, held.uuid, start))
                hour.latest.update(
                    host=snapshot.hostname, gpu_index=gpu.identity.index, name=gpu.identity.name
                )
                for key, value in (
                    ("user", job.user),
                    ("account", job.account),
                    ("partition", job.partition),
                ):  # "" (a job seen in its processes' environment only) keeps a name seen
                    if value or key not in hour.latest:
                        hour.latest[key] = value
                if price is not None:
                    hour.latest["price_usd_per_hour"] = price.usd_per_hour
                hour.steps.update(allocation.steps)
                hour.first = t if hour.first is None else min(hour.first, t)
                hour.last = max(hour.last, t)
                memory = _memory_bytes(gpu, held, allocation)
                if memory is not None:
                    hour.peak = memory if hour.peak is None else max(hour.peak, memory)
                busy, idle = shares.get((job.job_id,), (0.0, 0.0))
                hour.add("cost_usd", busy + idle)
                hour.add("idle_cost_usd", idle)
                allocated_idle = allocation.allocated_idle
                if allocated_idle:
                    hour.add("held_cost_usd", busy + idle)
                if dt <= 0:
                    continue
                hour.add("held_seconds", dt)
                if allocated_idle is not None:
                    hour.add("idle_seconds" if allocated_idle else "busy_seconds", dt)
                if activity is not None:
                    hour.add("activity_seconds", activity * dt)
                    hour.add("activity_sampled_seconds", dt)
                    bin_ = activity_bin(activity)
                    hour.histogram[bin_] = hour.histogram.get(bin_, 0.0) + dt

    def _reclaims(self, snapshot: FleetSnapshot, credits: Sequence[JobReclaim]) -> None:
        """Set each (job, GPU, hour)'s credit: the sum of its cancels' credits this run."""
        sums: dict[JobHourKey, tuple[JobReclaim, float]] = {}
        for credit in credits:
            start = int(credit.at_seconds // HOUR_SECONDS) * HOUR_SECONDS
            key = (credit.job.job_id, credit.uuid, start)
            sums[key] = (credit, sums.get(key, (credit, 0.0))[1] + credit.usd)
        gpus = {g.identity.uuid: g for g in snapshot.gpus}
        # the credits still carried, as last set: a repeated one changes nothing (its hour
        # may be written and forgotten since, and must not come back as a blank row)
        self._credited = {k: v for k, v in self._credited.items() if k in sums}
        for key, (credit, usd) in sums.items():
            if self._credited.get(key) == usd:
                continue
            self._credited[key] = usd
            hour = self._hour(key)
            hour.reclaimed = usd
            job = credit.job
            for column, value in (
                ("user", job.user),
                ("account", job.account),
                ("partition", job.partition),
                ("host", snapshot.hostname),
            ):
                if not hour.base.get(column) and (value or column not in hour.latest):
                    hour.latest[column] = value
            gpu = gpus.get(credit.uuid)
            if "name" not in hour.base and "name" not in hour.latest:
                hour.latest.update(
                    gpu_index=None if gpu is None else gpu.identity.index,
                    name="" if gpu is None else gpu.identity.name,
                )
            if hour.first is None and "first_seconds" not in hour.base:
                hour.first = hour.last = credit.at_seconds

    def _hour(self, key: JobHourKey) -> _JobHour:
        hour = self._hours.get(key)
        if hour is None:
            base = self._bases.pop(key, None) or dict(
                zip(("job_id", "uuid", "hour_start"), key, strict=True)
            )
            hour = self._hours[key] = _JobHour(base)
        self.dirty.add(key)
        return hour

    def take_dirty(self) -> list[JobHourRow]:
        """Rows changed since the last call; `untake` them on a failed write."""
        rows = [self._hours[k].row() for k in sorted(self.dirty)]
        self.dirty = set()
        return rows

    def untake(self, rows: Sequence[JobHourRow]) -> None:
        """Mark rows of a failed write as changed again."""
        self.dirty.update((r["job_id"], r["uuid"], int(r["hour_start"])) for r in rows)

    def untake_all(self) -> None:
        """Mark every hour in memory as changed (a fresh file replaced a damaged one)."""
        self.dirty.update(self._hours)

    def forget_before(self, hour_start: int) -> None:
        """Drop clean hours before `hour_start` (their rows are stored)."""
        for key in [k for k in self._hours if k[2] < hour_start and k not in self.dirty]:
            del self._hours[key]
