"""Metric families of the cost engine: price, cost, idle cost, $/1M tokens, rent vs buy."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.core.snapshot import FleetSnapshot

GPU_LABELS = ("gpu", "uuid")


def cost_families(snapshot: FleetSnapshot) -> Iterator[Metric]:
    """Families with at least one sample; GPUs without a price have no cost series."""
    summary = snapshot.cost
    price = GaugeMetricFamily(
        "gpuwatch_gpu_price_usd_per_hour",
        "What one hour of this GPU costs: its instance's price divided by its GPUs.",
        labels=(*GPU_LABELS, "source"),
    )
    cost = CounterMetricFamily(
        "gpuwatch_gpu_cost_usd",
        "Cost accrued by the GPU since the agent started, in USD.",
        labels=GPU_LABELS,
    )
    idle_cost = CounterMetricFamily(
        "gpuwatch_gpu_idle_cost_usd",
        "Cost of the GPU's idle and held time, counted from the start of the inactivity the "
        "analysis window confirmed, in USD.",
        labels=GPU_LABELS,
    )
    held_cost = CounterMetricFamily(
        "gpuwatch_gpu_held_cost_usd",
        "The held part of the idle cost: time processes kept memory on a GPU that computed "
        "nothing for the whole window, in USD.",
        labels=GPU_LABELS,
    )
    gpu_busy = GaugeMetricFamily(
        "gpuwatch_gpu_busy_ratio",
        "Busy seconds / (busy + idle + held seconds) of the GPU over the window; time not "
        "yet classed (pending, an open inactive spell) and unknown time count in neither.",
        labels=(*GPU_LABELS, "window"),
    )
    for gpu in summary.gpus:
        labels = [str(gpu.gpu_index), gpu.uuid]
        for span in gpu.windows:
            if (ratio := span.busy_ratio) is not None:
                gpu_busy.add_metric([*labels, span.window], ratio)
        if gpu.price is None:
            continue
        price.add_metric([*labels, gpu.price.source], gpu.price.usd_per_hour)
        cost.add_metric(labels, gpu.cost_usd_total)
        idle_cost.add_metric(labels, gpu.idle_cost_usd_total)
        held_cost.add_metric(labels, gpu.held_cost_usd_total)
    per_token = GaugeMetricFamily(
        "gpuwatch_cost_per_million_tokens_usd",
        "All the cost of the token source's GPUs in the window, idle included, divided by "
        "the tokens of this kind (prompt, generation, or all = both) it served in the "
        "window, per million; absent while no token of the kind was counted.",
        labels=("source", "window", "kind"),
    )
    for window in summary.tokens:
        if window.usd_per_million_tokens is not None:
            per_token.add_metric(
                [window.source, window.window, window.kind], window.usd_per_million_tokens
            )
    source_cost = CounterMetricFamily(
        "gpuwatch_token_source_cost_usd",
        "Cost charged to the token source since the agent started, in USD: the cost of "
        "its GPUs, a GPU named by several sources split equally between them.",
        labels=("source",),
    )
    charged_tokens = CounterMetricFamily(
        "gpuwatch_token_source_charged_tokens",
        "Tokens the source served in the scrape-to-scrape spans in which every GPU of the "
        "source was charged for all of the span, since the agent started: what the "
        "$/1M-token windows and the report count (a stalled agent's span counts in none).",
        labels=("source", "kind"),
    )
    charged_cost = CounterMetricFamily(
        "gpuwatch_token_source_charged_cost_usd",
        "Cost charged to the token source over those same spans, in USD, since the agent "
        "started: the numerator of its $/1M tokens.",
        labels=("source",),
    )
    for charged in summary.token_sources:
        source_cost.add_metric([charged.source], charged.cost_usd_total)
        charged_tokens.add_metric([charged.source, "prompt"], charged.counted_prompt_tokens_total)
        charged_tokens.add_metric(
            [charged.source, "generation"], charged.counted_generation_tokens_total
        )
        charged_cost.add_metric([charged.source], charged.counted_cost_usd_total)
    busy = GaugeMetricFamily(
        "gpuwatch_utilization_busy_ratio",
        "Busy seconds / (busy + idle + held seconds) summed over the host's GPUs, over the "
        "window; time not yet classed and unknown time count in neither.",
        labels=("window",),
    )
    for name, ratio in summary.utilization_busy:
        busy.add_metric([name], ratio)
    breakeven = GaugeMetricFamily(
        "gpuwatch_rent_vs_buy_breakeven_utilization_ratio",
        "Busy fraction above which owning this GPU would be cheaper than renting it.",
        labels=GPU_LABELS,
    )
    delta = GaugeMetricFamily(
        "gpuwatch_rent_vs_buy_monthly_delta_usd",
        "Monthly rent at the GPU's own 30-day busy fraction minus the monthly cost of "
        "owning it with its host share; positive when buying would be cheaper.",
        labels=GPU_LABELS,
    )
    host_delta = GaugeMetricFamily(
        "gpuwatch_rent_vs_buy_host_monthly_delta_usd",
        "The host's rent-vs-buy position: the sum of its GPUs' monthly deltas; positive "
        "when buying would be cheaper.",
    )
    rent = GaugeMetricFamily(
        "gpuwatch_rent_vs_buy_rent_usd_per_hour",
        "The hourly rent the GPU's rent-vs-buy position is judged against ([rent_vs_buy] "
        "rent_usd_per_hour, else its price, else its catalog rent).",
        labels=GPU_LABELS,
    )
    owned = GaugeMetricFamily(
        "gpuwatch_rent_vs_buy_owned_usd_per_year",
        "What owning this GPU would cost a year, busy or not: capital (purchase and host "
        "share financed over the life) + energy + hosting + operations (docs/tco.md).",
        labels=GPU_LABELS,
    )
    inputs = GaugeMetricFamily(
        "gpuwatch_rent_vs_buy_inputs_info",
        "The inputs behind this GPU's owned cost (value 1): life_years, cost_of_capital "
        "(yearly, 0-1), ops_usd_per_year, facility (colocation: PUE not applied; owned: "
        "energy x PUE), pue_applied, hosting_usd_per_kw_month, host_share, capex_usd, "
        "it_power_watts.",
        labels=(*GPU_LABELS, *RENT_VS_BUY_INPUTS),
    )
    for position in summary.rent_vs_buy:
        labels = [str(position.gpu_index), position.uuid]
        breakeven.add_metric(labels, position.breakeven_utilization_ratio)
        delta.add_metric(labels, position.monthly_delta_usd)
        rent.add_metric(labels, position.rent_usd_per_hour)
        owned.add_metric(labels, position.owned_usd_per_year)
        inputs.add_metric([*labels, *(_label(getattr(position, k)) for k in RENT_VS_BUY_INPUTS)], 1)
    if summary.rent_vs_buy_host_monthly_delta_usd is not None:
        host_delta.add_metric([], summary.rent_vs_buy_host_monthly_delta_usd)
    theoretical = GaugeMetricFamily(
        "gpuwatch_gpu_theoretical_tokens_per_second",
        "The sizing model's decode tokens/s for the declared workload on this GPU (the "
        "bandwidth or compute limit at the default efficiency), to compare with realized.",
        labels=GPU_LABELS,
    )
    for verdict in snapshot.verdicts:
        if verdict.theoretical_tokens_per_second is not None:
            theoretical.add_metric(
                [str(verdict.gpu_index), verdict.uuid], verdict.theoretical_tokens_per_second
            )
    yield from pod_cost_families(snapshot)
    for family in (
        price,
        cost,
        idle_cost,
        held_cost,
        per_token,
        source_cost,
        charged_tokens,
        charged_cost,
        busy,
        gpu_busy,
        breakeven,
        delta,
        rent,
        owned,
        inputs,
        host_delta,
        theoretical,
    ):
        if family.samples:
            yield family


RENT_VS_BUY_INPUTS = (
    "life_years",
    "cost_of_capital",
    "ops_usd_per_year",
    "facility",
    "pue_applied",
    "hosting_usd_per_kw_month",
    "host_share",
    "capex_usd",
    "it_power_watts",
)
"""The `RentVsBuyPosition` fields `gpuwatch_rent_vs_buy_inputs_info` carries as labels."""


def _label(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def pod_cost_families(snapshot: FleetSnapshot) -> Iterator[Metric]:
    """Per-pod cost and idle cost, and each GPU's part charged to no pod (Kubernetes
    attribution on); a pod that left the node has no series."""
    summary = snapshot.cost
    pod_cost = CounterMetricFamily(
        "gpuwatch_pod_cost_usd",
        "Cost charged to the pod since the agent started (or the pod appeared), in USD: "
        "its processes' share of its GPUs' active time plus its idle cost.",
        labels=("namespace", "pod"),
    )
    pod_idle = CounterMetricFamily(
        "gpuwatch_pod_idle_cost_usd",
        "The idle part of the pod's cost, in USD: the unused fraction of the GPUs it holds "
        "an allocation of, split among their holders by device IDs held.",
        labels=("namespace", "pod"),
    )
    for pod in summary.pods:
        pod_cost.add_metric([pod.namespace, pod.pod], pod.cost_usd_total)
        pod_idle.add_metric([pod.namespace, pod.pod], pod.idle_cost_usd_total)
    unattributed = CounterMetricFamily(
        "gpuwatch_gpu_unattributed_cost_usd",
        "The part of the GPU's cost charged to no pod since the agent started, in USD: the "
        "idle part of a GPU no pod holds and the share of processes in no pod.",
        labels=GPU_LABELS,
    )
    for gpu in summary.unattributed:
        unattributed.add_metric([str(gpu.gpu_index), gpu.uuid], gpu.cost_usd_total)
    for family in (pod_cost, pod_idle, unattributed):
        if family.samples:
            yield family


COST_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gpuwatch_gpu_price_usd_per_hour", "gauge"),
    ("gpuwatch_gpu_cost_usd", "counter"),
    ("gpuwatch_gpu_idle_cost_usd", "counter"),
    ("gpuwatch_gpu_held_cost_usd", "counter"),
    ("gpuwatch_gpu_busy_ratio", "gauge"),
    ("gpuwatch_cost_per_million_tokens_usd", "gauge"),
    ("gpuwatch_token_source_cost_usd", "counter"),
    ("gpuwatch_token_source_charged_tokens", "counter"),
    ("gpuwatch_token_source_charged_cost_usd", "counter"),
    ("gpuwatch_utilization_busy_ratio", "gauge"),
    ("gpuwatch_rent_vs_buy_breakeven_utilization_ratio", "gauge"),
    ("gpuwatch_rent_vs_buy_monthly_delta_usd", "gauge"),
    ("gpuwatch_rent_vs_buy_host_monthly_delta_usd", "gauge"),
    ("gpuwatch_rent_vs_buy_rent_usd_per_hour", "gauge"),
    ("gpuwatch_rent_vs_buy_owned_usd_per_year", "gauge"),
    ("gpuwatch_rent_vs_buy_inputs_info", "gauge"),
    ("gpuwatch_gpu_theoretical_tokens_per_second", "gauge"),
    ("gpuwatch_pod_cost_usd", "counter"),
    ("gpuwatch_pod_idle_cost_usd", "counter"),
    ("gpuwatch_gpu_unattributed_cost_usd", "counter"),
)
"""(name, type) of every family `cost_families` (with `pod_cost_families`) may yield:
its `describe()`."""
