"""The committed dashboards: built by dashboards/build.py, lint-clean, parseable PromQL.

Also feeds the lint broken panels, one rule at a time, so a lint rule that stops firing
fails here.
"""

from __future__ import annotations

import calendar
import copy
import json
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, require_binary
from tests.dashboards.lint import (
    counters_from_readme,
    expand,
    legend_labels,
    lint,
    promql_errors,
    table_label_columns,
)

DASHBOARDS = REPO_ROOT / "dashboards"
FILES = (
    "gpuwatch-fleet.json",
    "gpuwatch-cost.json",
    "gpuwatch-gpu.json",
    "gpuwatch-slurm.json",
)
COUNTERS = counters_from_readme(REPO_ROOT / "README.md")
# What a variable expands to when only its syntax matters (parsing): a real-looking value.
SAMPLE_VALUES = {
    "job": "gpuwatch",
    "host": "127\\\\.0\\\\.0\\\\.1:9842",
    "gpu": "(0|1)",
    "namespace": "team-a",
    "account": "(physics|chem)",
    "user": "alice",
    "datasource": "prometheus",
}
# The panels issue 10 asks for, by dashboard, in order.
EXPECTED_TITLES = {
    "gpuwatch-fleet.json": [
        "GPUs",
        "Busy % (24 h)",
        "Idle $ month to date",
        "Held $ month to date",
        "Savings $/h from right-sizing",
        "Realized $ / 1M generated tokens",
        "GPU state",
        "Cost per hour by state",
        "Allocated vs total GPUs",
        "Most wasteful GPUs",
        "Cost per hour by namespace",
        "Idle cost per hour by namespace",
        "Unattributed $ in range",
        "Cost by namespace",
        "Cost by pod",
        "Pods and their GPUs",
    ],
    "gpuwatch-cost.json": [
        "Spend month to date",
        "Spend previous month",
        "Rent vs buy: monthly delta per host",
        "$ per 1M tokens by kind and source",
        "Rent vs buy per GPU",
        "Price sources and billing health",
        "Price in use per GPU",
    ],
    "gpuwatch-gpu.json": [
        "Memory used",
        "SM activity",
        "DRAM bandwidth",
        "Tensor activity",
        "Power",
        "Temperature",
        "Clocks",
        "Throttle reasons",
        "XID errors",
        "Processes",
        "MIG instances",
    ],
    # issue 26: accounts, users and jobs (docs/slurm.md)
    "gpuwatch-slurm.json": [
        "GPUs held by jobs",
        "Held, running nothing",
        "$/h held idle now",
        "$ reclaimed in range",
        "Idle $ in range",
        "Cost $ in range",
        "Cost per hour by account",
        "Idle cost per hour by account",
        "Cost by account",
        "Cost by user",
        "Jobs on GPUs",
        "Reclaim actions",
    ],
}

Json = dict[str, Any]


def load(name: str) -> Json:
    board: Json = json.loads((DASHBOARDS / name).read_text())
    return board


