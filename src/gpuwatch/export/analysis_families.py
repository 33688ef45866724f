"""Metric families of the waste analysis: states, idle time, need, overprovisioning."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.core.verdict import GPU_STATES

GPU_LABELS = ("gpu", "uuid")


def analysis_families(snapshot: FleetSnapshot) -> Iterator[Metric]:
    """One family per analysis output; GPUs without a verdict are left out."""
    state = GaugeMetricFamily(
        "gpuwatch_gpu_state",
        "1 for the GPU's current waste-analysis state, 0 for the others.",
        labels=(*GPU_LABELS, "state"),
    )
    state_seconds = GaugeMetricFamily(
        "gpuwatch_gpu_state_seconds",
        "Seconds the GPU has been in its current state.",
        labels=GPU_LABELS,
    )
    idle = CounterMetricFamily(
        "gpuwatch_gpu_idle_seconds",
        "Sampled seconds the GPU spent idle or held, from the start of the inactivity the "
        "window confirmed.",
        labels=GPU_LABELS,
    )
    inactive = GaugeMetricFamily(
        "gpuwatch_gpu_inactive_seconds",
        "Sampled seconds the GPU has looked inactive so far (activity under the noise "
        "floor), whatever its state; 0 while active.",
        labels=GPU_LABELS,
    )
    unsettled = GaugeMetricFamily(
        "gpuwatch_gpu_unsettled_seconds",
        "Sampled seconds not yet classed busy or idle (the pending period, an inactive "
        "spell shorter than the window); they count in no ratio or cost split yet.",
        labels=GPU_LABELS,
    )
    activity = GaugeMetricFamily(
        "gpuwatch_gpu_activity_mean_ratio",
        "Mean activity over the analysis window (GPM SM activity, else kernel-busy time).",
        labels=GPU_LABELS,
    )
    required = GaugeMetricFamily(
        "gpuwatch_gpu_required_memory_bytes",
        "Memory the workload needs (source): observed peak over the lookback, the sizing "
        "model's figure for the declared workload (declared), the need measured from the "
        "inference server's KV cache use, its maximum and p95 over the lookback (measured, "
        "measured_p95), and the need with headroom that sizing uses (need).",
        labels=(*GPU_LABELS, "source"),
    )
    bandwidth = GaugeMetricFamily(
        "gpuwatch_gpu_required_bandwidth_bytes_per_second",
        "Observed peak DRAM bandwidth need over the lookback.",
        labels=GPU_LABELS,
    )
    basis = GaugeMetricFamily(
        "gpuwatch_gpu_need_basis_info",
        "What the GPU's memory need is (value 1): declared (a workload declaration, "
        "sized), measured (from the inference server's KV cache use) or observed (the "
        "peak memory NVML reports).",
        labels=(*GPU_LABELS, "basis"),
    )
    over = GaugeMetricFamily(
        "gpuwatch_gpu_overprovisioned",
        "1 when a cheaper catalog GPU meets the workload's memory and bandwidth need.",
        labels=GPU_LABELS,
    )
    recommendation = GaugeMetricFamily(
        "gpuwatch_gpu_recommendation_info",
        "The cheapest candidate GPU that meets the need (value 1); rule: the candidates "
        "it was chosen from (same_class:<tier>, allow_list, aws:<region>).",
        labels=(*GPU_LABELS, "current", "recommended", "rule"),
    )
    savings = GaugeMetricFamily(
        "gpuwatch_gpu_potential_savings_usd_per_hour",
        "Dollars per hour saved by moving to the recommended GPU (reference prices).",
        labels=GPU_LABELS,
    )
    now = snapshot.timestamp_seconds
    for verdict in snapshot.verdicts:
        labels = [str(verdict.gpu_index), verdict.uuid]
        for name in GPU_STATES:
            state.add_metric([*labels, name], 1.0 if verdict.state == name else 0.0)
        state_seconds.add_metric(labels, max(now - verdict.state_since_seconds, 0.0))
        idle.add_metric(labels, verdict.idle_seconds_total)
        inactive.add_metric(labels, verdict.inactive_seconds)
        unsettled.add_metric(labels, verdict.unsettled_seconds)
        if verdict.activity_mean_ratio is not None:
            activity.add_metric(labels, verdict.activity_mean_ratio)
        for source, value in verdict.required_memory_bytes:
            required.add_metric([*labels, source], float(value))
        if verdict.need_basis is not None:
            basis.add_metric([*labels, verdict.need_basis], 1.0)
        if verdict.required_bandwidth_bytes_per_second is not None:
            bandwidth.add_metric(labels, verdict.required_bandwidth_bytes_per_second)
        if verdict.overprovisioned is not None:
            over.add_metric(labels, 1.0 if verdict.overprovisioned else 0.0)
        rec = verdict.recommendation
        if rec is not None:
            recommendation.add_metric(
                [*labels, verdict.catalog_gpu_id or "", rec.gpu_id, rec.rule], 1.0
            )
            savings.add_metric(labels, rec.savings_usd_per_hour)
    for family in (
        state,
        state_seconds,
        idle,
        inactive,
        unsettled,
        activity,
        required,
        basis,
        bandwidth,
        over,
        recommendation,
        savings,
    ):
        if family.samples:
            yield family


ANALYSIS_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gpuwatch_gpu_state", "gauge"),
    ("gpuwatch_gpu_state_seconds", "gauge"),
    ("gpuwatch_gpu_idle_seconds", "counter"),
    ("gpuwatch_gpu_inactive_seconds", "gauge"),
    ("gpuwatch_gpu_unsettled_seconds", "gauge"),
    ("gpuwatch_gpu_activity_mean_ratio", "gauge"),
    ("gpuwatch_gpu_required_memory_bytes", "gauge"),
    ("gpuwatch_gpu_required_bandwidth_bytes_per_second", "gauge"),
    ("gpuwatch_gpu_need_basis_info", "gauge"),
    ("gpuwatch_gpu_overprovisioned", "gauge"),
    ("gpuwatch_gpu_recommendation_info", "gauge"),
    ("gpuwatch_gpu_potential_savings_usd_per_hour", "gauge"),
)
"""(name, type) of every family `analysis_families` may yield: its `describe()`."""
