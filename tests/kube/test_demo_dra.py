"""`demo-dra` (the demo's pods holding their GPUs through DRA claims of `gpu.nvidia.com`,
served by the simulated kubelet in pod-resources' `dynamic_resources`) shows the same
pods, costs and verdicts as `demo` (device plugin IDs): both agents, each on its own
simulated node with a real kubelet gRPC socket, run the same 35 simulated minutes and
their whole `/metrics` are compared, the DRA-only labels of `gpuwatch_gpu_pod_info`
(`resource`, `claim`) aside."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config, ExporterConfig
from gpuwatch.simulate.cluster import SimulatedCluster
from gpuwatch.simulate.scenario import load_scenario
from tests.conftest import simulated
from tests.support.kube_node import kube_node

SECONDS = 2100  # past the 30-minute window: idle, held and allocated-idle verdicts
LIST_EVERY = 5  # the kubelet is listed every 5 s (list_interval_seconds)

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _run(scenario: str) -> Iterator[tuple[Agent, SimulatedCluster]]:
    nv, clock = simulated(scenario)
    config = Config(
        agent=AgentConfig(hostname="test-host", per_process_metrics=True),
        exporter=ExporterConfig(dcgm_compat=True),
    )
    with kube_node(config, nv, clock) as (agent, cluster):
        for second in range(SECONDS):
            if second % LIST_EVERY == 0:
                agent.refresh_attribution()
            clock.advance(1.0)
            agent.tick()
        yield agent, cluster


def _series(agent: Agent) -> Series:
    text = generate_latest(agent.registry).decode()
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("gpuwatch_collector_duration") or s.name.startswith(
                "gpuwatch_scrape"
            ):
                continue  # wall-clock timings
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[Series, Series]]:
    demo = _run("demo")
    dra = _run("demo-dra")
    demo_agent, _ = next(demo)
    dra_agent, _ = next(dra)
    yield _series(demo_agent), _series(dra_agent)
    for run in (demo, dra):
        next(run, None)


def _without_dra_labels(series: Series) -> Series:
    """The series with `gpuwatch_gpu_pod_info`'s `resource` and `claim` labels dropped."""
    dra_only = ("resource", "claim")
    return {
        (
            name,
            tuple(kv for kv in labels if name != "gpuwatch_gpu_pod_info" or kv[0] not in dra_only),
        ): value
        for (name, labels), value in series.items()
    }


def test_the_same_metrics_as_the_demo(both: tuple[Series, Series]) -> None:
    demo, dra = both
    assert _without_dra_labels(dra) == _without_dra_labels(demo)


def _labels(series: Series, name: str) -> list[dict[str, str]]:
    return sorted(
        (dict(labels) for (n, labels), _ in series.items() if n == name),
        key=lambda labels: (labels["gpu"], labels["pod"]),
    )


def test_pods_hold_their_gpus_through_claims(both: tuple[Series, Series]) -> None:
    demo, dra = both
    holders = [
        (d["gpu"], d["pod"], d["resource"], d["claim"])
        for d in _labels(dra, "gpuwatch_gpu_pod_info")
    ]
    assert holders == [
        ("0", "llama3-sft-0", "gpu.nvidia.com", "llama3-sft-0-gpu-x7k2p"),
        ("1", "batch-eval-7f9c", "gpu.nvidia.com", "batch-eval-7f9c-gpu-b2v8n"),
        ("2", "notebook-alice", "gpu.nvidia.com", "notebook-alice-gpu-q9d4m"),
        ("3", "vllm-llama-8b-0", "gpu.nvidia.com", "vllm-llama-8b-shared-gpu"),
        ("3", "vllm-llama-8b-canary", "gpu.nvidia.com", "vllm-llama-8b-shared-gpu"),
    ]
    assert {d["claim"] for d in _labels(demo, "gpuwatch_gpu_pod_info")} == {""}
    # the comparison above is not empty: costs, verdicts and allocated-idle are in it
    names = {name for name, _ in dra}
    assert {
        "gpuwatch_pod_cost_usd_total",
        "gpuwatch_pod_idle_cost_usd_total",
        "gpuwatch_gpu_pod_allocated_idle",
        "gpuwatch_gpu_state",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    } <= names
    idle = {
        dict(labels)["pod"]
        for (name, labels), value in dra.items()
        if name == "gpuwatch_gpu_pod_allocated_idle" and value == 1.0
    }
    assert idle == {"batch-eval-7f9c", "vllm-llama-8b-canary"}  # the notebook runs a kernel
    states = {
        dict(labels)["gpu"]: dict(labels)["state"]
        for (name, labels), value in dra.items()
        if name == "gpuwatch_gpu_state" and value == 1.0
    }
    assert states == {"0": "busy", "1": "idle", "2": "held", "3": "underutilized"}
    costs = {
        dict(labels)["pod"]: value
        for (name, labels), value in dra.items()
        if name == "gpuwatch_pod_cost_usd_total"
    }
    assert len(costs) == 5
    assert all(value > 0 for value in costs.values())
    assert not any(name.startswith("gpuwatch_dra_devices") for name in names)


def test_demo_dra_differs_from_demo_only_in_its_pods() -> None:
    demo, dra = load_scenario("demo"), load_scenario("demo-dra")
    same = {"name", "description", "identity", "pods"}
    assert dra.model_dump(exclude=same) == demo.model_dump(exclude=same)
    assert dra.identity_name == demo.identity_name == "demo"
    assert [(p.namespace, p.name) for p in dra.pods] == [(p.namespace, p.name) for p in demo.pods]
    pids = [[c.pids for c in p.containers] for p in dra.pods]
    assert pids == [[c.pids for c in p.containers] for p in demo.pods]
    forms = {d.form for p in dra.pods for c in p.containers for d in c.devices}
    assert forms == {"dra"}
