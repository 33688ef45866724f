"""Both rule files loaded into a real Prometheus that scrapes `gpuwatch run --simulate demo`.

The alert file's `for:` durations and the groups' intervals are shortened in a copy (the
only change), so the demo's idle GPU 1 and held GPU 2 fire within ~20 s at `--speed 120`
(the analysis window is 30 simulated minutes: 15 s).
"""

from __future__ import annotations

import json
import signal
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.agent_process import fetch, start_agent
from tests.conftest import free_port
from tests.prometheus_process import running_prometheus, scrape_config
from tests.rules.rulefiles import ALERTS_FILE, RECORDING_FILE, fast_copy

DEADLINE_SECONDS = 45


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("rules-prometheus")
    rules = fast_copy(RECORDING_FILE, workdir / "gpuwatch.rules.yml")
    alerts = fast_copy(ALERTS_FILE, workdir / "gpuwatch-alerts.rules.yml")
    agent_port = free_port()
    agent = start_agent(["--simulate", "demo", "--speed", "120"], agent_port)
    try:
        with running_prometheus(workdir, scrape_config([agent_port], [rules, alerts])) as url:
            yield url
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=10)


def api(url: str) -> Any:
    try:
        return json.loads(fetch(url))["data"]
    except OSError:
        return None


def query(prometheus_url: str, promql: str) -> list[dict[str, Any]]:
    data = api(f"{prometheus_url}/api/v1/query?query={urllib.parse.quote(promql)}")
    return [] if data is None else list(data["result"])


def alerts(prometheus_url: str) -> list[dict[str, Any]]:
    data = api(f"{prometheus_url}/api/v1/alerts")
    return [] if data is None else list(data["alerts"])


def wait_for(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_SECONDS} s: {what}")
        time.sleep(0.5)


def test_recording_rules_produce_series(prometheus_url: str) -> None:
    def per_gpu_cost() -> bool:
        result = query(prometheus_url, "gpu:gpuwatch_gpu_cost_usd:increase5m > 0")
        return sorted(s["metric"]["gpu"] for s in result) == ["0", "1", "2", "3"]

    wait_for("per-GPU cost increases of all four GPUs", per_gpu_cost)
    for name in (
        "gpu:gpuwatch_gpu_cost_usd:increase1h",
        "gpu_state:gpuwatch_gpu_cost_usd:increase5m",
        "gpu:gpuwatch_gpu_busy_hours:1h",
        "job:gpuwatch_gpu_cost_usd:increase1h",
        "job_state:gpuwatch_gpu_cost_usd:increase1h",
    ):
        assert query(prometheus_url, name), name
    count = query(prometheus_url, 'job:gpuwatch_gpus:count{job="gpuwatch"}')
    assert [float(s["value"][1]) for s in count] == [4.0]
    classes = query(prometheus_url, 'gpu_state:gpuwatch_gpu_cost_usd:increase5m{gpu="0"}')
    assert sorted(s["metric"]["state"] for s in classes) == ["held", "idle", "other"]


def test_namespace_rules_follow_the_demo_pods(prometheus_url: str) -> None:
    """The demo node: team-a holds GPUs 0 and 2, team-b GPU 1 and the shared GPU 3."""

    def both_teams() -> bool:
        result = query(prometheus_url, "namespace:gpuwatch_pod_cost_usd:increase5m > 0")
        return sorted(s["metric"]["namespace"] for s in result) == ["team-a", "team-b"]

    wait_for("cost increases of both demo namespaces", both_teams)
    held = query(prometheus_url, "namespace:gpuwatch_gpus_allocated:count")
    assert {s["metric"]["namespace"]: float(s["value"][1]) for s in held} == {
        "team-a": 2.0,
        "team-b": 2.0,
    }
    pods = query(
        prometheus_url, 'namespace_pod:gpuwatch_pod_idle_cost_usd:increase1h{namespace="team-b"}'
    )
    assert sorted(s["metric"]["pod"] for s in pods) == [
        "batch-eval-7f9c",
        "vllm-llama-8b-0",
        "vllm-llama-8b-canary",
    ]
    assert query(prometheus_url, "job:gpuwatch_gpu_unattributed_cost_usd:increase1h")


def test_idle_spend_counts_the_idle_and_the_held_gpu(prometheus_url: str) -> None:
    def two_gpus() -> bool:
        result = query(prometheus_url, 'job:gpuwatch_idle_spend_usd_per_hour:sum{job="gpuwatch"}')
        return [round(float(s["value"][1]), 2) for s in result] == [13.76]

    wait_for("idle spend of GPUs 1 and 2 at $6.88/h each", two_gpus)


def test_idle_and_held_gpus_fire_and_busy_ones_never_do(prometheus_url: str) -> None:
    seen: dict[tuple[str, str], dict[str, Any]] = {}

    def both_fire() -> bool:
        for alert in alerts(prometheus_url):
            name = alert["labels"]["alertname"]
            if name in ("GpuwatchGpuIdle", "GpuwatchGpuHeld", "GpuwatchGpuOverprovisioned"):
                seen.setdefault((name, alert["labels"]["gpu"]), alert)
                if alert["state"] == "firing":
                    seen[(name, alert["labels"]["gpu"])] = alert
        firing = {key for key, alert in seen.items() if alert["state"] == "firing"}
        return {("GpuwatchGpuIdle", "1"), ("GpuwatchGpuHeld", "2")} <= firing

    wait_for("GpuwatchGpuIdle on GPU 1 and GpuwatchGpuHeld on GPU 2 firing", both_fire)
    waste = {key for key in seen if key[0] != "GpuwatchGpuOverprovisioned"}
    assert waste == {("GpuwatchGpuIdle", "1"), ("GpuwatchGpuHeld", "2")}
    idle = seen[("GpuwatchGpuIdle", "1")]
    assert "It costs $6.88/h; idle for" in idle["annotations"]["description"]
    assert idle["annotations"]["description"].endswith(" Pods holding it: team-b/batch-eval-7f9c.")
    held = seen[("GpuwatchGpuHeld", "2")]
    assert held["annotations"]["description"].endswith(" Pods holding it: team-a/notebook-alice.")
    assert idle["annotations"]["runbook_url"] == "docs/alerts.md#gpuwatchgpuidle"
    assert idle["labels"]["severity"] == "warning"
