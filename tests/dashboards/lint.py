"""A dashboard lint: grafana/dashboard-linter's rules, re-implemented, and a few more.

No Grafana server exists here, so this checks what Grafana and the linter would: the
datasource, job and host variables, every panel's datasource, title, description and unit,
current panel types, targets present, `$__rate_interval` in every rate/increase, counters
only through rate/irate/increase, the job and host filters in every selector, whole-period
panel time settings (a `1M/M` shift only with relative time `now/M`), and (through
`promtool check rules`) that every expression parses once its variables are expanded.
`lint()` returns findings as "uid / panel: rule: detail" lines; an empty list is clean.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

Json = dict[str, Any]

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
PANEL_TYPES = frozenset({"timeseries", "stat", "state-timeline", "table", "bargauge", "gauge"})
MIN_SCHEMA_VERSION = 39
# Grafana unit ids the dashboards may use (a subset of Grafana's list, all real ids).
UNITS = frozenset(
    {
        "none",
        "short",
        "percent",
        "percentunit",
        "bytes",
        "decbytes",
        "Bps",
        "binBps",
        "watt",
        "joule",
        "celsius",
        "hertz",
        "s",
        "ms",
        "currencyUSD",
        "dateTimeAsIso",
    }
)
REQUIRED_VARIABLES = ("job", "host", "gpu")
RATE_FUNCTIONS = ("rate", "irate", "increase")
# Test values for Grafana's built-in variables (1 s scrapes: $__rate_interval >= 4 scrapes).
BUILTINS = {"__rate_interval": "15s", "__interval": "5s", "__range": "10m"}

_RATE_CALL = re.compile(r"\b(rate|irate|increase)\s*\(")
_RATE_RANGE = re.compile(
    r"\b(?:rate|irate|increase)\s*\(\s*[A-Za-z_:][\w:]*\s*(?:\{[^}]*\})?\s*\[([^\]]*)\]"
)
_SELECTOR = re.compile(r"\{([^}]*)\}")
_VARIABLE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)")
_LEGEND_LABEL = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
# Grafana's panel time settings: a shift rounded to whole periods ("1M/M") and a relative
# time rounded back from now ("now-1M/M").
_ROUNDED_SHIFT = re.compile(r"^\d+([smhdwMy])/([smhdwMy])$")
_ROUNDED_BACK = re.compile(r"^now-\d+([smhdwMy])/([smhdwMy])$")


def counters_from_readme(readme: Path) -> frozenset[str]:
    """Names of the counter families in README's metric reference table."""
    names = set()
    for line in readme.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[2] == "counter" and cells[1].startswith("`"):
            names.add(cells[1].strip("`"))
    return frozenset(names)


def expand(expr: str, values: Mapping[str, str]) -> str:
    """`expr` with `$var`, `${var}` and `${var:fmt}` replaced from `values` (built-ins added)."""
    merged = {**BUILTINS, **values}

    def sub(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name not in merged:
            raise KeyError(f"no value for ${name} in {expr!r}")
        return merged[name]

    return _VARIABLE.sub(sub, expr)


def legend_labels(legend: str) -> set[str]:
    """Labels a legend format names as `{{label}}`."""
    return set(_LEGEND_LABEL.findall(legend))


def table_label_columns(panel: Json) -> set[str]:
    """Label columns a table panel shows (its organize step's fields that are not values)."""
    columns: set[str] = set()
    for step in panel.get("transformations", []):
        if step.get("id") == "organize":
            for name in step["options"].get("renameByName", {}):
                if not name.startswith("Value") and name != "Time":
                    columns.add(name)
    return columns


def _where(board: Json, panel: Json | None = None) -> str:
    uid = board.get("uid", "?")
    return f"{uid} / {panel.get('title', '?')}" if panel is not None else str(uid)


def lint_variables(board: Json) -> list[str]:
    """The datasource variable and the job, host and gpu query variables."""
    findings = []
    where = _where(board)
    by_name = {v.get("name"): v for v in board.get("templating", {}).get("list", [])}
    ds = by_name.get("datasource")
    if ds is None or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        findings.append(f"{where}: template-datasource: no `datasource` variable of Prometheus")
    for name in REQUIRED_VARIABLES:
        var = by_name.get(name)
        if var is None:
            findings.append(f"{where}: template-{name}: no `{name}` variable")
            continue
        query = var.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query)
        if var.get("type") != "query" or not text.startswith("label_values("):
            findings.append(f"{where}: template-{name}: not a label_values() query variable")
        if var.get("datasource") != DATASOURCE:
            findings.append(f"{where}: template-{name}: does not use ${{datasource}}")
        if var.get("refresh") != 2:
            findings.append(f"{where}: template-{name}: not refreshed on time range change")
    return findings


def _rate_findings(expr: str, instant: bool) -> list[str]:
    allowed = {"$__rate_interval", "${__rate_interval}"}
    if instant:
        allowed |= {"$__range", "${__range}"}
    ranges = _RATE_RANGE.findall(expr)
    findings = []
    if len(ranges) != len(_RATE_CALL.findall(expr)):
        findings.append("target-rate-interval: a rate/increase not over a plain selector")
    for found in ranges:
        if found.strip() not in allowed:
            findings.append(f"target-rate-interval: range [{found}] is not $__rate_interval")
    return findings


