"""Builds the Grafana dashboards in this folder: `python dashboards/build.py` rewrites the JSON.

The committed JSON files are what users import (Grafana UI, provisioning, the Helm chart);
this builder only keeps their panels uniform: every panel and target uses the `datasource`
variable, every panel has a unit and a description, ids are unique and the layout is a
simple grid. Queries use the agent's raw metrics (README "Metrics"), not recording rules.
`tests/dashboards/` checks that the JSON equals this builder's output.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCHEMA_VERSION = 39  # Grafana 10.x; Grafana 11 migrates it on load
DS = {"type": "prometheus", "uid": "${datasource}"}

# Selector fragments. `host` is the scrape target (`instance`): the agent puts no host label on
# its series. The chart's ServiceMonitor/PodMonitor set `instance` to the node's name (and add
# `node`, the same name), so on Kubernetes the host is the node and stays one host across the
# agent pod's rollouts; a static scrape keeps its host:port. GPU series carry no pod labels
# (pods join through gpuwatch_gpu_pod_info on uuid), so `namespace` filters only the pod
# panels (NS, POD_GPU); per-GPU panels ignore it.
HOST = 'job=~"$job", instance=~"$host"'
GPU = HOST + ', gpu=~"$gpu"'
NS = HOST + ', namespace=~"$namespace"'
POD_GPU = GPU + ', namespace=~"$namespace"'
ON_GPU = "on(job, instance, gpu)"
ON_UUID = "on(job, instance, uuid)"

Json = dict[str, Any]


@dataclass(frozen=True)
class Target:
    """One PromQL query of a panel; `legend` may name labels as `{{label}}`."""

    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False


@dataclass(frozen=True)
class Panel:
    """A panel: type, title, description, unit (Grafana unit id) and queries."""

    kind: str
    title: str
    description: str
    unit: str
    targets: tuple[Target, ...]
    width: int = 8
    height: int = 8
    options: Json = field(default_factory=dict)
    custom: Json = field(default_factory=dict)
    mappings: tuple[Json, ...] = ()
    overrides: tuple[Json, ...] = ()
    transformations: tuple[Json, ...] = ()
    time_from: str | None = None
    time_shift: str | None = None
    decimals: int | None = None


def ts(title: str, description: str, unit: str, *targets: Target, stack: bool = False,
       width: int = 12) -> Panel:  # fmt: skip
    """A time series panel (stacked when `stack`)."""
    custom: Json = {"fillOpacity": 60 if stack else 10, "lineWidth": 1}
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    return Panel("timeseries", title, description, unit, targets, width=width, custom=custom)


def stat(title: str, description: str, unit: str, target: Target, *,
         time_from: str | None = None, time_shift: str | None = None,
         decimals: int | None = None, width: int = 4) -> Panel:  # fmt: skip
    """A single-value panel of an instant query."""
    return Panel(
        "stat",
        title,
        description,
        unit,
        (target,),
        width=width,
        height=4,
        options={
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "none",
            "textMode": "value",
        },
        time_from=time_from,
        time_shift=time_shift,
        decimals=decimals,
    )


def table(title: str, description: str, unit: str, *targets: Target, columns: dict[str, str],
          overrides: tuple[Json, ...] = (), sort_by: str | None = None,
          width: int = 24) -> Panel:  # fmt: skip
    """A table of instant queries merged on their labels; `columns` maps field -> header.

    Fields not in `columns` (Time, job, uuid, ...) are hidden; the label columns in `columns`
    are the labels the panel needs from every query's result.
    """
    values = (
        ["Value"] if len(targets) == 1 else [f"Value #{chr(65 + i)}" for i in range(len(targets))]
    )
    hidden = ["Time", "job", "uuid", *(v for v in values if v not in columns)]
    options: Json = {"showHeader": True, "cellHeight": "sm"}
    if sort_by is not None:
        options["sortBy"] = [{"displayName": columns[sort_by], "desc": True}]
    return Panel(
        "table",
        title,
        description,
        unit,
        targets,
        width=width,
        height=9,
        options=options,
        overrides=overrides,
        transformations=(
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": dict.fromkeys(hidden, True),
                    "includeByName": dict.fromkeys(columns, True),
                    "indexByName": {name: i for i, name in enumerate(columns)},
                    "renameByName": columns,
                },
            },
        ),
    )


def column_unit(name: str, unit: str) -> Json:
    """A table override: the column `name` in `unit`."""
    return {
        "matcher": {"id": "byName", "options": name},
        "properties": [{"id": "unit", "value": unit}],
    }


def instant(expr: str) -> Target:
    """An instant query formatted as a table (for table panels)."""
    return Target(expr, instant=True, table=True)


UP_DOWN = (
    {
        "type": "value",
        "options": {
            "0": {"text": "down", "color": "red", "index": 0},
            "1": {"text": "up", "color": "green", "index": 1},
        },
    },
)
_YES_NO_OPTIONS: Json = {
    "0": {"text": "no", "color": "green", "index": 0},
    "1": {"text": "yes", "color": "orange", "index": 1},
}
YES_NO = ({"type": "value", "options": _YES_NO_OPTIONS},)
IDLE_UNKNOWN_REASONS = ("pid_unmapped", "no_process_list")
"""Why a hold's allocated-idle is unknown (gpuwatch_gpu_pod_allocated_idle_unknown{reason}),
as `gpuwatch.core.snapshot.IDLE_UNKNOWN_REASONS` says (tests/dashboards check they agree)."""
IDLE_UNKNOWN_CODE = 2
"""The "runs nothing" cell's value for the first unknown reason; the next ones follow."""
YES_NO_UNKNOWN = (
    {
        "type": "value",
        "options": {
            **_YES_NO_OPTIONS,
            **{
                str(IDLE_UNKNOWN_CODE + i): {
                    "text": f"unknown ({reason})",
                    "color": "blue",
                    "index": 2 + i,
                }
                for i, reason in enumerate(IDLE_UNKNOWN_REASONS)
            },
        },
    },
)


