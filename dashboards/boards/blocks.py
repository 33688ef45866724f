"""Grafana building blocks: queries, panels (time series, stat, table), table columns and
value mappings. Every panel and target uses the `datasource` variable (`DS`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DS = {"type": "prometheus", "uid": "${datasource}"}

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


def value_fields(count: int) -> list[str]:
    """The value fields Grafana names for `count` merged queries: `Value`, else `Value #A`..."""
    return ["Value"] if count == 1 else [f"Value #{chr(65 + i)}" for i in range(count)]


def merge_and_organize(columns: dict[str, str], hidden: list[str]) -> tuple[Json, ...]:
    """Table transformations: merge the queries on their labels, then keep, order and rename
    the fields in `columns` (field -> header) and hide those in `hidden`."""
    return (
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
    )


def table(title: str, description: str, unit: str, *targets: Target, columns: dict[str, str],
          overrides: tuple[Json, ...] = (), sort_by: str | None = None,
          width: int = 24) -> Panel:  # fmt: skip
    """A table of instant queries merged on their labels; `columns` maps field -> header.

    Fields not in `columns` (Time, job, uuid, ...) are hidden; the label columns in `columns`
    are the labels the panel needs from every query's result.
    """
    values = value_fields(len(targets))
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
        transformations=merge_and_organize(columns, hidden),
    )


def instant(expr: str) -> Target:
    """An instant query formatted as a table (for table panels)."""
    return Target(expr, instant=True, table=True)


def column_unit(name: str, unit: str) -> Json:
    """A table override: the column `name` in `unit`."""
    return {
        "matcher": {"id": "byName", "options": name},
        "properties": [{"id": "unit", "value": unit}],
    }


def column_mappings(name: str, mappings: tuple[Json, ...]) -> Json:
    """A table override: the column `name` shows codes (unit none) through `mappings`."""
    return {
        "matcher": {"id": "byName", "options": name},
        "properties": [
            {"id": "unit", "value": "none"},
            {"id": "mappings", "value": list(mappings)},
        ],
    }


UP_DOWN = (
    {
        "type": "value",
        "options": {
            "0": {"text": "down", "color": "red", "index": 0},
            "1": {"text": "up", "color": "green", "index": 1},
        },
    },
)
YES_NO_OPTIONS: Json = {
    "0": {"text": "no", "color": "green", "index": 0},
    "1": {"text": "yes", "color": "orange", "index": 1},
}
YES_NO = ({"type": "value", "options": YES_NO_OPTIONS},)
