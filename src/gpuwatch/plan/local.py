"""The plan's source on one host: the history store's GPU-hours of the lookback.

Per GPU: seconds by analysis state summed; activity = the `HIGH_PERCENTILE` of the hourly
mean activity (activity seconds / seconds with an activity figure); kernel-busy = that
percentile of the hourly mean kernel-busy time (schema 9's kernel-busy seconds / seconds
with a utilization figure; unknown in hours written before); DRAM = that
percentile of the hourly peak DRAM bandwidth ratio; need = the second-largest hourly need
(`robust_peak` of schema 8's `need_bytes`, on the strongest `need_basis`), observed = the
largest hourly memory peak and its `robust_peak` (the observed basis' need); pods
= every pod the hours name, and each hour's (`GpuUsage.pod_hours`: which GPUs one pod
held at the same time); price = the latest stored price. Hours written before
schema 8 have no need or pods: those GPUs are judged on observed memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuwatch.history.rows import GpuHourRow
from gpuwatch.history.store import HISTORY_FILE, open_reader
from gpuwatch.plan.usage import HIGH_PERCENTILE, GpuUsage, basis_of, percentile, robust_peak

_STATE_COLUMNS = {
    "busy": "busy_state_seconds",
    "underutilized": "underutilized_state_seconds",
    "idle": "idle_state_seconds",
    "held": "held_state_seconds",
    "pending": "pending_state_seconds",
}


def load_usage(state_dir: Path, since: float, until: float) -> list[GpuUsage]:
    """Each GPU's use in the hours starting in [since, until) (epoch s), read-only;
    HistoryMissingError without a file, HistoryStoreError when it cannot be read."""
    store = open_reader(state_dir / HISTORY_FILE)
    try:
        rows = store.gpu_hours(since, until)
    finally:
        store.close()
    by_gpu: dict[tuple[str, str], list[GpuHourRow]] = {}
    for row in rows:
        by_gpu.setdefault((str(row["host"]), str(row["uuid"])), []).append(row)
    return [usage_of(host, uuid, hours) for (host, uuid), hours in sorted(by_gpu.items())]


def _hour_pods(hour: Mapping[str, Any]) -> tuple[str, ...]:  # GpuHourRow
    text = hour.get("pods")
    if not text:
        return ()
    try:
        names = json.loads(text)
    except ValueError:
        return ()
    if not isinstance(names, list):
        return ()
    return tuple(sorted({str(name) for name in names if isinstance(name, str)}))


def _pod_hours(
    hours: Iterable[Mapping[str, Any]],  # GpuHourRow
) -> tuple[tuple[float, tuple[str, ...]], ...]:
    return tuple((float(hour["hour_start"]), pods) for hour in hours if (pods := _hour_pods(hour)))


def _known(hours: Iterable[Mapping[str, Any]], column: str) -> list[float]:  # GpuHourRow
    return [float(h[column]) for h in hours if h.get(column) is not None]


def usage_of(host: str, uuid: str, hours: Sequence[Mapping[str, Any]]) -> GpuUsage:
    """One GPU's `GpuUsage` from its stored hours (`GpuHourRow`s, oldest first)."""
    last = hours[-1]
    hourly_activity = [
        float(h["activity_seconds"]) / float(h["activity_sampled_seconds"])
        for h in hours
        if (h.get("activity_sampled_seconds") or 0) > 0
    ]
    hourly_busy = [
        float(h["kernel_busy_seconds"]) / float(h["kernel_busy_sampled_seconds"])
        for h in hours
        if (h.get("kernel_busy_sampled_seconds") or 0) > 0
    ]
    with_need = [h for h in hours if h.get("need_bytes") is not None]
    basis = basis_of(h.get("need_basis") for h in with_need)
    needs = [float(h["need_bytes"]) for h in with_need if h.get("need_basis") == basis]
    p95 = [
        float(h["need_p95_bytes"])
        for h in with_need
        if h.get("need_basis") == basis and h.get("need_p95_bytes") is not None
    ]
    prices = _known(hours, "price_usd_per_hour")
    pod_hours = _pod_hours(hours)
    peaks = _known(hours, "memory_peak_bytes")
    return GpuUsage(
        host=host,
        uuid=uuid,
        name=str(last["name"]),
        gpu_index=None if last["gpu_index"] is None else int(last["gpu_index"]),
        observed_seconds=sum(float(h["observed_seconds"]) for h in hours),
        state_seconds={
            state: sum(float(h.get(column) or 0.0) for h in hours)
            for state, column in _STATE_COLUMNS.items()
        },
        activity_ratio=percentile(hourly_activity, HIGH_PERCENTILE),
        dram_ratio=percentile(_known(hours, "dram_peak_ratio"), HIGH_PERCENTILE),
        need_bytes=robust_peak(needs),
        need_basis=basis if needs else None,
        observed_peak_bytes=max(peaks) if peaks else None,
        price_usd_per_hour=prices[-1] if prices else None,
        pods=tuple(sorted({pod for _, pods in pod_hours for pod in pods})),
        need_p95_bytes=max(p95) if p95 else None,
        pod_hours=pod_hours,
        observed_need_bytes=robust_peak(peaks),
        dra=any(hour.get("dra") for hour in hours),
        kernel_busy_ratio=percentile(hourly_busy, HIGH_PERCENTILE),
    )