def allocated_idle_or_unknown(by: str, selector: str) -> str:
    """Per holder (`by`: a `max by (...` prefix), gpuwatch_gpu_pod_allocated_idle (0 or 1),
    else, where it is absent because unknown, `IDLE_UNKNOWN_CODE` + the reason's index."""
    unknown = "\n  or ".join(
        f'gpuwatch_gpu_pod_allocated_idle_unknown{{{selector}, reason="{reason}"}}'
        f" * {IDLE_UNKNOWN_CODE + i}"
        for i, reason in enumerate(IDLE_UNKNOWN_REASONS)
    )
    return f"{by}) (gpuwatch_gpu_pod_allocated_idle{{{selector}}})\nor\n{by}) (\n  {unknown}\n)"


STATES = ("pending", "busy", "underutilized", "idle", "held")
STATE_COLORS = {
    "pending": "text",
    "busy": "green",
    "underutilized": "yellow",
    "idle": "orange",
    "held": "red",
}


def state_code_expr() -> str:
    """One series per GPU whose value is its state's code (1 pending ... 5 held)."""
    parts = [f'gpuwatch_gpu_state{{{GPU}, state="{s}"}} * {i}' for i, s in enumerate(STATES, 1)]
    return "max by (instance, gpu) (\n  " + "\nor\n  ".join(parts) + "\n)"


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
            mappings=(
                {
                    "type": "value",
                    "options": {
                        str(i): {"text": s, "color": STATE_COLORS[s], "index": i - 1}
                        for i, s in enumerate(STATES, 1)
                    },
                },
            ),
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