def _counter_findings(expr: str, counters: Iterable[str]) -> list[str]:
    findings = []
    names = set(counters) | set(re.findall(r"[A-Za-z_:][\w:]*_total(?![\w:])", expr))
    for name in sorted(names):
        for match in re.finditer(rf"(?<![\w:]){re.escape(name)}(?![\w:])", expr):
            before = expr[: match.start()]
            after = expr[match.end() :]
            wrapped = re.search(r"\b(?:rate|irate|increase)\s*\(\s*$", before)
            ranged = re.match(r"\s*(?:\{[^}]*\})?\s*\[", after)
            if not (wrapped and ranged):
                findings.append(f"target-counter-agg: counter {name} outside rate/increase")
    return findings


def _selector_findings(expr: str) -> list[str]:
    findings = []
    for selector in _SELECTOR.findall(expr):
        if 'job=~"$job"' not in selector:
            findings.append(f'target-job: selector {{{selector}}} lacks job=~"$job"')
        if 'instance=~"$host"' not in selector:
            findings.append(f'target-host: selector {{{selector}}} lacks instance=~"$host"')
    if not _SELECTOR.search(expr):
        findings.append("target-job: no label selector")
    return findings


def _time_findings(panel: Json) -> list[str]:
    """panel-time: whole-period panel time settings that depend on the dashboard's range.

    Grafana applies a panel's relative time (`timeFrom`) first, then shifts the resulting
    range by `timeShift`, rounding its start down and its end up to the shift's unit. A
    shift of `1M/M` therefore covers the whole previous month only when the range it shifts
    is this month so far (`timeFrom` `now/M`); on its own it shifts the dashboard's range,
    and a 30-day range becomes two months. A relative time `now-1M/M` runs from the start
    of the previous month to now (its end is not rounded), not over the previous month.
    """
    found = []
    shift = str(panel.get("timeShift") or "").strip()
    time_from = str(panel.get("timeFrom") or "").strip()
    rounded = _ROUNDED_SHIFT.match(shift)
    if rounded and time_from != f"now/{rounded.group(2)}":
        found.append(
            f"panel-time: time shift {shift} without relative time now/{rounded.group(2)} "
            "shifts the dashboard's range, not one whole period"
        )
    if _ROUNDED_BACK.match(time_from):
        found.append(
            f"panel-time: relative time {time_from} runs to now; a whole past period is "
            f"relative time now/<unit> with a time shift"
        )
    return found


def lint_panel(board: Json, panel: Json, counters: Iterable[str]) -> list[str]:
    """Every rule that applies to one panel and its targets."""
    where = _where(board, panel)
    found: list[str] = []
    if panel.get("type") not in PANEL_TYPES:
        found.append(f"panel-type: {panel.get('type')!r} is not a current panel type")
    if panel.get("datasource") != DATASOURCE:
        found.append("panel-datasource: panel does not use ${datasource}")
    if not str(panel.get("title", "")).strip():
        found.append("panel-title: no title")
    if not str(panel.get("description", "")).strip():
        found.append("panel-description: no description")
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    if unit not in UNITS:
        found.append(f"panel-units: unit {unit!r} is not a known Grafana unit")
    found += _time_findings(panel)
    targets = panel.get("targets") or []
    if not targets or not all(str(t.get("expr", "")).strip() for t in targets):
        found.append("targets-present: a panel without a query")
    for target in targets:
        expr = str(target.get("expr", ""))
        if target.get("datasource") != DATASOURCE:
            ref = target.get("refId")
            found.append(f"panel-datasource: target {ref} does not use ${{datasource}}")
        found += _rate_findings(expr, bool(target.get("instant")))
        found += _counter_findings(expr, counters)
        found += _selector_findings(expr)
    return [f"{where}: {finding}" for finding in found]


def lint(board: Json, counters: Iterable[str]) -> list[str]:
    """All findings for one dashboard (PromQL parsing is `promql_errors`)."""
    counters = tuple(counters)
    findings = lint_variables(board)
    where = _where(board)
    if not board.get("uid"):
        findings.append(f"{where}: dashboard-uid: no uid")
    if int(board.get("schemaVersion", 0)) < MIN_SCHEMA_VERSION:
        findings.append(f"{where}: schema-version: below {MIN_SCHEMA_VERSION}")
    panels = board.get("panels", [])
    ids = [p.get("id") for p in panels]
    if len(set(ids)) != len(ids) or None in ids:
        findings.append(f"{where}: panel-id: missing or repeated panel ids")
    for panel in panels:
        findings += lint_panel(board, panel, counters)
    return findings


def promql_errors(exprs: list[str], promtool: str) -> dict[str, str]:
    """Expressions promtool cannot parse, with its message (each written as a recording rule)."""

    def check(batch: list[str]) -> tuple[int, str]:
        rules = [{"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(batch)]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "dashboards.rules.yml"
            path.write_text(json.dumps({"groups": [{"name": "dashboards", "rules": rules}]}))
            result = subprocess.run(
                [promtool, "check", "rules", str(path)], capture_output=True, check=False
            )
        return result.returncode, (result.stdout + result.stderr).decode()

    code, _ = check(exprs)
    if code == 0:
        return {}
    errors = {}
    for expr in exprs:
        code, output = check([expr])
        if code != 0:
            errors[expr] = output.strip()
    return errors
