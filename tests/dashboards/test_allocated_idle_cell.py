"""The "Pods and their GPUs" table's "runs nothing" cell: yes, no, or unknown with the
reason, never blank. gpuwatch_gpu_pod_allocated_idle is absent while a hold's
allocated-idle is unknown (a chart without the host's /proc cannot map PIDs to pods);
gpuwatch_gpu_pod_allocated_idle_unknown{reason} says why. The committed panel's query
is evaluated by Prometheus's own engine (`promtool test rules`, a promql_expr_test) over
series of each kind, and its value mappings name every reason the agent exports."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from gpuwatch.core.snapshot import IDLE_UNKNOWN_REASONS
from tests.conftest import REPO_ROOT, require_binary
from tests.dashboards.lint import expand

FLEET = REPO_ROOT / "dashboards" / "gpuwatch-fleet.json"
ALL = {"job": ".*", "host": ".*", "gpu": ".*", "namespace": ".*"}
SHOWN = 'instance="node-1",gpu="{gpu}",namespace="ns",pod="{pod}",container="main"'
"""The labels the cell's query keeps (one holder)."""
HOLDER = 'job="gpuwatch",uuid="GPU-{gpu}",' + SHOWN


def panel() -> dict[str, Any]:
    dashboard = json.loads(FLEET.read_text(encoding="utf-8"))
    (found,) = [p for p in dashboard["panels"] if p.get("title") == "Pods and their GPUs"]
    return dict(found)


def runs_nothing_mappings() -> dict[str, str]:
    """The "runs nothing" column's value -> text."""
    for override in panel()["fieldConfig"]["overrides"]:
        if override["matcher"]["options"] == "runs nothing":
            for prop in override["properties"]:
                if prop["id"] == "mappings":
                    return {k: v["text"] for k, v in prop["value"][0]["options"].items()}
    raise AssertionError("no mappings on the runs nothing column")


def test_every_unknown_reason_reads_unknown_with_the_reason() -> None:
    mappings = runs_nothing_mappings()
    assert mappings["0"] == "no"
    assert mappings["1"] == "yes"
    unknown = {text for value, text in mappings.items() if value not in ("0", "1")}
    assert unknown == {f"unknown ({reason})" for reason in IDLE_UNKNOWN_REASONS}


def test_prometheus_gives_the_cell_a_value_for_every_holder(tmp_path: Path) -> None:
    """Four holders: idle (1), busy (0), and one unknown for each reason; each gets the
    value its mapping reads as yes, no or "unknown (reason)"."""
    (expr,) = [t["expr"] for t in panel()["targets"] if t["refId"] == "C"]
    mappings = runs_nothing_mappings()
    code = {text: float(value) for value, text in mappings.items()}
    holders = [("0", "idle", "gpuwatch_gpu_pod_allocated_idle", "", code["yes"])]
    holders.append(("1", "busy", "gpuwatch_gpu_pod_allocated_idle", "", code["no"]))
    for i, reason in enumerate(IDLE_UNKNOWN_REASONS):
        holders.append(
            (
                str(2 + i),
                reason.replace("_", "-"),
                "gpuwatch_gpu_pod_allocated_idle_unknown",
                f',reason="{reason}"',
                code[f"unknown ({reason})"],
            )
        )
    series = []
    samples = []
    for gpu, pod, name, extra, value in holders:
        raw = 1.0 if name.endswith("unknown") else value
        labels = HOLDER.format(gpu=gpu, pod=pod)
        series.append({"series": f"{name}{{{labels}{extra}}}", "values": f"{raw:g}x5"})
        samples.append({"labels": "{" + SHOWN.format(gpu=gpu, pod=pod) + "}", "value": value})
    test = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": expand(expr, ALL), "eval_time": "2m", "exp_samples": samples}
                ],
            }
        ],
    }
    path = tmp_path / "cell.test.yml"
    path.write_text(json.dumps(test), encoding="utf-8")  # JSON is YAML
    result = subprocess.run(
        [require_binary("promtool"), "test", "rules", str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