def namespace_panels() -> list[Panel]:
    """By namespace: the pod counters and holders, filtered by the namespace variable."""
    per_holder = "max by (instance, gpu, namespace, pod, container"
    holders = f"gpuwatch_gpu_pod_info{{{POD_GPU}}}"
    return [
        ts(
            "Cost per hour by namespace",
            "USD per hour charged to the pods of each selected namespace "
            "(rate of gpuwatch_pod_cost_usd_total times 3600): their processes' share of their "
            "GPUs' active time plus the idle part of the GPUs they hold.",
            "currencyUSD",
            Target(
                "sum by (namespace) "
                f"(rate(gpuwatch_pod_cost_usd_total{{{NS}}}[$__rate_interval])) * 3600",
                legend="{{namespace}}",
            ),
            stack=True,
        ),
        ts(
            "Idle cost per hour by namespace",
            "The idle part of each selected namespace's cost per hour "
            "(rate of gpuwatch_pod_idle_cost_usd_total times 3600): GPU time its pods hold and "
            "do not use.",
            "currencyUSD",
            Target(
                "sum by (namespace) "
                f"(rate(gpuwatch_pod_idle_cost_usd_total{{{NS}}}[$__rate_interval])) * 3600",
                legend="{{namespace}}",
            ),
            stack=True,
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
        table(
            "Cost by namespace",
            "Per selected namespace over the dashboard range: cost, idle cost and its share "
            "(gpuwatch_pod_cost_usd_total, gpuwatch_pod_idle_cost_usd_total), and how many "
            "GPUs its pods hold now (gpuwatch_gpu_pod_info).",
            "currencyUSD",
            instant(
                f"sum by (namespace) (increase(gpuwatch_pod_cost_usd_total{{{NS}}}[$__range]))"
            ),
            instant(
                f"sum by (namespace) (increase(gpuwatch_pod_idle_cost_usd_total{{{NS}}}[$__range]))"
            ),
            instant(
                "sum by (namespace) "
                f"(increase(gpuwatch_pod_idle_cost_usd_total{{{NS}}}[$__range]))\n/ "
                "sum by (namespace) "
                f"(increase(gpuwatch_pod_cost_usd_total{{{NS}}}[$__range]))"
            ),
            instant(
                "count by (namespace) "
                f"(count by (job, instance, uuid, namespace) (gpuwatch_gpu_pod_info{{{NS}}}))"
            ),
            columns={
                "namespace": "namespace",
                "Value #A": "cost $",
                "Value #B": "idle $",
                "Value #C": "idle share",
                "Value #D": "GPUs held",
            },
            overrides=(column_unit("idle share", "percentunit"), column_unit("GPUs held", "none")),
            sort_by="Value #A",
            width=8,
        ),
        table(
            "Cost by pod",
            "Per pod of the selected namespaces over the dashboard range: cost and idle cost "
            "(gpuwatch_pod_cost_usd_total, gpuwatch_pod_idle_cost_usd_total). A pod that left "
            "the node keeps its cost up to when it left.",
            "currencyUSD",
            instant(
                "sum by (instance, namespace, pod) "
                f"(increase(gpuwatch_pod_cost_usd_total{{{NS}}}[$__range]))"
            ),
            instant(
                "sum by (instance, namespace, pod) "
                f"(increase(gpuwatch_pod_idle_cost_usd_total{{{NS}}}[$__range]))"
            ),
            columns={
                "instance": "host",
                "namespace": "namespace",
                "pod": "pod",
                "Value #A": "cost $",
                "Value #B": "idle $",
            },
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
            overrides=(
                {
                    "matcher": {"id": "byName", "options": "runs nothing"},
                    "properties": [
                        {"id": "unit", "value": "none"},
                        {"id": "mappings", "value": list(YES_NO_UNKNOWN)},
                    ],
                },
            ),
            sort_by="Value #D",
        ),
    ]


def cost_panels() -> list[Panel]:
    """Cost and tokens: what a token costs, rent vs buy, prices and the month's spend."""
    return [
        stat(
            "Spend month to date",
            "What the selected GPUs cost since the start of this month "
            "(increase of gpuwatch_gpu_cost_usd_total over the panel's month-to-date range).",
            "currencyUSD",
            Target(f"sum(increase(gpuwatch_gpu_cost_usd_total{{{GPU}}}[$__range]))", instant=True),
            time_from="now/M",
            decimals=0,
            width=8,
        ),
        stat(
            "Spend previous month",
            "What the same GPUs cost in the whole previous calendar month, whatever the "
            "dashboard's range (relative time now/M, this month so far, shifted by 1M/M to the "
            "whole month before), to compare with the month to date.",
            "currencyUSD",
            Target(f"sum(increase(gpuwatch_gpu_cost_usd_total{{{GPU}}}[$__range]))", instant=True),
            time_from="now/M",
            time_shift="1M/M",
            decimals=0,
            width=8,
        ),
        Panel(
            "bargauge",
            "Rent vs buy: monthly delta per host",
            "Per host, the monthly rent at each GPU's own 30-day busy fraction minus the monthly "
            "cost of owning it with its host share (gpuwatch_rent_vs_buy_host_monthly_delta_usd): "
            "positive means buying would be cheaper.",
            "currencyUSD",
            (
                Target(
                    f"gpuwatch_rent_vs_buy_host_monthly_delta_usd{{{HOST}}}",
                    legend="{{instance}}",
                    instant=True,
                ),
            ),
            width=8,
            height=4,
            options={
                "orientation": "horizontal",
                "displayMode": "basic",
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            },
        ),
        ts(
            "$ per 1M tokens by kind and source",
            "Realized cost per million tokens over the agent's rolling hour: all the cost of the "
            "token source's GPUs, idle included, divided by the tokens of the kind served "
            "(gpuwatch_cost_per_million_tokens_usd; kind prompt, generation or all).",
            "currencyUSD",
            Target(
                f'gpuwatch_cost_per_million_tokens_usd{{{HOST}, window="1h"}}',
                legend="{{instance}} {{source}} {{kind}}",
            ),
        ),
        table(
            "Rent vs buy per GPU",
            "Each GPU's 30-day busy fraction against its break-even utilization (above it, owning "
            "beats renting) and its monthly delta (rent at that busy fraction minus owning; "
            "positive means buying would be cheaper).",
            "percentunit",
            instant(f'max by (instance, gpu) (gpuwatch_gpu_busy_ratio{{{GPU}, window="30d"}})'),
            instant(
                f"max by (instance, gpu) "
                f"(gpuwatch_rent_vs_buy_breakeven_utilization_ratio{{{GPU}}})"
            ),
            instant(f"max by (instance, gpu) (gpuwatch_rent_vs_buy_monthly_delta_usd{{{GPU}}})"),
            columns={
                "instance": "host",
                "gpu": "GPU",
                "Value #A": "busy (30 d)",
                "Value #B": "break-even",
                "Value #C": "monthly delta $",
            },
            overrides=(column_unit("monthly delta $", "currencyUSD"),),
            width=12,
        ),
        table(
            "Price sources and billing health",
            "Per host, each price source's instance price per hour "
            "(gpuwatch_instance_price_usd_per_hour) and whether the source answered "
            "(gpuwatch_billing_up: 1 up, 0 failing; catalog prices have no up flag: they are the "
            "fallback).",
            "currencyUSD",
            instant(f"max by (instance, source) (gpuwatch_instance_price_usd_per_hour{{{HOST}}})"),
            instant(f"max by (instance, source) (gpuwatch_billing_up{{{HOST}}})"),
            columns={
                "instance": "host",
                "source": "source",
                "Value #A": "instance $/h",
                "Value #B": "up",
            },
            overrides=(
                {
                    "matcher": {"id": "byName", "options": "up"},
                    "properties": [
                        {"id": "unit", "value": "none"},
                        {"id": "mappings", "value": list(UP_DOWN)},
                    ],
                },
            ),
            width=12,
        ),
        table(
            "Price in use per GPU",
            "Which source priced each GPU and at what $/h (gpuwatch_gpu_price_usd_per_hour): "
            "'catalog' means billing fell back to reference prices.",
            "currencyUSD",
            instant(f"max by (instance, gpu, source) (gpuwatch_gpu_price_usd_per_hour{{{GPU}}})"),
            columns={
                "instance": "host",
                "gpu": "GPU",
                "source": "source",
                "Value": "$/h",
            },
            width=12,
        ),
    ]


def gpu_panels() -> list[Panel]:
    """GPU detail: what each selected GPU is doing."""
    legend = "{{instance}} GPU {{gpu}}"
    return [
        ts(
            "Memory used",
            "Frame-buffer memory in use (gpuwatch_gpu_memory_used_bytes) and each GPU's total.",
            "bytes",
            Target(f"gpuwatch_gpu_memory_used_bytes{{{GPU}}}", legend=legend + " used"),
            Target(f"gpuwatch_gpu_memory_total_bytes{{{GPU}}}", legend=legend + " total"),
        ),
        ts(
            "SM activity",
            "Fraction of SMs busy (GPM, Hopper and newer: gpuwatch_gpu_sm_active_ratio) and the "
            "kernel-busy time older GPUs report (gpuwatch_gpu_utilization_ratio, which one "
            "spinning thread drives to 100 %).",
            "percentunit",
            Target(f"gpuwatch_gpu_sm_active_ratio{{{GPU}}}", legend=legend + " SM active"),
            Target(f"gpuwatch_gpu_utilization_ratio{{{GPU}}}", legend=legend + " kernel busy"),
        ),
        ts(
            "DRAM bandwidth",
            "DRAM bandwidth used over the GPU's peak (GPM: gpuwatch_gpu_dram_bandwidth_ratio).",
            "percentunit",
            Target(f"gpuwatch_gpu_dram_bandwidth_ratio{{{GPU}}}", legend=legend),
        ),
        ts(
            "Tensor activity",
            "Fraction of time any tensor pipe was active (GPM: gpuwatch_gpu_tensor_active_ratio).",
            "percentunit",
            Target(f"gpuwatch_gpu_tensor_active_ratio{{{GPU}}}", legend=legend),
        ),
        ts(
            "Power",
            "Power draw (gpuwatch_gpu_power_watts) against the enforced limit.",
            "watt",
            Target(f"gpuwatch_gpu_power_watts{{{GPU}}}", legend=legend),
            Target(f"gpuwatch_gpu_power_limit_watts{{{GPU}}}", legend=legend + " limit"),
        ),
        ts(
            "Temperature",
            "GPU core temperature (gpuwatch_gpu_temperature_celsius).",
            "celsius",
            Target(f"gpuwatch_gpu_temperature_celsius{{{GPU}}}", legend=legend),
        ),
        ts(
            "Clocks",
            "SM and memory clocks (gpuwatch_gpu_clock_hertz).",
            "hertz",
            Target(f"gpuwatch_gpu_clock_hertz{{{GPU}}}", legend=legend + " {{clock}}"),
        ),
        Panel(
            "state-timeline",
            "Throttle reasons",
            "The clocks-event (throttle) reasons in effect (gpuwatch_gpu_throttle_reason_active "
            "== 1): gpu_idle is harmless, the power and thermal reasons cost speed.",
            "none",
            (
                Target(
                    f"gpuwatch_gpu_throttle_reason_active{{{GPU}}} == 1",
                    legend=legend + " {{reason}}",
                ),
            ),
            width=12,
            options={"showValue": "never", "mergeValues": True},
            mappings=({"type": "value", "options": {"1": {"text": "active", "color": "orange"}}},),
        ),
        ts(
            "XID errors",
            "XID critical errors per interval by code (increase of gpuwatch_gpu_xid_errors_total): "
            "48 is an uncorrectable ECC error, 79 a GPU that fell off the bus.",
            "short",
            Target(
                f"sum by (instance, gpu, xid) "
                f"(increase(gpuwatch_gpu_xid_errors_total{{{GPU}}}[$__rate_interval]))",
                legend=legend + " XID {{xid}}",
            ),
        ),
        table(
            "Processes",
            "Processes on the selected GPUs: memory used and the newest per-process SM share "
            "(only with agent.per_process_metrics on; namespace and pod from the process's "
            "cgroup with pod attribution on). Ignores the namespace variable.",
            "bytes",
            instant(
                f"max by (instance, gpu, pid, process_name, namespace, pod) "
                f"(gpuwatch_process_memory_used_bytes{{{GPU}}})"
            ),
            instant(
                f"max by (instance, gpu, pid, process_name, namespace, pod) "
                f"(gpuwatch_process_sm_utilization_ratio{{{GPU}}})"
            ),
            columns={
                "instance": "host",
                "gpu": "GPU",
                "pid": "pid",
                "process_name": "process",
                "namespace": "namespace",
                "pod": "pod",
                "Value #A": "memory",
                "Value #B": "SM share",
            },
            overrides=(column_unit("SM share", "percentunit"),),
        ),
        table(
            "MIG instances",
            "MIG instances of the selected GPUs: memory used and total, and SM activity per GPU "
            "instance (GPM, Hopper and newer).",
            "bytes",
            instant(
                "max by (instance, gpu, gpu_instance_id, compute_instance_id) "
                f"(gpuwatch_mig_memory_used_bytes{{{GPU}}})"
            ),
            instant(
                "max by (instance, gpu, gpu_instance_id, compute_instance_id) "
                f"(gpuwatch_mig_memory_total_bytes{{{GPU}}})"
            ),
            instant(
                "max by (instance, gpu, gpu_instance_id, compute_instance_id) "
                f"(gpuwatch_mig_sm_active_ratio{{{GPU}}})"
            ),
            columns={
                "instance": "host",
                "gpu": "GPU",
                "gpu_instance_id": "GPU instance",
                "compute_instance_id": "compute instance",
                "Value #A": "memory used",
                "Value #B": "memory total",
                "Value #C": "SM active",
            },
            overrides=(column_unit("SM active", "percentunit"),),
        ),
    ]


def variable(
    name: str, label: str, query: str, *, include_all: bool = True, description: str = ""
) -> Json:
    """A query variable over the datasource (multi-select, All = `.*`)."""
    var: Json = {
        "name": name,
        "label": label,
        **({"description": description} if description else {}),
        "type": "query",
        "datasource": DS,
        "query": query,
        "definition": query,
        "refresh": 2,
        "sort": 3,
        "multi": True,
        "includeAll": include_all,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "hide": 0,
    }
    if include_all:
        var["allValue"] = ".*"
    return var


def variables() -> list[Json]:
    """datasource, job, host (the scrape target), gpu and namespace."""
    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
            "refresh": 1,
            "regex": "",
            "options": [],
        },
        variable("job", "Job", "label_values(gpuwatch_build_info, job)"),
        variable(
            "host",
            "Host",
            'label_values(gpuwatch_build_info{job=~"$job"}, instance)',
            description="The agents' scrape targets (instance). The Helm chart's monitors set "
            "instance to the Kubernetes node's name (and add node): one host per node, "
            "across agent pod rollouts.",
        ),
        variable("gpu", "GPU", f"label_values(gpuwatch_gpu_info{{{HOST}}}, gpu)"),
        variable(
            "namespace",
            "Namespace",
            f"label_values(gpuwatch_gpu_pod_info{{{HOST}}}, namespace)",
        ),
    ]


