"""Every panel query of every dashboard, run against a real Prometheus scraping real agents.

Two agents run as subprocesses: `--simulate demo-dra` (the demo's GPUs and pods, held
through DRA claims so the pod table's `claim` column has values; per-process metrics on, a
60 s analysis window so states settle in seconds at `--speed 10`) and a MIG H100 that raises XIDs
(`mig-xid.toml`, for the GPU detail's MIG and XID panels). One Prometheus scrapes both every
second as job `gpuwatch`. The dashboard variables are resolved the way Grafana does it:
each `label_values(selector, label)` asks Prometheus's label-values API, and a multi-value
selection becomes the regex `(a|b)`. Each expanded query must return series that carry
every label its legend or table columns name. Then once more with namespace = team-a (one of
the demo's two teams): the panels that use `$namespace` must show team-a only.
"""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent_process import fetch, start_agent
from tests.conftest import REPO_ROOT, free_port
from tests.dashboards.lint import expand, legend_labels, table_label_columns
from tests.prometheus_process import running_prometheus, scrape_config

DASHBOARDS = REPO_ROOT / "dashboards"
FILES = ("gpuwatch-fleet.json", "gpuwatch-cost.json", "gpuwatch-gpu.json")
MIG_XID_SCENARIO = Path(__file__).parent / "mig-xid.toml"
DEADLINE_SECONDS = 75.0
# Values each variable has once both agents are scraped (GPUs 0-3 of the demo, 0 of the MIG
# host; the demo node's namespaces team-a and team-b).
AT_LEAST = {"job": 1, "host": 2, "gpu": 4, "namespace": 2}
PANELS = 34
# The demo node: team-a holds GPUs 0 and 2, team-b GPUs 1 (running nothing) and 3 (shared);
# the MIG host has no pods. Values of "Allocated vs total GPUs" by legend.
ALLOCATION = {
    ".*": {"total": 5.0, "allocated to pods": 4.0, "allocated, running nothing": 1.0},
    "team-a": {"total": 5.0, "allocated to pods": 2.0, "allocated, running nothing": 0.0},
}
_LABEL_VALUES = re.compile(r"label_values\((.*),\s*(\w+)\)$", re.S)

Json = dict[str, Any]


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Prometheus scraping the demo-dra agent and the MIG/XID agent (job `gpuwatch`)."""
    workdir: Path = tmp_path_factory.mktemp("dashboards")
    agents = []
    try:
        ports = []
        for name, scenario in (("demo", "demo-dra"), ("mig", str(MIG_XID_SCENARIO))):
            config = workdir / f"{name}.toml"
            config.write_text(
                f'[agent]\nper_process_metrics = true\nstate_dir = "{workdir / name}"\n'
                "[analysis]\nwindow_seconds = 60.0\nlookback_seconds = 60.0\n"
            )
            port = free_port()
            agents.append(
                start_agent(
                    ["--simulate", scenario, "--speed", "10", "--config", str(config)], port
                )
            )
            ports.append(port)
        with running_prometheus(workdir, scrape_config(ports)) as url:
            yield url
    finally:
        for agent in agents:
            agent.send_signal(signal.SIGTERM)
            agent.communicate(timeout=10)


def api(url: str, path: str, **params: str) -> Any:
    """GET a Prometheus API path; its `data`, or None while Prometheus is not answering."""
    try:
        body = json.loads(fetch(f"{url}{path}?{urllib.parse.urlencode(params)}"))
    except OSError:
        return None
    return body["data"]


def regex_value(values: list[str]) -> str:
    """Grafana's multi-value regex: each value escaped (inside a PromQL string), `(a|b)`."""
    escaped = [re.sub(r"([\\^$*+?.()|\[\]{}])", r"\\\\\1", v) for v in sorted(values)]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def resolve_variables(url: str, board: Json, deadline: float) -> dict[str, str]:
    """Each query variable's selection: all its values (namespace: All = `.*` while none)."""
    resolved: dict[str, str] = {}
    for var in board["templating"]["list"]:
        if var["type"] != "query":
            continue
        match = _LABEL_VALUES.match(var["definition"])
        assert match, var["definition"]
        selector, label = match.group(1), match.group(2)
        expanded = expand(selector, resolved)
        values: list[str] = []
        while True:
            values = api(url, f"/api/v1/label/{label}/values", **{"match[]": expanded}) or []
            if len(values) >= AT_LEAST[var["name"]] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert len(values) >= AT_LEAST[var["name"]], f"variable {var['name']}: {values}"
        resolved[var["name"]] = regex_value(values) if values else var["allValue"]
    return resolved


