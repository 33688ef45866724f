"""Grafana JSON of panels and dashboards: panels laid out left to right on the 24-column
grid, rows wrapping, ids from 1; the committed text form (`render`)."""

from __future__ import annotations

import json

from boards.blocks import DS, Json, Panel
from boards.variables import variables

SCHEMA_VERSION = 39  # Grafana 10.x; Grafana 11 migrates it on load


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


def render(board: Json) -> str:
    """The committed form: 2-space JSON, keys in builder order, a final newline."""
    return json.dumps(board, indent=2, ensure_ascii=False) + "\n"