SLURM = GPU + ', account=~"$account", user=~"$user"'
"""Slurm job series (gpuwatch_gpu_job_info) filtered by the gpu, account and user variables;
the account and user counters carry no gpu label (ACCOUNT, USER ignore it)."""
ACCOUNT = HOST + ', account=~"$account"'
USER = HOST + ', user=~"$user"'


def slurm_panels() -> list[Panel]:
    """Slurm: cost per account and user, the jobs on GPUs now, and reclaim (docs/slurm.md)."""
    jobs = f"gpuwatch_gpu_job_info{{{SLURM}}}"
    per_job = "max by (instance, gpu, job_id, user, account, partition)"
    price = f"max by (job, instance, uuid) (gpuwatch_gpu_price_usd_per_hour{{{HOST}}})"
    idle_jobs = (
        f"(gpuwatch_gpu_job_allocated_idle{{{GPU}}} == 1)\n"
        f"* on(job, instance, uuid, job_id) group_left(user, account)\n"
        f"  max by (job, instance, uuid, job_id, user, account) ({jobs})"
    )
    return [
        stat(
            "GPUs held by jobs",
            "GPUs that Slurm jobs of the selected accounts and users hold now (distinct "
            "uuid per agent in gpuwatch_gpu_job_info).",
            "none",
            Target(f"count(count by (job, instance, uuid) ({jobs}))", instant=True),
        ),
        stat(
            "Held, running nothing",
            "GPUs held by a job that runs nothing on them over the analysis window "
            "(gpuwatch_gpu_job_allocated_idle == 1).",
            "none",
            Target(
                f"count(count by (job, instance, uuid) ({idle_jobs})) or vector(0)", instant=True
            ),
        ),
        stat(
            "$/h held idle now",
            "What the GPUs held by allocated-idle jobs cost per hour now "
            "(gpuwatch_gpu_price_usd_per_hour of each such GPU).",
            "currencyUSD",
            Target(
                f"sum(count by (job, instance, uuid) ({idle_jobs})\n"
                f"* {ON_UUID} group_left() {price}) or vector(0)",
                instant=True,
            ),
            decimals=2,
        ),
        stat(
            "$ reclaimed in range",
            "USD reclaimed by cancelling allocated-idle jobs over the dashboard range "
            "(gpuwatch_slurm_reclaimed_usd_total: their GPUs' $/h times the hours left of "
            "their time limit, at most 24 h; enforce mode only).",
            "currencyUSD",
            Target(
                f"sum(increase(gpuwatch_slurm_reclaimed_usd_total{{{SLURM}}}[$__range])) "
                "or vector(0)",
                instant=True,
            ),
            decimals=2,
        ),
        stat(
            "Idle $ in range",
            "The idle part of the selected accounts' cost over the dashboard range "
            "(gpuwatch_slurm_account_idle_cost_usd_total).",
            "currencyUSD",
            Target(
                f"sum(increase(gpuwatch_slurm_account_idle_cost_usd_total{{{ACCOUNT}}}[$__range]))",
                instant=True,
            ),
            decimals=2,
        ),
        stat(
            "Cost $ in range",
            "What the selected accounts' jobs cost over the dashboard range "
            "(gpuwatch_slurm_account_cost_usd_total).",
            "currencyUSD",
            Target(
                f"sum(increase(gpuwatch_slurm_account_cost_usd_total{{{ACCOUNT}}}[$__range]))",
                instant=True,
            ),
            decimals=2,
        ),
        ts(
            "Cost per hour by account",
            "USD per hour charged to each selected account's jobs (rate of "
            "gpuwatch_slurm_account_cost_usd_total times 3600): their processes' share of "
            "their GPUs' active time plus the idle part of the GPUs they hold.",
            "currencyUSD",
            Target(
                "sum by (account) (rate(gpuwatch_slurm_account_cost_usd_total"
                f"{{{ACCOUNT}}}[$__rate_interval])) * 3600",
                legend="{{account}}",
            ),
            stack=True,
        ),
        ts(
            "Idle cost per hour by account",
            "The idle part of each selected account's cost per hour (rate of "
            "gpuwatch_slurm_account_idle_cost_usd_total times 3600).",
            "currencyUSD",
            Target(
                "sum by (account) (rate(gpuwatch_slurm_account_idle_cost_usd_total"
                f"{{{ACCOUNT}}}[$__rate_interval])) * 3600",
                legend="{{account}}",
            ),
            stack=True,
        ),
        table(
            "Cost by account",
            "Per selected account over the dashboard range: cost, idle cost and its share "
            "(gpuwatch_slurm_account_cost_usd_total, …_idle_cost_usd_total), and the GPUs "
            "its jobs hold now (gpuwatch_gpu_job_info).",
            "currencyUSD",
            instant(
                "sum by (account) (increase(gpuwatch_slurm_account_cost_usd_total"
                f"{{{ACCOUNT}}}[$__range]))"
            ),
            instant(
                "sum by (account) (increase(gpuwatch_slurm_account_idle_cost_usd_total"
                f"{{{ACCOUNT}}}[$__range]))"
            ),
            instant(
                "sum by (account) (increase(gpuwatch_slurm_account_idle_cost_usd_total"
                f"{{{ACCOUNT}}}[$__range]))\n/ sum by (account) "
                f"(increase(gpuwatch_slurm_account_cost_usd_total{{{ACCOUNT}}}[$__range]))"
            ),
            instant(f"count by (account) (count by (job, instance, uuid, account) ({jobs}))"),
            columns={
                "account": "account",
                "Value #A": "cost $",
                "Value #B": "idle $",
                "Value #C": "idle share",
                "Value #D": "GPUs held",
            },
            overrides=(column_unit("idle share", "percentunit"), column_unit("GPUs held", "none")),
            sort_by="Value #B",
            width=12,
        ),
        table(
            "Cost by user",
            "Per selected user over the dashboard range: cost, idle cost and its share "
            "(gpuwatch_slurm_user_cost_usd_total, …_idle_cost_usd_total).",
            "currencyUSD",
            instant(
                f"sum by (user) (increase(gpuwatch_slurm_user_cost_usd_total{{{USER}}}[$__range]))"
            ),
            instant(
                "sum by (user) (increase(gpuwatch_slurm_user_idle_cost_usd_total"
                f"{{{USER}}}[$__range]))"
            ),
            instant(
                "sum by (user) (increase(gpuwatch_slurm_user_idle_cost_usd_total"
                f"{{{USER}}}[$__range]))\n/ sum by (user) "
                f"(increase(gpuwatch_slurm_user_cost_usd_total{{{USER}}}[$__range]))"
            ),
            columns={
                "user": "user",
                "Value #A": "cost $",
                "Value #B": "idle $",
                "Value #C": "idle share",
            },
            overrides=(column_unit("idle share", "percentunit"),),
            sort_by="Value #B",
            width=12,
        ),
        table(
            "Jobs on GPUs",
            "Each job holding a GPU now (gpuwatch_gpu_job_info, the one per-job series), "
            "whether it runs nothing there over the window (gpuwatch_gpu_job_allocated_idle) "
            "and the GPU's $/h (gpuwatch_gpu_price_usd_per_hour).",
            "none",
            instant(
                f"{per_job} (gpuwatch_gpu_job_allocated_idle{{{GPU}}}\n"
                f"* on(job, instance, uuid, job_id) group_left(user, account, partition)\n"
                f"  max by (job, instance, uuid, job_id, user, account, partition) ({jobs}))"
            ),
            instant(f"{per_job} ({jobs}\n* {ON_UUID} group_left() {price})"),
            columns={
                "instance": "host",
                "gpu": "gpu",
                "job_id": "job",
                "user": "user",
                "account": "account",
                "partition": "partition",
                "Value #A": "runs nothing",
                "Value #B": "$/h",
            },
            overrides=(
                {
                    "matcher": {"id": "byName", "options": "runs nothing"},
                    "properties": [
                        {"id": "mappings", "value": list(YES_NO)},
                        {"id": "custom.cellOptions", "value": {"type": "color-text"}},
                    ],
                },
                column_unit("$/h", "currencyUSD"),
            ),
            sort_by="Value #A",
        ),
        ts(
            "Reclaim actions",
            "Reclaim's warnings and cancellations (gpuwatch_slurm_reclaim_actions_total) by "
            "action and mode; dry-run counts what enforce would do (docs/slurm.md).",
            "none",
            Target(
                "sum by (action, mode) (increase(gpuwatch_slurm_reclaim_actions_total"
                f"{{{HOST}}}[$__rate_interval]))",
                legend="{{action}} ({{mode}})",
            ),
            width=24,
        ),
    ]


