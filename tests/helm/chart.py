"""Renders the chart with real Helm (helm-python-sdk) from a copy of the repository's
chart and the folders its symlinks reach.

`deploy/helm/gpuwatch/files/prometheus` and `files/dashboards` are symlinks to
`deploy/prometheus/` and `dashboards/` (Helm follows them and packs their content), so
the PrometheusRule and dashboard ConfigMaps are built from those files unchanged. Helm
refuses a dangling symlink; when a folder is missing or empty in this checkout, the copy
gets one tiny placeholder file (in the temporary tree only) so the templates still run.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy/helm/gpuwatch"
RULES_DIR = REPO / "deploy/prometheus"
DASHBOARDS_DIR = REPO / "dashboards"
RULES_GLOB = "*.rules.yml"
DASHBOARDS_GLOB = "*.json"
RELEASE = "gw"
NAMESPACE = "gpu"

PLACEHOLDER_RULES = """groups:
  - name: gpuwatch-placeholder
    rules:
      - record: gpuwatch:placeholder:sum
        expr: sum(gpuwatch_gpu_info)
"""
PLACEHOLDER_DASHBOARD = json.dumps({"title": "placeholder", "panels": []}) + "\n"


def value_sets() -> dict[str, dict[str, Any]]:
    """Every value set under the chart's ci/ folder, by file stem."""
    return {
        path.stem: yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for path in sorted((CHART / "ci").glob("*.yaml"))
    }


def _copy_sources(source: Path, glob: str, target: Path, placeholder: tuple[str, str]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    files = sorted(source.glob(glob)) if source.is_dir() else []
    for path in files:
        shutil.copyfile(path, target / path.name)
    if not files:
        name, text = placeholder
        (target / name).write_text(text, encoding="utf-8")


def assemble(root: Path) -> Path:
    """Lay the chart and its linked folders out under `root`; return the chart's path."""
    chart = root / "deploy/helm/gpuwatch"
    shutil.copytree(CHART, chart, symlinks=True)
    _copy_sources(
        RULES_DIR,
        RULES_GLOB,
        root / "deploy/prometheus",
        ("placeholder.rules.yml", PLACEHOLDER_RULES),
    )
    _copy_sources(
        DASHBOARDS_DIR,
        DASHBOARDS_GLOB,
        root / "dashboards",
        ("placeholder.json", PLACEHOLDER_DASHBOARD),
    )
    return chart


def rule_sources(chart: Path) -> dict[str, Path]:
    """The rule files the chart sees, by name."""
    return {p.name: p for p in sorted((chart / "files/prometheus").glob(RULES_GLOB))}


def dashboard_sources(chart: Path) -> dict[str, Path]:
    """The dashboard files the chart sees, by name."""
    return {p.name: p for p in sorted((chart / "files/dashboards").glob(DASHBOARDS_GLOB))}


@dataclass(frozen=True)
class Rendered:
    """One value set rendered: manifests by template path and the parsed objects."""

    manifests: dict[str, str]
    objects: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """Objects of one kind."""
        return [o for o in self.objects if o.get("kind") == kind]

    def one(self, kind: str) -> dict[str, Any]:
        """The only object of `kind`."""
        found = self.of_kind(kind)
        assert len(found) == 1, f"{len(found)} {kind} objects"
        return found[0]


def render(chart: Path, values: dict[str, Any]) -> Rendered:
    """Render with Helm; parse every YAML document (NOTES.txt aside)."""
    manifests = helm_python.Chart.load(chart).render(values, name=RELEASE, namespace=NAMESPACE)
    objects = [
        doc
        for path, text in sorted(manifests.items())
        if path.endswith((".yaml", ".yml"))
        for doc in yaml.safe_load_all(text)
        if doc
    ]
    return Rendered(manifests, objects)