def wanted_labels(panel: Json, target: Json) -> set[str]:
    """Labels the panel shows from this target: its legend's; tables check columns together."""
    return legend_labels(target.get("legendFormat", "")) - {"__auto"}


def missing(url: str, panel: Json, exprs: list[str]) -> str | None:
    """Why the panel's expanded queries do not yet give what it shows, or None when they do."""
    seen: set[str] = set()
    for target, expr in zip(panel["targets"], exprs, strict=True):
        result = api(url, "/api/v1/query", query=expr)
        if not result or not result["result"]:
            return f"no data for {expr}"
        for series in result["result"]:
            absent = wanted_labels(panel, target) - set(series["metric"])
            if absent:
                return f"{expr} lacks labels {sorted(absent)}: {series['metric']}"
            seen |= set(series["metric"])
    columns = table_label_columns(panel) - seen
    return f"table columns {sorted(columns)} in no result" if columns else None


def panels_expanded(
    url: str, deadline: float, namespace: str | None = None
) -> dict[str, tuple[Json, list[str]]]:
    """Every panel's expanded queries by "uid / title" (`namespace` overrides the variable)."""
    out: dict[str, tuple[Json, list[str]]] = {}
    for name in FILES:
        board = json.loads((DASHBOARDS / name).read_text())
        values = resolve_variables(url, board, deadline)
        if namespace is not None:
            values["namespace"] = namespace
        for panel in board["panels"]:
            exprs = [expand(t["expr"], values) for t in panel["targets"]]
            out[f"{board['uid']} / {panel['title']}"] = (panel, exprs)
    return out


def uses_namespace(panel: Json) -> bool:
    """Whether any of the panel's queries uses the namespace variable."""
    return any("$namespace" in t["expr"] for t in panel["targets"])


def allocation(url: str, panel: Json, exprs: list[str]) -> dict[str, float]:
    """The "Allocated vs total GPUs" values now, by legend."""
    out = {}
    for target, expr in zip(panel["targets"], exprs, strict=True):
        result = api(url, "/api/v1/query", query=expr)["result"]
        assert len(result) == 1, (expr, result)
        out[target["legendFormat"]] = float(result[0]["value"][1])
    return out


def test_every_panel_query_returns_data_with_its_labels(prometheus_url: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    pending = panels_expanded(prometheus_url, deadline)
    assert len(pending) == PANELS
    wait_for_data(prometheus_url, dict(pending), deadline)
    panel, exprs = pending["gpuwatch-fleet / Allocated vs total GPUs"]
    assert {
        k: v for k, v in allocation(prometheus_url, panel, exprs).items() if k in ALLOCATION[".*"]
    } == ALLOCATION[".*"]


def test_one_namespace_narrows_the_namespace_panels_only(prometheus_url: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    panels = panels_expanded(prometheus_url, deadline, namespace="team-a")
    narrowed = {key: value for key, value in panels.items() if uses_namespace(value[0])}
    assert sorted(narrowed) == sorted(
        f"gpuwatch-fleet / {title}"
        for title in (
            "Allocated vs total GPUs",
            "Cost per hour by namespace",
            "Idle cost per hour by namespace",
            "Cost by namespace",
            "Cost by pod",
            "Pods and their GPUs",
        )
    )
    wait_for_data(prometheus_url, dict(narrowed), deadline)
    for key, (panel, exprs) in narrowed.items():
        namespaces: set[str] = set()
        for expr in exprs:
            for series in api(prometheus_url, "/api/v1/query", query=expr)["result"]:
                if "namespace" in series["metric"]:
                    namespaces.add(series["metric"]["namespace"])
        shows_namespace = "namespace" in table_label_columns(panel) or any(
            "namespace" in legend_labels(t["legendFormat"]) for t in panel["targets"]
        )
        assert namespaces == ({"team-a"} if shows_namespace else set()), key
    panel, exprs = narrowed["gpuwatch-fleet / Allocated vs total GPUs"]
    got = allocation(prometheus_url, panel, exprs)
    assert {k: v for k, v in got.items() if k in ALLOCATION["team-a"]} == ALLOCATION["team-a"]


def wait_for_data(url: str, pending: dict[str, tuple[Json, list[str]]], deadline: float) -> None:
    """Poll until every panel's queries return what it shows; fail naming those that do not."""
    why: dict[str, str] = {}
    while pending and time.monotonic() < deadline:
        for key, (panel, exprs) in list(pending.items()):
            reason = missing(url, panel, exprs)
            if reason is None:
                del pending[key]
                why.pop(key, None)
            else:
                why[key] = reason
        if pending:
            time.sleep(1.0)
    if pending:
        pytest.fail("\n".join(f"{key}: {why[key]}" for key in pending))
