"""Workload declarations that match by Kubernetes namespace/pod: on literals, and on the
demo's simulated node through the production attribution collector."""

from __future__ import annotations

import pytest

from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.snapshot import GpuIdentity, GpuSample, PodRef, ProcessSample
from gpuwatch.workloads import WorkloadDeclaration
from tests.conftest import simulated
from tests.support.kube_node import kube_node

IDENTITY = GpuIdentity(0, "GPU-0", "NVIDIA H100 80GB HBM3", None, "0", None, None, False)


def _gpu(holder: PodRef | None, *runners: PodRef | None) -> GpuSample:
    processes = tuple(
        ProcessSample(i, "python", "compute", 1, pod=pod) for i, pod in enumerate(runners)
    )
    return GpuSample(IDENTITY, True, processes=processes, pod=holder)


@pytest.mark.parametrize(
    ("namespace", "pod", "gpu", "matched"),
    [
        ("team-b", None, _gpu(PodRef("team-b", "x", "c")), True),
        ("team-b", "vllm-*", _gpu(None, None, PodRef("team-b", "vllm-0", "c")), True),
        ("team-b", "vllm-*", _gpu(None, PodRef("team-a", "vllm-0", "c")), False),
        (None, "vllm-*", _gpu(PodRef("team-a", "trainer", "c")), False),
        ("team-?", None, _gpu(None), False),  # no pod on the GPU: nothing to match
        ("*", "*", _gpu(None, None), False),  # a process in no pod matches no pod glob
    ],
)
def test_namespace_and_pod_globs(
    namespace: str | None, pod: str | None, gpu: GpuSample, matched: bool
) -> None:
    declaration = WorkloadDeclaration(namespace=namespace, pod=pod, model="llama-3.1-8b")
    assert declaration.matches(gpu) is matched


def test_every_key_set_must_match() -> None:
    gpu = _gpu(None, PodRef("team-b", "vllm-0", "c"))
    assert WorkloadDeclaration(pod="vllm-*", gpu_index=0, model="llama-3.1-8b").matches(gpu)
    assert not WorkloadDeclaration(pod="vllm-*", gpu_index=1, model="llama-3.1-8b").matches(gpu)
    assert not WorkloadDeclaration(
        pod="vllm-*", process_name="trainer", model="llama-3.1-8b"
    ).matches(gpu)


def test_demo_declaration_by_pod_reaches_the_shared_gpu() -> None:
    nv, clock = simulated("demo")
    declaration = WorkloadDeclaration(namespace="team-b", pod="vllm-llama-*", model="qwen2.5-7b")
    config = Config(agent=AgentConfig(hostname="h"), workloads=[declaration])
    with kube_node(config, nv, clock, scenario_extras=False) as (agent, _):
        agent.refresh_attribution()
        for _ in range(3):
            clock.advance(1.0)
            snapshot = agent.tick()
    workloads = {v.gpu_index: v.workload for v in snapshot.verdicts}
    assert workloads[3] == "qwen2.5-7b"  # vLLM's pod runs on the time-sliced GPU 3
    assert {i for i, w in workloads.items() if w == "qwen2.5-7b"} == {3}