def slurm_variables() -> list[Json]:
    """datasource, job, host and gpu, then the Slurm account and user (from the join
    series)."""
    common = [v for v in variables() if v["name"] != "namespace"]
    return [
        *common,
        variable("account", "Account", f"label_values(gpuwatch_gpu_job_info{{{HOST}}}, account)"),
        variable("user", "User", f"label_values(gpuwatch_gpu_job_info{{{HOST}}}, user)"),
    ]


def panel_json(panel: Panel, panel_id: int, x: int, y: int) -> Json:
    """Grafana JSON of one panel at grid position (x, y)."""
    defaults: Json = {"unit": panel.unit, "custom": dict(panel.custom)}
    if panel.mappings:
        defaults["mappings"] = list(panel.mappings)
    if panel.decimals is not None:
        defaults["decimals"] = panel.decimals
    targets = []
    for i, target in enumerate(panel.targets):
        t: Json = {
            "datasource": DS,
            "refId": chr(ord("A") + i),
            "expr": target.expr,
            "legendFormat": target.legend or "__auto",
            "range": not target.instant,
            "instant": target.instant,
        }
        if target.table:
            t["format"] = "table"
        targets.append(t)
    out: Json = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DS,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": list(panel.overrides)},
        "options": dict(panel.options),
        "targets": targets,
    }
    if panel.transformations:
        out["transformations"] = list(panel.transformations)
    if panel.time_from is not None:
        out["timeFrom"] = panel.time_from
    if panel.time_shift is not None:
        out["timeShift"] = panel.time_shift
    return out


