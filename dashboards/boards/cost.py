"""The Cost and tokens dashboard (gpuwatch-cost.json): realized $ per 1M tokens, rent vs buy,
price sources and the month's spend."""

from __future__ import annotations

from boards.blocks import (
    UP_DOWN,
    Panel,
    Target,
    column_mappings,
    column_unit,
    instant,
    stat,
    table,
    ts,
)
from boards.promql import GPU, HOST


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
            overrides=(column_mappings("up", UP_DOWN),),
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
