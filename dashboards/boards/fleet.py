"""The Fleet and waste dashboard (gpuwatch-fleet.json): how many GPUs, how busy, what idle and
held time cost, which GPUs waste money, and the cost per namespace and pod."""

from __future__ import annotations

from boards.blocks import (
    Panel,
    Target,
    column_mappings,
    column_unit,
    instant,
    stat,
    table,
    ts,
)
from boards.cost_by import cost_per_hour, cost_table
from boards.promql import (
    GPU,
    HOST,
    NS,
    ON_GPU,
    ON_UUID,
    POD_GPU,
    STATE_MAPPINGS,
    YES_NO_UNKNOWN,
    allocated_idle_or_unknown,
    state_code_expr,
)


def fleet_panels() -> list[Panel]:
    """Fleet and waste: where the money goes and which GPUs waste it."""
    waste_states = 'state=~"idle|held|underutilized"'
    in_waste_state = (
        f"{ON_GPU} (max by (job, instance, gpu) (gpuwatch_gpu_state{{{GPU}, {waste_states}}}) == 1)"
    )
    price = f"max by (job, instance, gpu) (gpuwatch_gpu_price_usd_per_hour{{{GPU}}})"
    by_gpu = "max by (instance, gpu"
    wasteful = (
        f"{ON_UUID} group_left() (\n"
        f"    max by (job, instance, uuid) (gpuwatch_gpu_state{{{GPU}, {waste_states}}}) == 1\n"
        f"    or max by (job, instance, uuid) (gpuwatch_gpu_overprovisioned{{{GPU}}}) == 1\n  )"
    )
    # GPUs (distinct uuids) held by a pod of the selected namespaces; 0 rather than no data.
    held_gpus = f"count by (job, instance, uuid) (gpuwatch_gpu_pod_info{{{POD_GPU}}})"
    unused_gpus = (
        f"min by (job, instance, uuid) (gpuwatch_gpu_pod_allocated_idle{{{POD_GPU}}}) == 1"
    )
    return [
        stat(
            "GPUs",
            "How many GPUs the selected agents report (gpuwatch_gpu_info), lost ones included.",
            "none",
            Target(f"count(gpuwatch_gpu_info{{{GPU}}})", instant=True),
        ),
        stat(
            "Busy % (24 h)",
            "Mean over the selected GPUs of each GPU's busy seconds / (busy + idle + held) "
            "seconds over the last 24 h, as the agent's analysis classes them "
            "(gpuwatch_gpu_busy_ratio); pending time counts in neither.",
            "percentunit",
            Target(f'avg(gpuwatch_gpu_busy_ratio{{{GPU}, window="24h"}})', instant=True),
        ),
        stat(
            "Idle $ month to date",
            "Cost of idle and held GPU time since the start of this month "
            "(increase of gpuwatch_gpu_idle_cost_usd_total over the panel's month-to-date range).",
            "currencyUSD",
            Target(
                f"sum(increase(gpuwatch_gpu_idle_cost_usd_total{{{GPU}}}[$__range]))",
                instant=True,
            ),
            time_from="now/M",
            decimals=0,
        ),
        stat(
            "Held $ month to date",
            "The held part of the idle cost since the start of this month: processes kept "
            "memory on GPUs that computed nothing (gpuwatch_gpu_held_cost_usd_total).",
            "currencyUSD",
            Target(
                f"sum(increase(gpuwatch_gpu_held_cost_usd_total{{{GPU}}}[$__range]))",
                instant=True,
            ),
            time_from="now/M",
            decimals=0,
        ),
        stat(
            "Savings $/h from right-sizing",
            "Dollars per hour saved if every overprovisioned GPU moved to the cheapest catalog "
            "GPU that meets its memory and bandwidth need "
            "(gpuwatch_gpu_potential_savings_usd_per_hour).",
            "currencyUSD",
            Target(f"sum(gpuwatch_gpu_potential_savings_usd_per_hour{{{GPU}}})", instant=True),
            decimals=2,
        ),
        stat(
            "Realized $ / 1M generated tokens",
            "All the cost of the token sources' GPUs in the dashboard range, idle included, "
            "divided by the generation tokens they served, per million "
            "(gpuwatch_token_source_cost_usd_total / gpuwatch_tokens_total).",
            "currencyUSD",
            Target(
                f"sum(increase(gpuwatch_token_source_cost_usd_total{{{HOST}}}[$__range]))\n/\n"
                f'sum(increase(gpuwatch_tokens_total{{{HOST}, kind="generation"}}[$__range]))'
                " * 1e6",
                instant=True,
            ),
            decimals=2,
        ),
        Panel(
            "state-timeline",
            "GPU state",
            "Each GPU's waste-analysis state over time (gpuwatch_gpu_state): busy, "
            "underutilized (mean activity under the target), idle (nothing running, no "
            "activity for the whole window), held (processes keep memory, no activity), pending "
            "(the window holds no evidence yet). A gap: the agent was not scraped or the GPU "
            "was lost.",
            "none",
            (Target(state_code_expr(), legend="{{instance}} GPU {{gpu}}"),),
            width=24,
            height=8,
            options={"showValue": "never", "mergeValues": True, "alignValue": "left"},
            mappings=STATE_MAPPINGS,
        ),
        ts(
            "Cost per hour by state",
            "What the selected GPUs cost per hour, stacked by their current state: the rate of "
            "gpuwatch_gpu_cost_usd_total per GPU, attributed to the state the GPU is in "
            "(gpuwatch_gpu_state). The idle, held and underutilized bands are the waste.",
            "currencyUSD",
            Target(
                f"sum by (state) (\n  rate(gpuwatch_gpu_cost_usd_total{{{GPU}}}[$__rate_interval])"
                f" * 3600\n  * {ON_GPU} group_left(state)\n"
                f"  (gpuwatch_gpu_state{{{GPU}}} == 1)\n)",
                legend="{{state}}",
            ),
            stack=True,
        ),
        ts(
            "Allocated vs total GPUs",
            "Total GPUs (gpuwatch_gpu_info); GPUs a pod of the selected namespaces holds "
            "(distinct GPUs in gpuwatch_gpu_pod_info, so a shared or MIG GPU counts once); "
            "those whose every holder runs nothing on them (gpuwatch_gpu_pod_allocated_idle); "
            "and GPUs the analysis calls busy or underutilized. Total and busy ignore the "
            "namespace variable; the allocated lines follow it (0 without pod attribution).",
            "none",
            Target(f"count(gpuwatch_gpu_info{{{GPU}}})", legend="total"),
            Target(f"count({held_gpus}) or vector(0)", legend="allocated to pods"),
            Target(f"count({unused_gpus}) or vector(0)", legend="allocated, running nothing"),
            Target(
                f'sum(gpuwatch_gpu_state{{{GPU}, state=~"busy|underutilized"}})',
                legend="busy or underutilized",
            ),
        ),
        table(
            "Most wasteful GPUs",
            "GPUs that are idle, held or underutilized now, overprovisioned, or cost idle $ in "
            "the dashboard range: how long they have been in their state (idle and held count "
            "from the start of the confirmed inactivity), what that time cost at the GPU's "
            "price, the idle $ over the dashboard range, the cheaper GPU the sizing model "
            "recommends and its $/h saving, and the namespace and pod holding the GPU "
            "(gpuwatch_gpu_pod_info, with pod attribution on; a GPU shared by several pods "
            "shows a row per pod). Ignores the namespace variable.",
            "currencyUSD",
            instant(f"{by_gpu}, state) (gpuwatch_gpu_state{{{GPU}, {waste_states}}} == 1)"),
            instant(f"{by_gpu}) (gpuwatch_gpu_state_seconds{{{GPU}}} * {in_waste_state})"),
            instant(
                f"max by (instance, gpu) (\n  gpuwatch_gpu_state_seconds{{{GPU}}} / 3600\n"
                f"  * {ON_GPU} group_left() {price}\n  * {in_waste_state}\n)"
            ),
            instant(
                "sum by (instance, gpu) "
                f"(increase(gpuwatch_gpu_idle_cost_usd_total{{{GPU}}}[$__range])) > 0"
            ),
            instant(
                f"max by (instance, gpu, recommended) (gpuwatch_gpu_recommendation_info{{{GPU}}})"
            ),
            instant(f"{by_gpu}) (gpuwatch_gpu_potential_savings_usd_per_hour{{{GPU}}})"),
            instant(
                f"{by_gpu}, namespace, pod) (\n  gpuwatch_gpu_pod_info{{{GPU}}}\n  * {wasteful}\n)"
            ),
            columns={
                "instance": "host",
                "gpu": "GPU",
                "state": "state",
                "Value #B": "since (duration)",
                "Value #C": "$ so far",
                "Value #D": "idle $ in range",
                "recommended": "recommendation",
                "Value #F": "saving $/h",
                "namespace": "namespace",
                "pod": "pod",
            },
            overrides=(column_unit("since (duration)", "s"),),
            sort_by="Value #C",
        ),
        *namespace_panels(),
    ]


