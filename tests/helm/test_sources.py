"""The PrometheusRule and dashboard ConfigMaps carry deploy/prometheus/*.rules.yml and
dashboards/*.json unchanged, and the rendered rules pass `promtool check rules`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import helm_python
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
        if "gpuwatch.io/source" in o["metadata"].get("annotations", {})
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


def test_the_idle_spend_threshold_value_overrides_the_rule_files_default(
    chart: Path, rendered: dict[str, Rendered], tmp_path: Path
) -> None:
    """`prometheusRule.fleetIdleSpendThresholdUsdPerHour: 250.5` (ci/full-values.yaml) adds
    one rule; evaluated by promtool with the shipped alert rules, the threshold is 250.5,
    and without it (ci/default-values.yaml renders no override) the file's 100."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian prometheus) is installed by `make test`"
    rules = rendered["full-values"].of_kind("PrometheusRule")
    (override,) = [o for o in rules if o["metadata"]["name"].endswith("-overrides")]
    assert not [
        o
        for o in rendered["default-values"].of_kind("PrometheusRule")
        if o["metadata"]["name"].endswith("-overrides")
    ]
    alerts = next(
        o for o in rules
        if o["metadata"].get("annotations", {}).get("gpuwatch.io/source", "").endswith(
            "gpuwatch-alerts.rules.yml"
        )
    )  # fmt: skip
    files = []
    for name, groups in (
        ("override.yml", override["spec"]["groups"]),
        ("alerts.yml", alerts["spec"]["groups"]),
    ):
        (tmp_path / name).write_text(yaml.safe_dump({"groups": groups}), encoding="utf-8")
        files.append(name)
    test = {
        "rule_files": files,
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [],
                "promql_expr_test": [
                    {
                        "expr": "gpuwatch:fleet_idle_spend_threshold_usd_per_hour",
                        "eval_time": "5m",
                        "exp_samples": [
                            {
                                "labels": "gpuwatch:fleet_idle_spend_threshold_usd_per_hour",
                                "value": 250.5,
                            }
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", "test.yml"],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_packaged_chart_ships_the_dashboards_json_not_their_builder() -> None:
    """Real Helm loads the repository's chart through its symlinks: `.helmignore` keeps
    the dashboards' Python builder (and any bytecode) out, and every JSON is in."""
    repo = Path(__file__).resolve().parents[2]
    names = {f["name"] for f in helm_python.Chart.load(repo / "deploy/helm/gpuwatch").files}
    shipped = {n for n in names if n.startswith("files/dashboards/")}
    assert shipped == {f"files/dashboards/{p.name}" for p in (repo / "dashboards").glob("*.json")}
