"""The plan's source for a fleet: any Prometheus-compatible API the agents are scraped into.

The same figures as the local history (`plan/local.py`), one query each over the lookback
`[Nd]` ending at `at`, hosts named as the fleet report names them (`node`, else `host`,
`hostname`, `instance`):

- seconds by state: `sum_over_time(gpuwatch_gpu_state[w])` x the scrape interval (the
  median gap of raw `gpuwatch_gpu_up` samples, or `--prometheus-scrape-interval`);
- activity: the 95th percentile of hourly means, `quantile_over_time(0.95,
  avg_over_time(gpuwatch_gpu_activity_mean_ratio[1h])[w:1h])` (subquery steps fall on
  whole hours, as the history's hours do);
- kernel-busy time: the 95th percentile of hourly means of `gpuwatch_gpu_utilization_ratio`
  (NVML utilization.gpu), as activity;
- DRAM: the 95th percentile of hourly peaks of `gpuwatch_gpu_dram_bandwidth_ratio`;
- need: `gpuwatch_gpu_required_memory_bytes` by source is the agent's maximum over its
  analysis lookback (24 h by default), so one bad sample stays in it for a lookback: it
  is read at points a lookback and one bucket apart (`last_over_time(...[1h])[w:25h]` at
  the default, a range vector; `disjoint_points`: no sample in two, and 30 points a
  series a month rather than 720) and reduced as the history's hours
  (`usage.robust_peak`: the second-largest), on the strongest basis
  `gpuwatch_gpu_need_basis_info` named in the lookback, observed memory included;
- pods: every `gpuwatch_gpu_pod_info` series in the lookback, hour by hour
  (`max_over_time(gpuwatch_gpu_pod_info[1h])[w:1h]`, a range vector: which GPUs one pod
  held at the same time; a pod's `resource` label `gpu.nvidia.com`, a DRA claim of
  NVIDIA's driver, marks the GPU `dra`); price: the latest
  `gpuwatch_gpu_price_usd_per_hour`; name and index: the latest `gpuwatch_gpu_info`.

The queries (`queries`) are independent: they run `PrometheusOptions.parallel_queries`
(4, as the report's) at a time, all ended by the run's deadline (`--prometheus-timeout`).
An answer that is not the API's shape, or a sample that is NaN, infinite or negative,
fails the source in one line (`promapi.client.Client`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from gpuwatch.core.units import DAY_SECONDS
from gpuwatch.kube.dra import NVIDIA_GPU_DRIVER
from gpuwatch.plan.usage import HIGH_PERCENTILE, GpuUsage, basis_of, robust_peak
from gpuwatch.promapi.client import Client, PrometheusOptions
from gpuwatch.promapi.labels import LabelKey, host_of, pod_of

_STATES = ("busy", "underutilized", "idle", "held", "pending")
_SOURCES = ("declared", "measured", "measured_p95", "observed")

_LABELS_ONLY = frozenset({"info", "bases"})  # queries whose values are not used
RANGE_VECTOR_QUERIES = frozenset({"pods", "required"})
"""The `queries` read hour by hour: their answers are range vectors (matrices)."""

GpuKey = tuple[str, str]  # (host, uuid)


def _gpu(labels: LabelKey) -> GpuKey | None:
    uuid = dict(labels).get("uuid")
    return None if not uuid else (host_of(labels), uuid)


def _max_by_gpu(series: Mapping[LabelKey, float]) -> dict[GpuKey, float]:
    """The largest value per GPU (two jobs scraping one agent give the same value)."""
    out: dict[GpuKey, float] = {}
    for labels, value in series.items():
        if (key := _gpu(labels)) is not None:
            out[key] = max(out.get(key, value), value)
    return out


def _interval(client: Client, at: float, given: float | None) -> float:
    if given is not None:
        return given
    matrix = client.matrix(f"gpuwatch_gpu_up[10m] @ {at:.3f}", at)
    gaps = [
        b - a for samples in matrix.values() for a, b in itertools.pairwise(t for t, _ in samples)
    ]
    return statistics.median(gaps) if gaps else 60.0


def queries(days: float, at: float, lookback_seconds: float = DAY_SECONDS) -> dict[str, str]:
    """The plan's instant queries over the `days` before `at` (epoch s), by what each reads."""
    span = f"{round(days * DAY_SECONDS)}s"
    w = f"[{span}] @ {at:.3f}"
    hourly = f"[{span}:1h] @ {at:.3f}"  # subquery steps on whole hours, as the history's
    # the agents' lookback maxima, only at points no sample shares (`disjoint_points`)
    apart = f"[{span}:{math.ceil(lookback_seconds * 61 / 60 / 3600)}h] @ {at:.3f}"
    return {
        "info": f"last_over_time(gpuwatch_gpu_info{w})",
        "states": f"sum_over_time(gpuwatch_gpu_state{w})",
        "observed": f"count_over_time(gpuwatch_gpu_up{w})",
        "activity": f"quantile_over_time({HIGH_PERCENTILE}, "
        f"avg_over_time(gpuwatch_gpu_activity_mean_ratio[1h]){hourly})",
        "kernel_busy": f"quantile_over_time({HIGH_PERCENTILE}, "
        f"avg_over_time(gpuwatch_gpu_utilization_ratio[1h]){hourly})",
        "dram": f"quantile_over_time({HIGH_PERCENTILE}, "
        f"max_over_time(gpuwatch_gpu_dram_bandwidth_ratio[1h]){hourly})",
        "required": f"last_over_time(gpuwatch_gpu_required_memory_bytes[1h]){apart}",
        "bases": f"max_over_time(gpuwatch_gpu_need_basis_info{w})",
        "pods": f"max_over_time(gpuwatch_gpu_pod_info[1h]){hourly}",
        "price": f"last_over_time(gpuwatch_gpu_price_usd_per_hour{w})",
    }


