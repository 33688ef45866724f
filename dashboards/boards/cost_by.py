"""The cost panels the fleet (per namespace, per pod) and Slurm (per account, per user)
dashboards share: cost per hour by a label, and a table of cost, idle cost, idle share and
GPUs held over the dashboard range. Each payer has a cost counter and an idle-cost counter
(USD, monotonic) carrying the payer's labels."""

from __future__ import annotations

from boards.blocks import Panel, Target, column_unit, instant, table, ts, value_fields


def cost_per_hour(title: str, description: str, *, label: str, counter: str,
                  selector: str) -> Panel:  # fmt: skip
    """Stacked time series: USD per hour of `counter` (rate times 3600), one line per `label`."""
    return ts(
        title,
        description,
        "currencyUSD",
        Target(
            f"sum by ({label}) (rate({counter}{{{selector}}}[$__rate_interval])) * 3600",
            legend="{{" + label + "}}",
        ),
        stack=True,
    )


def cost_table(title: str, description: str, *, by: dict[str, str], selector: str,
               cost: str, idle: str, held_cost: str | None = None, share: bool = True,
               held: str | None = None, sort_by: str, width: int) -> Panel:  # fmt: skip
    """A table per `by` labels (label -> header) over the dashboard range: `cost $` and
    `idle $` (increase of the `cost` and `idle` counters), then, when `held_cost` (a
    counter), `held $` (its increase), then, when `share`, idle / cost
    (`idle share`), then, when `held` (a series with uuid and the `by` label), the distinct
    GPUs (`GPUs held`) it counts. `sort_by`: the value field to sort on, descending."""
    labels = ", ".join(by)

    def in_range(counter: str) -> str:
        return f"sum by ({labels}) (increase({counter}{{{selector}}}[$__range]))"

    queries = [in_range(cost), in_range(idle)]
    headers = ["cost $", "idle $"]
    if held_cost is not None:
        queries.append(in_range(held_cost))
        headers.append("held $")
    overrides = []
    if share:
        queries.append(f"{in_range(idle)}\n/ {in_range(cost)}")
        headers.append("idle share")
        overrides.append(column_unit("idle share", "percentunit"))
    if held is not None:
        queries.append(f"count by ({labels}) (count by (job, instance, uuid, {labels}) ({held}))")
        headers.append("GPUs held")
        overrides.append(column_unit("GPUs held", "none"))
    return table(
        title,
        description,
        "currencyUSD",
        *(instant(query) for query in queries),
        columns={**by, **dict(zip(value_fields(len(queries)), headers, strict=True))},
        overrides=tuple(overrides),
        sort_by=sort_by,
        width=width,
    )
