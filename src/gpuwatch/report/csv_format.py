"""The report as CSV: one row per UTC day x GPU, columns modelled on OpenCost's.

OpenCost's allocation export has one row per window and workload with `window_start`,
`window_end`, `gpu_hours`, `gpu_cost`, `total_cost` and an efficiency column; here the
workload is one GPU of one host (docs/reports.md lists every column and its OpenCost
counterpart). Money in USD, time in seconds and hours, energy in joules; an absent
value is an empty cell. A cell that a spreadsheet would run as a formula (it starts
with `=`, `+`, `-`, `@`, a tab or a carriage return) is prefixed with `'`.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, time, timedelta

from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.report.model import GPU_STATES, GpuDay, PodDay, ReportData

COLUMNS = (
    "window_start",
    "window_end",
    "host",
    "gpu_index",
    "uuid",
    "gpu_name",
    "price_source",
    "observed_seconds",
    "gpu_hours",
    "busy_seconds",
    "idle_seconds",
    "held_seconds",
    "unknown_seconds",
    "gpu_efficiency",
    "busy_state_seconds",
    "underutilized_state_seconds",
    "idle_state_seconds",
    "held_state_seconds",
    "pending_state_seconds",
    "unknown_state_seconds",
    "mean_activity",
    "gpu_cost",
    "idle_cost",
    "held_cost",
    "total_cost",
    "energy_joules",
    "recommended_gpu",
    "savings_usd_per_hour",
    "need_basis",
)

POD_COLUMNS = (
    "window_start",
    "window_end",
    "host",
    "namespace",
    "pod",
    "gpu_cost",
    "unused_share_cost",
    "total_cost",
)
"""The pods file (Kubernetes attribution on): one row per UTC day x pod, what the per-pod
cost split charged it. Kept apart from the GPU rows so that summing either file's
`total_cost` never counts a dollar twice."""

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _text(value: str) -> str:
    """A name as a cell a spreadsheet shows as text."""
    return "'" + value if value.startswith(_FORMULA_START) else value


def _number(value: float | int | None) -> str:
    return "" if value is None else repr(value)


def _window(row: GpuDay | PodDay, data: ReportData) -> tuple[str, str]:
    """The day clipped to the period, as ISO 8601 UTC."""
    start = max(datetime.combine(row.day, time(0), UTC), data.period.start.astimezone(UTC))
    end = min(start.replace(hour=0) + timedelta(days=1), data.period.end.astimezone(UTC))
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return start.strftime(fmt), end.strftime(fmt)


def _row(row: GpuDay, data: ReportData) -> list[str]:
    seconds = row.class_seconds
    busy, idle, held = (seconds.get(k, 0.0) for k in ("busy", "idle", "held"))
    judged = busy + idle + held
    states = row.state_seconds
    activity, sampled = row.activity_seconds, row.activity_sampled_seconds
    start, end = _window(row, data)
    return [
        start,
        end,
        _text(row.host),
        _number(row.gpu_index),
        _text(row.uuid),
        _text(row.name),
        _text(row.price_source or ""),
        _number(row.observed_seconds),
        _number(row.observed_seconds / HOUR_SECONDS),
        _number(busy),
        _number(idle),
        _number(held),
        _number(seconds.get("unknown", 0.0)),
        _number(busy / judged if judged > 0 else None),
        *(_number(states.get(name, 0.0)) for name in GPU_STATES),
        _number(max(row.observed_seconds - sum(states.values()), 0.0)),
        _number(activity / sampled if sampled > 0 else None),
        _number(row.cost_usd),
        _number(row.idle_cost_usd),
        _number(row.held_cost_usd),
        _number(row.cost_usd),
        _number(row.energy_joules),
        _text(row.recommended_gpu or ""),
        _number(row.savings_usd_per_hour if row.recommended_gpu is not None else None),
        _text(row.need_basis or ""),
    ]


def render_csv(data: ReportData) -> str:
    """Every GpuDay row of `data`, sorted by day, host, GPU index and uuid."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    ordered = sorted(
        data.gpu_days,
        key=lambda r: (r.day, r.host, -1 if r.gpu_index is None else r.gpu_index, r.uuid),
    )
    for row in ordered:
        writer.writerow(_row(row, data))
    return out.getvalue()


def render_pods_csv(data: ReportData) -> str | None:
    """Every PodDay row of `data`, sorted by day, host, namespace and pod; None when the
    source has none (no Kubernetes attribution)."""
    if not data.pod_days:
        return None
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(POD_COLUMNS)
    for row in sorted(data.pod_days, key=lambda r: (r.day, r.host, r.namespace, r.pod)):
        start, end = _window(row, data)
        writer.writerow(
            [
                start,
                end,
                _text(row.host),
                _text(row.namespace),
                _text(row.pod),
                _number(row.cost_usd),
                _number(row.idle_cost_usd),
                _number(row.cost_usd),
            ]
        )
    return out.getvalue()
