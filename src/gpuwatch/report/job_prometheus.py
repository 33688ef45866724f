"""One Slurm job's rows from a Prometheus-compatible API (a fleet), for `job_summary`.

The job's one per-job series, `gpuwatch_gpu_job_info{job_id}`, over the lookback ending
at `at` says which GPUs (host, uuid) it held and at which scrapes; per GPU, the raw
samples over the job's span of:

- held seconds: the info series' samples x the scrape interval
  (`--prometheus-scrape-interval`, else the median gap of its samples);
- busy / idle seconds: those scrapes at which a step of the job ran on the GPU (the info
  series' `step` label set: the tick's hold verdict, as the history's) / ran nothing there,
  x the interval (`gpuwatch_gpu_job_allocated_idle` is the window's verdict, for alerts);
- $: each increase of `gpuwatch_gpu_cost_usd_total{uuid}` to a scrape where the job held
  the GPU, divided by the jobs holding it at that scrape (their info series); the idle
  part: each x (1 - the activity then); the idle GPU-hours' $: those at scrapes where it
  ran nothing there (Prometheus has no per-job cost: the history splits by measured use);
- activity: `gpuwatch_gpu_activity_mean_ratio` (the agent's window mean) at those scrapes;
- memory: the maximum of `gpuwatch_gpu_memory_used_bytes`; DRAM: of
  `gpuwatch_gpu_dram_bandwidth_ratio`; the declared need: of
  `gpuwatch_gpu_required_memory_bytes{source="declared"}`; the model: `gpuwatch_gpu_info`.

Each GPU becomes one `JobHourRow` spanning the job (hour_start: the hour of its first
scrape). No I/O but the client's.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.history.job_rollup import activity_bin
from gpuwatch.history.rows import JobHourRow
from gpuwatch.promapi.client import Client, PrometheusOptions
from gpuwatch.promapi.labels import LabelKey, escape_value, host_of

Samples = list[tuple[float, float]]


@dataclass(frozen=True, slots=True)
class PrometheusJob:
    """The job's rows and its GPUs' figures (bytes, ratio) as `summarize` takes them."""

    rows: tuple[JobHourRow, ...]
    need_bytes: float | None
    dram_peak_ratio: float | None


def _interval(options: PrometheusOptions, times: Sequence[float]) -> float:
    if options.scrape_interval_seconds is not None:
        return options.scrape_interval_seconds
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return statistics.median(gaps) if gaps else 0.0


def _one(found: dict[LabelKey, Samples], host: str) -> Samples:
    """The samples of the series on `host` (a uuid is one GPU; a host tells apart copies)."""
    for labels, samples in found.items():
        if host_of(labels) == host:
            return samples
    return next(iter(found.values()), [])


@dataclass(slots=True)
class _Held:
    """One GPU the job held: the latest series' labels, its scrape times, those at which a
    step of it ran there (the info series' `step` label not empty), the steps."""

    labels: dict[str, str]
    times: set[float]
    running: set[float]
    steps: set[str]


def _group(info: dict[LabelKey, Samples]) -> dict[tuple[str, str], _Held]:
    """(host, uuid): what the info series say; a new step is a new series of the GPU."""
    gpus: dict[tuple[str, str], _Held] = {}
    for labels, held in sorted(info.items(), key=lambda item: item[1][-1][0] if item[1] else 0):
        found = dict(labels)
        key = (host_of(labels), found.get("uuid", ""))
        gpu = gpus.setdefault(key, _Held(found, set(), set(), set()))
        gpu.labels = found
        gpu.times.update(t for t, _ in held)
        step = found.get("step", "")
        gpu.steps.add(step)
        if step:
            gpu.running.update(t for t, _ in held)
    return gpus


class _Gpu:
    """One GPU's series over the job's span on one host."""

    def __init__(self, client: Client, host: str, uuid: str, times: list[float], step: float):
        self._client = client
        self._host = host
        self.selector = f'uuid="{escape_value(uuid)}"'
        self.end = times[-1]
        self.span = f"[{math.ceil(times[-1] - times[0] + 2 * step) + 1}s]"

    def series(self, metric: str, extra: str = "") -> Samples:
        found = self._client.matrix(f"{metric}{{{self.selector}{extra}}}{self.span}", self.end)
        return _one(found, self._host)

    def holders(self) -> dict[float, int]:
        """Scrape time: the jobs holding the GPU then."""
        counts: dict[float, int] = {}
        found = self._client.matrix(
            f"gpuwatch_gpu_job_info{{{self.selector}}}{self.span}", self.end
        )
        for key, samples in found.items():
            if host_of(key) == self._host:
                for t, _ in samples:
                    counts[t] = counts.get(t, 0) + 1
        return counts

    def model(self) -> str:
        found = self._client.vector(
            f"last_over_time(gpuwatch_gpu_info{{{self.selector}}}{self.span})",
            self.end,
            labels_only=True,
        )
        return next((dict(k).get("name", "") for k in found if host_of(k) == self._host), "")


def _costs(
    costs: Samples,
    held: set[float],
    holders: dict[float, int],
    running: set[float],
    activity: dict[float, float],
) -> tuple[float, float, float]:
    """(the job's $, the GPU's idle part of it, its $ while it ran nothing): each increase
    to a held scrape over the holders then; the idle part x (1 - activity) then (all of
    it without an activity figure)."""
    cost = idle_cost = held_cost = 0.0
    for (_, before), (t, now) in itertools.pairwise(costs):
        if t in held:
            share = (now - before if now >= before else now) / max(holders.get(t, 1), 1)
            cost += share
            idle_cost += share * (1.0 - min(max(activity.get(t, 0.0), 0.0), 1.0))
            held_cost += 0.0 if t in running else share
    return cost, idle_cost, held_cost


def load_job(
    options: PrometheusOptions, job_id: str, at: float, lookback_seconds: float
) -> PrometheusJob:
    """The job's rows (empty: no such job in the lookback); PrometheusError on failure."""
    job = escape_value(job_id)
    lookback = f"[{math.ceil(lookback_seconds)}s]"
    rows: list[JobHourRow] = []
    needs: list[float] = []
    drams: list[float] = []
    with Client(options) as client:
        info = client.matrix(f'gpuwatch_gpu_job_info{{job_id="{job}"}}{lookback}', at)
        for (host, uuid), one in _group(info).items():
            found, held, running = one.labels, one.times, one.running
            times = sorted(held)
            step = _interval(options, times)
            gpu = _Gpu(client, host, uuid, times, step)
            activity_at = dict(gpu.series("gpuwatch_gpu_activity_mean_ratio"))
            activity = [v for t, v in activity_at.items() if t in held]
            cost, idle_cost, held_cost = _costs(
                gpu.series("gpuwatch_gpu_cost_usd_total"),
                held,
                gpu.holders(),
                running,
                activity_at,
            )
            histogram: dict[str, float] = {}
            for value in activity:
                histogram[str(activity_bin(value))] = (
                    histogram.get(str(activity_bin(value)), 0.0) + step
                )
            memory = [v for _, v in gpu.series("gpuwatch_gpu_memory_used_bytes")]
            drams += [v for _, v in gpu.series("gpuwatch_gpu_dram_bandwidth_ratio")]
            needs += [
                v for _, v in gpu.series("gpuwatch_gpu_required_memory_bytes", ',source="declared"')
            ]
            index = found.get("gpu", "")
            rows.append(
                {
                    "job_id": job_id,
                    "uuid": uuid,
                    "hour_start": int(times[0] // HOUR_SECONDS) * HOUR_SECONDS,
                    "host": host,
                    "gpu_index": int(index) if index.isdigit() else None,
                    "name": gpu.model(),
                    "user": found.get("user", ""),
                    "account": found.get("account", ""),
                    "partition": found.get("partition", ""),
                    "steps": json.dumps(sorted(one.steps - {""})),
                    "first_seconds": times[0],
                    "last_seconds": times[-1],
                    "held_seconds": len(times) * step,
                    "busy_seconds": len(running) * step,
                    "idle_seconds": (len(held) - len(running)) * step,
                    "activity_seconds": sum(activity) * step,
                    "activity_sampled_seconds": len(activity) * step,
                    "activity_histogram": json.dumps(histogram),
                    "memory_peak_bytes": max(memory) if memory else None,
                    "price_usd_per_hour": None,
                    "cost_usd": cost,
                    "idle_cost_usd": idle_cost,
                    "held_cost_usd": held_cost,
                    "reclaimed_usd": 0.0,  # per account and user only in Prometheus
                }
            )
    return PrometheusJob(tuple(rows), max(needs) if needs else None, max(drams) if drams else None)