def disjoint_points(samples: Mapping[float, float], lookback_seconds: float) -> list[float]:
    """Values of an agent's lookback maximum (`gpuwatch_gpu_required_memory_bytes`, the
    largest over the last `lookback_seconds`, kept in 60 buckets) at times far enough
    apart that no sample is in two of them: from the latest backward, each at least
    the lookback and one bucket (61/60 of it) before the one taken before."""
    spacing = lookback_seconds * 61 / 60
    taken: list[float] = []
    last: float | None = None
    for at, value in sorted(samples.items(), reverse=True):
        if last is None or last - at >= spacing:
            taken.append(value)
            last = at
    return taken


def load_usage(
    options: PrometheusOptions, days: float, at: float, lookback_seconds: float = DAY_SECONDS
) -> list[GpuUsage]:
    """Each GPU's use over the `days` before `at` (epoch s): `queries`, run
    `options.parallel_queries` at a time. `lookback_seconds`: the agents' analysis
    lookback (`[analysis] lookback_seconds`), the span of their exported maxima."""
    asked = queries(days, at, lookback_seconds)
    with Client(options) as client, ThreadPoolExecutor(max(1, options.parallel_queries)) as pool:
        gap = pool.submit(_interval, client, at, options.scrape_interval_seconds)
        futures = {
            name: pool.submit(client.vector, q, at, labels_only=name in _LABELS_ONLY)
            for name, q in asked.items()
            if name not in RANGE_VECTOR_QUERIES
        }
        hourly = {
            name: pool.submit(client.matrix, asked[name], at) for name in RANGE_VECTOR_QUERIES
        }
        try:
            got = {name: future.result() for name, future in futures.items()}
            by_hour = {name: future.result() for name, future in hourly.items()}
            interval = gap.result()
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)  # the first failure is the source's
            raise
    info: dict[GpuKey, tuple[str, int | None]] = {}
    for labels in got["info"]:
        if (key := _gpu(labels)) is not None:
            found = dict(labels)
            text = found.get("gpu", "")
            info[key] = (found.get("name", ""), int(text) if text.isdigit() else None)
    states: dict[GpuKey, dict[str, float]] = defaultdict(dict)
    for labels, value in got["states"].items():
        state = dict(labels).get("state", "")
        if (key := _gpu(labels)) is not None and state in _STATES:
            states[key][state] = states[key].get(state, 0.0) + value * interval
    observed = _max_by_gpu(got["observed"])
    activity = _max_by_gpu(got["activity"])
    dram = _max_by_gpu(got["dram"])
    kernel_busy = _max_by_gpu(got["kernel_busy"])
    hourly_needs: dict[str, dict[GpuKey, dict[float, float]]] = {s: {} for s in _SOURCES}
    for labels, samples in by_hour["required"].items():
        source = dict(labels).get("source", "")
        if (key := _gpu(labels)) is not None and source in hourly_needs:
            hours = hourly_needs[source].setdefault(key, {})
            for hour, value in samples:  # two jobs scraping one agent give the same value
                hours[hour] = max(hours.get(hour, value), value)
    needs = {
        source: {
            key: peak
            for key, hours in by_gpu.items()
            if (peak := robust_peak(disjoint_points(hours, lookback_seconds))) is not None
        }
        for source, by_gpu in hourly_needs.items()
    }

    largest = {
        source: {key: max(hours.values()) for key, hours in by_gpu.items() if hours}
        for source, by_gpu in hourly_needs.items()
    }
    bases: dict[GpuKey, set[str]] = defaultdict(set)
    for labels in got["bases"]:
        if (key := _gpu(labels)) is not None:
            bases[key].add(dict(labels).get("basis", ""))
    pods: dict[GpuKey, set[str]] = defaultdict(set)
    dra: set[GpuKey] = set()  # GPUs a pod held through a gpu.nvidia.com claim
    pod_hours: dict[GpuKey, dict[float, set[str]]] = defaultdict(lambda: defaultdict(set))
    for labels, samples in by_hour["pods"].items():
        pod = pod_of(labels)
        if (key := _gpu(labels)) is not None and pod is not None:
            name = f"{pod[0]}/{pod[1]}"
            pods[key].add(name)
            if dict(labels).get("resource") == NVIDIA_GPU_DRIVER:
                dra.add(key)
            for hour, _ in samples:  # the hour ending at `hour`
                pod_hours[key][hour - 3600.0].add(name)
    price = _max_by_gpu(got["price"])
    usages = []
    for key in sorted(info):
        name, gpu_index = info[key]
        basis = basis_of(b for b in bases.get(key, ()) if key in needs.get(b, {}))
        usages.append(
            GpuUsage(
                host=key[0],
                uuid=key[1],
                name=name,
                gpu_index=gpu_index,
                observed_seconds=observed.get(key, 0.0) * interval,
                state_seconds=dict(states.get(key, {})),
                activity_ratio=activity.get(key),
                dram_ratio=dram.get(key),
                need_bytes=None if basis is None else needs[basis][key],
                need_basis=basis,
                observed_peak_bytes=largest["observed"].get(key),
                price_usd_per_hour=price.get(key),
                pods=tuple(sorted(pods.get(key, ()))),
                need_p95_bytes=largest["measured_p95"].get(key) if basis == "measured" else None,
                pod_hours=tuple(
                    (hour, tuple(sorted(names)))
                    for hour, names in sorted(pod_hours.get(key, {}).items())
                ),
                observed_need_bytes=needs["observed"].get(key),
                dra=key in dra,
                kernel_busy_ratio=kernel_busy.get(key),
            )
        )
    return usages