def dashboard(
    uid: str,
    title: str,
    description: str,
    panels: list[Panel],
    templating: list[Json] | None = None,
) -> Json:
    """A whole dashboard: panels laid out left to right, rows wrapping at 24 columns;
    `templating`: its variables (default `variables()`)."""
    laid_out = []
    x = y = row_height = 0
    for panel_id, panel in enumerate(panels, 1):
        if x + panel.width > 24:
            x, y, row_height = 0, y + row_height, 0
        laid_out.append(panel_json(panel, panel_id, x, y))
        x += panel.width
        row_height = max(row_height, panel.height)
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["gpuwatch", "gpu"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "utc",
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "annotations": {"list": []},
        "links": [
            {
                "title": "gpuwatch dashboards",
                "type": "dashboards",
                "tags": ["gpuwatch"],
                "asDropdown": True,
                "includeVars": True,
                "keepTime": True,
            }
        ],
        "templating": {"list": variables() if templating is None else templating},
        "panels": laid_out,
    }


DASHBOARDS: dict[str, Json] = {
    "gpuwatch-fleet.json": dashboard(
        "gpuwatch-fleet",
        "gpuwatch / Fleet and waste",
        "How many GPUs, how busy, what idle and held time cost, and which GPUs waste money.",
        fleet_panels(),
    ),
    "gpuwatch-cost.json": dashboard(
        "gpuwatch-cost",
        "gpuwatch / Cost and tokens",
        "Realized $ per 1M tokens, rent vs buy, price sources and the month's spend.",
        cost_panels(),
    ),
    "gpuwatch-gpu.json": dashboard(
        "gpuwatch-gpu",
        "gpuwatch / GPU detail",
        "Memory, activity, bandwidth, power, temperature, clocks, processes, XIDs and MIG "
        "instances of the selected GPUs.",
        gpu_panels(),
    ),
    "gpuwatch-slurm.json": dashboard(
        "gpuwatch-slurm",
        "gpuwatch / Slurm accounts, users and jobs",
        "What each Slurm account and user cost and left idle, which jobs hold GPUs and run "
        "nothing on them, and what reclaim did (docs/slurm.md).",
        slurm_panels(),
        slurm_variables(),
    ),
}


def render(board: Json) -> str:
    """The committed form: 2-space JSON, keys in builder order, a final newline."""
    return json.dumps(board, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    """Write every dashboard next to this file; `--check` only reports files that differ."""
    check = "--check" in sys.argv[1:]
    stale = []
    for name, board in DASHBOARDS.items():
        path = HERE / name
        text = render(board)
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    for name in stale:
        print(f"{name} differs from dashboards/build.py: run python dashboards/build.py")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
