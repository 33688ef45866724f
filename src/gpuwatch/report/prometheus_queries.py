"""The report's queries against a Prometheus-compatible API (`prometheus.py` is the
loader that uses them): the UTC days of a period, the planner running instant queries in
parallel (counted for the progress bar), the day figures (raw or from the recording rules,
`prometheus_rules.py`), each counter's exact growth per day (raw samples, reset-corrected,
where `resets()` finds a reset) and the measured scrape interval per host.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from gpuwatch.core.units import DAY_SECONDS
from gpuwatch.promapi.client import Client
from gpuwatch.promapi.labels import LabelKey, host_of, selector
from gpuwatch.report import prometheus_rules as rules
from gpuwatch.report.model import (
    Period,
)

LOOKBACK_MS = 300_000  # Prometheus's default lookback delta (5 minutes)
RAW_BASE_MS = 7 * DAY_SECONDS * 1000  # how far back a raw fetch looks for a counter's base

COUNTERS = {
    "cost": "gpuwatch_gpu_cost_usd_total",
    "idle_cost": "gpuwatch_gpu_idle_cost_usd_total",
    "held_cost": "gpuwatch_gpu_held_cost_usd_total",
    "idle_seconds": "gpuwatch_gpu_idle_seconds_total",
    "energy": "gpuwatch_gpu_energy_joules_total",
    "tokens": "gpuwatch_tokens_total",
    "token_cost": "gpuwatch_token_source_cost_usd_total",
    "charged_tokens": "gpuwatch_token_source_charged_tokens_total",
    "charged_token_cost": "gpuwatch_token_source_charged_cost_usd_total",
    "pod_cost": "gpuwatch_pod_cost_usd_total",
    "pod_idle_cost": "gpuwatch_pod_idle_cost_usd_total",
    "slurm_account_cost": "gpuwatch_slurm_account_cost_usd_total",
    "slurm_account_idle_cost": "gpuwatch_slurm_account_idle_cost_usd_total",
    "slurm_account_held_cost": "gpuwatch_slurm_account_held_cost_usd_total",
    "slurm_user_cost": "gpuwatch_slurm_user_cost_usd_total",
    "slurm_user_idle_cost": "gpuwatch_slurm_user_idle_cost_usd_total",
    "slurm_user_held_cost": "gpuwatch_slurm_user_held_cost_usd_total",
    "slurm_reclaimed": "gpuwatch_slurm_reclaimed_usd_total",
}
"""The counters a report reads, by role."""

SLURM_ROLES = (
    "slurm_account_cost",
    "slurm_account_idle_cost",
    "slurm_account_held_cost",
    "slurm_user_cost",
    "slurm_user_idle_cost",
    "slurm_user_held_cost",
    "slurm_reclaimed",
)
"""The Slurm counters of `COUNTERS` (per account, per user, reclaim's per both)."""

RAW_RESET_ROLES = frozenset({"charged_tokens", "charged_token_cost", *SLURM_ROLES})
"""Counters whose resets are always read raw: the recording rules (version 2) predate
them and record no `resets` for them."""

GPU_ROLES = ("cost", "idle_cost", "held_cost", "idle_seconds", "energy")
"""The counters of `COUNTERS` labelled per GPU (uuid)."""

DAY_FIGURES = {
    "up_count": rules.Figure("count_over_time", "gpuwatch_gpu_up", "", "count", "sum"),
    "up_sum": rules.Figure("sum_over_time", "gpuwatch_gpu_up", "", "sum", "sum"),
    "states": rules.Figure(
        "sum_over_time", "gpuwatch_gpu_state", '{state=~"pending|idle|held"}', "sum", "sum"
    ),
    "memory": rules.Figure("max_over_time", "gpuwatch_gpu_memory_used_bytes", "", "max", "max"),
    "info": rules.Figure("last_over_time", "gpuwatch_gpu_info", "", "last", "last"),
    "price": rules.Figure("last_over_time", "gpuwatch_gpu_price_usd_per_hour", "", "last", "last"),
    "recommendation": rules.Figure(
        "last_over_time", "gpuwatch_gpu_recommendation_info", "", "last", "last"
    ),
    "savings": rules.Figure(
        "last_over_time", "gpuwatch_gpu_potential_savings_usd_per_hour", "", "last", "last"
    ),
}
"""Per-day figures by role (range function, metric, matchers, recorded operation, how
the recorded parts combine)."""

RAW_DAY_FIGURES = {
    "busy_states": ("sum_over_time", 'gpuwatch_gpu_state{state=~"busy|underutilized"}'),
    "activity_sum": ("sum_over_time", "gpuwatch_gpu_activity_mean_ratio"),
    "activity_count": ("count_over_time", "gpuwatch_gpu_activity_mean_ratio"),
    "need_basis": ("last_over_time", "gpuwatch_gpu_need_basis_info"),
    "job_info": ("count_over_time", "gpuwatch_gpu_job_info"),
}
"""Per-day figures always read raw (the recording rules do not record them): the busy and
underutilized state samples, the activity gauge's samples (sum and count), what the
memory need was (declared, measured, observed), and the Slurm jobs' holds (samples per
job and GPU)."""

LABEL_FIGURES = frozenset({"info", "price", "recommendation", "need_basis"})
"""Figures the report reads the labels of only (name, index, price source, recommendation,
need basis): their values are not checked, so a price the report never sums (an infinite
one included) does not stop it; the fleet plan, which does use it, fails alone."""

ProgressCallback = Callable[[int, int], None]
"""Called with (queries done, queries planned) as the report's queries complete."""


@dataclass(frozen=True, slots=True)
class _Day:
    day: date
    start: float  # Unix seconds
    end: float

    @property
    def ms(self) -> int:
        return round((self.end - self.start) * 1000)


def _days(period: Period) -> list[_Day]:
    days: list[_Day] = []
    start = period.start_epoch
    while start < period.end_epoch:
        day_start = math.floor(start / DAY_SECONDS) * DAY_SECONDS
        end = min(day_start + DAY_SECONDS, period.end_epoch)
        days.append(_Day(datetime.fromtimestamp(day_start, UTC).date(), start, end))
        start = end
    return days


def _at(t: float) -> str:
    return f"{t:.3f}"


class _Planner:
    """Runs instant queries in parallel and counts them for the progress callback."""

    def __init__(self, client: Client, workers: int, progress: ProgressCallback | None) -> None:
        self.client = client
        self.workers = max(1, workers)
        self.progress = progress
        self.done = 0
        self.planned = 0

    def run(self, jobs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
        self.planned += len(jobs)
        results: dict[str, Any] = {}
        with ThreadPoolExecutor(self.workers) as pool:
            futures = {name: pool.submit(job) for name, job in jobs.items()}
            try:
                for name, future in futures.items():
                    results[name] = future.result()
                    self.done += 1
                    if self.progress is not None:
                        self.progress(self.done, self.planned)
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)  # the first failure is the run's
                raise
        return results


Plans = list[rules.DayPlan | None]
"""Per day: the recorded evaluations it uses, or None for raw queries only."""


def _counter_jobs(client: Client, days: list[_Day], plans: Plans) -> dict[str, Callable[[], Any]]:
    jobs: dict[str, Callable[[], Any]] = {}
    first = days[0].start
    for role, metric in COUNTERS.items():
        jobs[f"{role}@start"] = _bind(client.vector, f"{metric} @ {_at(first)}", first)
        for i, (d, plan) in enumerate(zip(days, plans, strict=True)):
            jobs[f"{role}@{i}"] = _bind(client.vector, f"{metric} @ {_at(d.end)}", d.end)
            if plan is None or role in RAW_RESET_ROLES:
                expr = f"resets({metric}[{d.ms + LOOKBACK_MS}ms] @ {_at(d.end)})"
            else:
                expr = rules.resets_expr(metric, _ms(d.start), _ms(d.end), plan)
            jobs[f"{role}#resets{i}"] = _bind(client.vector, expr, d.end)
    return jobs


def _day_jobs(client: Client, days: list[_Day], plans: Plans) -> dict[str, Callable[[], Any]]:
    jobs: dict[str, Callable[[], Any]] = {}
    for i, (d, plan) in enumerate(zip(days, plans, strict=True)):
        window = f"{d.ms - 1}ms"  # (start, end]: a sample at the start belongs to the day before
        for name, figure in DAY_FIGURES.items():
            if plan is None:
                series = f"{figure.metric}{figure.matchers}"
                expr = f"{figure.function}({series}[{window}] @ {_at(d.end)})"
            else:
                expr = rules.day_expr(figure, _ms(d.start), _ms(d.end), plan)
            jobs[f"{name}@{i}"] = _bind(_reader(client, name), expr, d.end)
        for name, (function, series) in RAW_DAY_FIGURES.items():
            expr = f"{function}({series}[{window}] @ {_at(d.end)})"
            jobs[f"{name}@{i}"] = _bind(_reader(client, name), expr, d.end)
    return jobs


def _reader(client: Client, figure: str) -> Callable[[str, float], dict[LabelKey, float]]:
    """How a figure is read: its labels only (`LABEL_FIGURES`), else checked values."""
    return functools.partial(client.vector, labels_only=figure in LABEL_FIGURES)


def _ms(t: float) -> int:
    return round(t * 1000)


def _bind(fn: Callable[[str, float], Any], promql: str, at: float) -> Callable[[], Any]:
    return lambda: fn(promql, at)


def _merge_day_parts(results: dict[str, Any], days: list[_Day]) -> None:
    """Fold the tagged parts of rule-based queries into one value per series, in place."""
    for i in range(len(days)):
        for name, figure in DAY_FIGURES.items():
            results[f"{name}@{i}"] = rules.merge_parts(results[f"{name}@{i}"], figure.combine)
        for role in COUNTERS:
            results[f"{role}#resets{i}"] = rules.merge_parts(results[f"{role}#resets{i}"], "max")


def _raw_increase(samples: list[tuple[float, float]], start: float, end: float) -> float:
    """Reset-corrected growth over (start, end] from raw samples, based on the last sample
    at or before `start` (else the first sample in the window).

    Summed per run between drops (a drop counts the new value, as PromQL does), so without
    a drop it is `last - base`: bit for bit the difference of the boundary samples."""
    before: float | None = None
    base = previous = 0.0
    seen = False
    total = 0.0
    for t, v in samples:
        if t <= start:
            before = v
            continue
        if t > end:
            break
        if not seen:
            base = previous = v if before is None else before
            seen = True
        if v < previous:
            total += previous - base
            base = 0.0
        previous = v
    return total + (previous - base) if seen else 0.0


def _counter_deltas(
    planner: _Planner, results: Mapping[str, Any], days: list[_Day]
) -> dict[tuple[str, int], dict[LabelKey, float]]:
    """{(role, day index): {series: growth that day}}, raw-fetching the series that reset."""
    deltas: dict[tuple[str, int], dict[LabelKey, float]] = {}
    raw_jobs: dict[str, Callable[[], Any]] = {}
    raw_targets: dict[str, tuple[str, int, LabelKey]] = {}
    for role, metric in COUNTERS.items():
        prev: dict[LabelKey, float] = results[f"{role}@start"]
        for i, d in enumerate(days):
            end: dict[LabelKey, float] = results[f"{role}@{i}"]
            resets: dict[LabelKey, float] = results[f"{role}#resets{i}"]
            today: dict[LabelKey, float] = {}
            for key in end.keys() | resets.keys():
                before, after = prev.get(key), end.get(key)
                if (
                    before is not None
                    and after is not None
                    and resets.get(key, 0.0) == 0.0
                    and after >= before
                ):
                    today[key] = after - before
                else:
                    name = f"raw:{role}:{i}:{len(raw_jobs)}"
                    window = f"{d.ms + RAW_BASE_MS}ms"
                    raw_jobs[name] = _bind(
                        planner.client.matrix, f"{selector(metric, key)}[{window}] @ {_at(d.end)}",
                        d.end,
                    )  # fmt: skip
                    raw_targets[name] = (role, i, key)
            deltas[(role, i)] = today
            prev = end
    for name, matrix in planner.run(raw_jobs).items():
        role, i, key = raw_targets[name]
        samples = sorted(next(iter(matrix.values()), []))
        deltas[(role, i)][key] = _raw_increase(samples, days[i].start, days[i].end)
    return deltas


def _scrape_intervals(client: Client, days: list[_Day]) -> dict[str, float]:
    """Median gap between raw `gpuwatch_gpu_up` samples per host, at the latest day with data;
    the fleet's median under the key ""."""
    for d in reversed(days):
        matrix = client.matrix(f"gpuwatch_gpu_up[10m] @ {_at(d.end)}", d.end)
        gaps: dict[str, list[float]] = defaultdict(list)
        for key, samples in matrix.items():
            times = [t for t, _ in samples]
            gaps[host_of(key)].extend(b - a for a, b in itertools.pairwise(times))
        per_host = {host: statistics.median(g) for host, g in gaps.items() if g}
        if per_host:
            per_host[""] = statistics.median(per_host.values())
            return per_host
    return {}