def test_committed_json_is_what_the_builder_writes() -> None:
    result = subprocess.run(
        [sys.executable, str(DASHBOARDS / "build.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_readme_table_gives_the_counters() -> None:
    assert "gpuwatch_gpu_cost_usd_total" in COUNTERS
    assert "gpuwatch_tokens_total" in COUNTERS
    assert "gpuwatch_gpu_memory_used_bytes" not in COUNTERS


@pytest.mark.parametrize("name", FILES)
def test_dashboard_is_lint_clean(name: str) -> None:
    assert lint(load(name), COUNTERS) == []


@pytest.mark.parametrize("name", FILES)
def test_dashboard_has_the_panels_the_issue_lists(name: str) -> None:
    assert [p["title"] for p in load(name)["panels"]] == EXPECTED_TITLES[name]


def test_uids_are_stable_and_unique() -> None:
    uids = [load(name)["uid"] for name in FILES]
    assert uids == [Path(name).stem for name in FILES]


@pytest.mark.parametrize("name", FILES)
def test_panels_do_not_overlap(name: str) -> None:
    cells: set[tuple[int, int]] = set()
    for panel in load(name)["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, panel["title"]
        cells |= mine


@pytest.mark.parametrize("name", FILES)
def test_legends_and_columns_name_labels_the_query_keeps(name: str) -> None:
    """A `by (...)` aggregation drops labels: the legend and table columns must survive it."""
    for panel in load(name)["panels"]:
        kept: set[str] = set()
        every_target_aggregates = True
        for target in panel["targets"]:
            by = _outer_by(target["expr"])
            if by is None:
                every_target_aggregates = False
                continue
            assert legend_labels(target["legendFormat"]) <= by, (panel["title"], target["expr"])
            kept |= by
        if every_target_aggregates:
            assert table_label_columns(panel) <= kept, panel["title"]


def _outer_by(expr: str) -> set[str] | None:
    """Labels an expression keeps when it starts with `agg by (...)`, else None."""
    match = re.match(r"\s*\w+ by \(([^)]*)\)", expr)
    return {label.strip() for label in match.group(1).split(",")} if match else None


def all_exprs() -> list[str]:
    return [
        expand(target["expr"], SAMPLE_VALUES)
        for name in FILES
        for panel in load(name)["panels"]
        for target in panel["targets"]
    ]


def test_every_expression_parses_with_promtool() -> None:
    promtool = require_binary("promtool")
    exprs = all_exprs()
    assert len(exprs) > 40
    assert promql_errors(exprs, promtool) == {}


def test_promtool_check_catches_a_broken_expression() -> None:
    promtool = require_binary("promtool")
    good = 'sum(rate(gpuwatch_gpu_cost_usd_total{job="gpuwatch"}[15s]))'
    bad = 'sum(rate(gpuwatch_gpu_cost_usd_total{job="gpuwatch"}[15s])'
    assert list(promql_errors([good, bad], promtool)) == [bad]


def test_expand_handles_every_variable_form() -> None:
    values = {"job": "gpuwatch", "host": "a|b"}
    assert expand('x{job=~"$job", instance=~"${host}"}[$__rate_interval]', values) == (
        'x{job=~"gpuwatch", instance=~"a|b"}[15s]'
    )
    assert expand('x{instance=~"${host:regex}"}[${__range}]', values) == 'x{instance=~"a|b"}[10m]'
    with pytest.raises(KeyError):
        expand('x{gpu=~"$gpu"}', values)


# --- the lint, fed one broken panel at a time ------------------------------------------------

Mutation = Callable[[Json], None]


def _first(kind: str) -> Callable[[Json], Json]:
    def pick(board: Json) -> Json:
        panel: Json = next(p for p in board["panels"] if p["type"] == kind)
        return panel

    return pick


def _set_expr(expr: str) -> Mutation:
    def mutate(board: Json) -> None:
        _first("timeseries")(board)["targets"][0]["expr"] = expr

    return mutate


def _drop_variable(name: str) -> Mutation:
    def mutate(board: Json) -> None:
        board["templating"]["list"] = [v for v in board["templating"]["list"] if v["name"] != name]

    return mutate


def _previous_month(board: Json) -> Json:
    panel: Json = next(p for p in board["panels"] if p["title"] == "Spend previous month")
    return panel


SEL = 'job=~"$job", instance=~"$host"'
BROKEN: dict[str, tuple[Mutation, str]] = {
    "graph panel": (lambda b: _first("timeseries")(b).update(type="graph"), "panel-type"),
    "singlestat": (lambda b: _first("stat")(b).update(type="singlestat"), "panel-type"),
    "no unit": (
        lambda b: _first("timeseries")(b)["fieldConfig"]["defaults"].pop("unit"),
        "panel-units",
    ),
    "made-up unit": (
        lambda b: _first("timeseries")(b)["fieldConfig"]["defaults"].update(unit="GiB"),
        "panel-units",
    ),
    "no description": (lambda b: _first("stat")(b).update(description=""), "panel-description"),
    "no title": (lambda b: _first("stat")(b).update(title=" "), "panel-title"),
    "fixed datasource": (
        lambda b: _first("timeseries")(b).update(datasource={"type": "prometheus", "uid": "abc"}),
        "panel-datasource",
    ),
    "target datasource": (
        lambda b: _first("timeseries")(b)["targets"][0].update(datasource=None),
        "panel-datasource",
    ),
    "no targets": (lambda b: _first("timeseries")(b).update(targets=[]), "targets-present"),
    "fixed rate window": (
        _set_expr(f"sum(rate(gpuwatch_gpu_cost_usd_total{{{SEL}}}[5m]))"),
        "target-rate-interval",
    ),
    "range in a range query": (
        _set_expr(f"sum(increase(gpuwatch_gpu_cost_usd_total{{{SEL}}}[$__range]))"),
        "target-rate-interval",
    ),
    "raw counter": (_set_expr(f"sum(gpuwatch_gpu_cost_usd_total{{{SEL}}})"), "target-counter-agg"),
    "unknown _total counter": (
        _set_expr(f"gpuwatch_something_total{{{SEL}}}"),
        "target-counter-agg",
    ),
    "no job filter": (
        _set_expr('gpuwatch_gpu_power_watts{instance=~"$host"}'),
        "target-job",
    ),
    "no host filter": (_set_expr('gpuwatch_gpu_power_watts{job=~"$job"}'), "target-host"),
    "no datasource variable": (_drop_variable("datasource"), "template-datasource"),
    "no job variable": (_drop_variable("job"), "template-job"),
    "no host variable": (_drop_variable("host"), "template-host"),
    "no gpu variable": (_drop_variable("gpu"), "template-gpu"),
    "old schema": (lambda b: b.update(schemaVersion=27), "schema-version"),
    "no uid": (lambda b: b.pop("uid"), "dashboard-uid"),
    "host variable not refreshed": (
        lambda b: next(v for v in b["templating"]["list"] if v["name"] == "host").update(refresh=1),
        "template-host",
    ),
    "gpu variable on a fixed datasource": (
        lambda b: next(v for v in b["templating"]["list"] if v["name"] == "gpu").update(
            datasource={"type": "prometheus", "uid": "abc"}
        ),
        "template-gpu",
    ),
    "month shift of the dashboard range": (
        lambda b: _previous_month(b).pop("timeFrom"),
        "panel-time",
    ),
    "relative time to now for a past month": (
        lambda b: _previous_month(b).update(timeFrom="now-1M/M", timeShift=None),
        "panel-time",
    ),
    "repeated panel id": (
        lambda b: b["panels"][1].update(id=b["panels"][0]["id"]),
        "panel-id",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_the_lint_finds_a_broken_panel(case: str) -> None:
    board = copy.deepcopy(load("gpuwatch-gpu.json"))
    if case in ("singlestat", "no description", "no title"):
        board = copy.deepcopy(load("gpuwatch-fleet.json"))
    if "month" in case:
        board = copy.deepcopy(load("gpuwatch-cost.json"))
    mutate, rule = BROKEN[case]
    mutate(board)
    findings = lint(board, COUNTERS)
    assert findings, case
    assert any(f": {rule}" in f for f in findings), findings


# --- the month panels' time range, as Grafana computes it -------------------------------------


def _month_start(t: datetime) -> datetime:
    return t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _months_back(t: datetime, months: int) -> datetime:
    """`t` moved `months` calendar months back (the day clamped to the month's length)."""
    year, month = divmod(t.year * 12 + t.month - 1 - months, 12)
    day = min(t.day, calendar.monthrange(year, month + 1)[1])
    return t.replace(year=year, month=month + 1, day=day)


def _panel_range(panel: Json, dashboard_from: datetime, now: datetime) -> tuple[datetime, datetime]:
    """Grafana's `applyPanelTimeOverrides` for the forms these dashboards use.

    Relative time first (`now/M`: this month so far), then the time shift (`NM/M`: N
    months back, the start rounded down to its month and the end up to the end of its).
    """
    start, end = dashboard_from, now
    time_from = panel.get("timeFrom")
    if time_from is not None:
        assert time_from == "now/M", time_from
        start, end = _month_start(now), now
    shift = panel.get("timeShift")
    if shift is not None:
        match = re.fullmatch(r"(\d+)M/M", shift)
        assert match, shift
        months = int(match.group(1))
        start = _month_start(_months_back(start, months))
        end = _month_start(_months_back(end, months - 1)) - timedelta(milliseconds=1)
    return start, end


@pytest.mark.parametrize("days", [0.25, 7, 30, 90])
def test_the_month_panels_ignore_the_dashboard_range(days: float) -> None:
    now = datetime(2026, 3, 3, 12, 0)
    panels = {p["title"]: p for p in load("gpuwatch-cost.json")["panels"]}
    dashboard_from = now - timedelta(days=days)
    assert _panel_range(panels["Spend month to date"], dashboard_from, now) == (
        datetime(2026, 3, 1),
        now,
    )
    assert _panel_range(panels["Spend previous month"], dashboard_from, now) == (
        datetime(2026, 2, 1),
        datetime(2026, 2, 28, 23, 59, 59, 999000),
    )


def test_a_month_shift_alone_follows_the_dashboard_range() -> None:
    """What the lint's panel-time rule guards against: 1M/M on a 30-day range is 2 months."""
    now = datetime(2026, 3, 3, 12, 0)
    panel = {"timeShift": "1M/M"}
    assert _panel_range(panel, now - timedelta(days=30), now) == (
        datetime(2026, 1, 1),
        datetime(2026, 2, 28, 23, 59, 59, 999000),
    )