POD_COST = "gpuwatch_pod_cost_usd_total"
POD_IDLE_COST = "gpuwatch_pod_idle_cost_usd_total"


def namespace_panels() -> list[Panel]:
    """By namespace: the pod counters and holders, filtered by the namespace variable."""
    per_holder = "max by (instance, gpu, namespace, pod, container"
    holders = f"gpuwatch_gpu_pod_info{{{POD_GPU}}}"
    return [
        cost_per_hour(
            "Cost per hour by namespace",
            "USD per hour charged to the pods of each selected namespace "
            "(rate of gpuwatch_pod_cost_usd_total times 3600): their processes' share of their "
            "GPUs' active time plus the idle part of the GPUs they hold.",
            label="namespace",
            counter=POD_COST,
            selector=NS,
        ),
        cost_per_hour(
            "Idle cost per hour by namespace",
            "The idle part of each selected namespace's cost per hour "
            "(rate of gpuwatch_pod_idle_cost_usd_total times 3600): GPU time its pods hold and "
            "do not use.",
            label="namespace",
            counter=POD_IDLE_COST,
            selector=NS,
        ),
        stat(
            "Unattributed $ in range",
            "GPU cost charged to no pod over the dashboard range "
            "(gpuwatch_gpu_unattributed_cost_usd_total): idle GPUs no pod holds and processes "
            "outside pods. A GPU panel: it ignores the namespace variable.",
            "currencyUSD",
            Target(
                f"sum(increase(gpuwatch_gpu_unattributed_cost_usd_total{{{GPU}}}[$__range]))",
                instant=True,
            ),
            decimals=2,
        ),
        cost_table(
            "Cost by namespace",
            "Per selected namespace over the dashboard range: cost, idle cost and its share "
            "(gpuwatch_pod_cost_usd_total, gpuwatch_pod_idle_cost_usd_total), and how many "
            "GPUs its pods hold now (gpuwatch_gpu_pod_info).",
            by={"namespace": "namespace"},
            selector=NS,
            cost=POD_COST,
            idle=POD_IDLE_COST,
            held=f"gpuwatch_gpu_pod_info{{{NS}}}",
            sort_by="Value #A",
            width=8,
        ),
        cost_table(
            "Cost by pod",
            "Per pod of the selected namespaces over the dashboard range: cost and idle cost "
            "(gpuwatch_pod_cost_usd_total, gpuwatch_pod_idle_cost_usd_total). A pod that left "
            "the node keeps its cost up to when it left.",
            by={"instance": "host", "namespace": "namespace", "pod": "pod"},
            selector=NS,
            cost=POD_COST,
            idle=POD_IDLE_COST,
            share=False,
            sort_by="Value #B",
            width=12,
        ),
        table(
            "Pods and their GPUs",
            "Which container of the selected namespaces holds which GPU now "
            "(gpuwatch_gpu_pod_info), through which resource and, on a DRA node, which "
            "ResourceClaim (claim: empty for a device plugin's hold), the GPU's state and $/h, and "
            "whether the container runs nothing on it (allocated-idle: "
            'gpuwatch_gpu_pod_allocated_idle), or "unknown" with the reason '
            "(gpuwatch_gpu_pod_allocated_idle_unknown: pid_unmapped when the agent cannot "
            "read the host's /proc). A shared GPU has a row per holder.",
            "currencyUSD",
            instant(f"{per_holder}, resource, claim) ({holders})"),
            instant(
                f"{per_holder}, state) (\n  {holders}\n"
                f"  * {ON_UUID} group_left(state) (gpuwatch_gpu_state{{{GPU}}} == 1)\n)"
            ),
            instant(allocated_idle_or_unknown(per_holder, POD_GPU)),
            instant(
                f"{per_holder}) (\n  {holders}\n  * {ON_UUID} group_left()\n"
                "  max by (job, instance, uuid) "
                f"(gpuwatch_gpu_price_usd_per_hour{{{GPU}}})\n)"
            ),
            columns={
                "instance": "host",
                "gpu": "GPU",
                "namespace": "namespace",
                "pod": "pod",
                "container": "container",
                "resource": "resource",
                "claim": "claim",
                "state": "GPU state",
                "Value #C": "runs nothing",
                "Value #D": "GPU $/h",
            },
            overrides=(column_mappings("runs nothing", YES_NO_UNKNOWN),),
            sort_by="Value #D",
        ),
    ]
