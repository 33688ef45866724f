"""The PrometheusRule and dashboard ConfigMaps carry deploy/prometheus/*.rules.yml and
dashboards/*.json unchanged, and the rendered rules pass `promtool check rules`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helm.chart import Rendered, dashboard_sources, rule_sources

pytestmark = pytest.mark.prometheus


def test_every_rule_file_becomes_a_prometheus_rule_unchanged(
    chart: Path, rendered: dict[str, Rendered], tmp_path: Path
) -> None:
    sources = rule_sources(chart)
    assert sources
    objects = {
        o["metadata"]["annotations"]["gpuwatch.io/source"].rsplit("/", 1)[1]: o
        for o in rendered["full-values"].of_kind("PrometheusRule")
    }
    assert set(objects) == set(sources)
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian prometheus) is installed by `make test`"
    for name, path in sources.items():
        groups = objects[name]["spec"]["groups"]
        assert groups == yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
        out = tmp_path / name
        out.write_text(yaml.safe_dump({"groups": groups}), encoding="utf-8")
        result = subprocess.run(
            [promtool, "check", "rules", str(out)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_every_dashboard_becomes_a_config_map_byte_for_byte(
    chart: Path, rendered: dict[str, Rendered]
) -> None:
    sources = dashboard_sources(chart)
    assert sources
    data = {
        key: value
        for o in rendered["full-values"].of_kind("ConfigMap")
        if o["metadata"]["labels"].get("grafana_dashboard") == "1"
        for key, value in o["data"].items()
    }
    assert set(data) == set(sources)
    for name, path in sources.items():
        assert data[name] == path.read_text(encoding="utf-8")
        json.loads(data[name])


def test_sources_are_the_repository_files(chart: Path) -> None:
    """The laid-out copy holds exactly the repository's files (placeholders only where
    the repository has none yet)."""
    repo = Path(__file__).resolve().parents[2]
    for found, folder, glob in (
        (rule_sources(chart), repo / "deploy/prometheus", "*.rules.yml"),
        (dashboard_sources(chart), repo / "dashboards", "*.json"),
    ):
        real = {p.name: p.read_bytes() for p in sorted(folder.glob(glob))}
        if real:
            assert {n: p.read_bytes() for n, p in found.items()} == real
        else:
            assert len(found) == 1
