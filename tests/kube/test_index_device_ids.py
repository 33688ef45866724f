"""The NVIDIA device plugin's `--device-id-strategy=index`: the simulated kubelet lists the
demo's pods with GPU indexes ("0", "3::1") and the production collector maps them through
NVML's index to the same pods as the UUID forms."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot, PodRef
from gpuwatch.kube.podresources import ContainerAllocation, ContainerDevices, PodAllocation
from gpuwatch.simulate.cluster import SimulatedCluster, device_id
from gpuwatch.simulate.stand_in import SimulatedNvml
from tests.conftest import simulated
from tests.support.kube_node import kube_node, listed_tick


def index_form_pods(nv: SimulatedNvml) -> list[PodAllocation]:
    """The scenario's pods with every device ID in the index strategy's form."""
    pods = []
    for pod in nv.scenario.pods:
        containers = []
        for container in pod.containers:
            ids = tuple(
                device_id(nv.devices, d.model_copy(update={"form": "index"}))
                for d in container.devices
            )
            devices = (ContainerDevices(container.resource, ids),) if ids else ()
            containers.append(ContainerAllocation(container.name, devices))
        pods.append(PodAllocation(pod.namespace, pod.name, tuple(containers)))
    return pods


@pytest.fixture
def demo() -> Iterator[tuple[Agent, ManualClock, SimulatedCluster, SimulatedNvml]]:
    nv, clock = simulated("demo")
    config = Config(agent=AgentConfig(hostname="test-host", per_process_metrics=True))
    with kube_node(config, nv, clock) as (agent, cluster):
        yield agent, clock, cluster, nv


def _holders(snapshot: FleetSnapshot) -> set[tuple[int, str, tuple[str, ...]]]:
    assert snapshot.attribution is not None
    return {
        (a.gpu_index, a.pod.pod, a.device_ids)
        for g in snapshot.attribution.gpus
        for a in g.allocations
    }


def test_index_ids_resolve_to_the_same_pods(
    demo: tuple[Agent, ManualClock, SimulatedCluster, SimulatedNvml],
) -> None:
    agent, clock, cluster, nv = demo
    pods = index_form_pods(nv)
    listed = {i for p in pods for c in p.containers for d in c.devices for i in d.device_ids}
    assert listed == {"0", "1", "2", "3::0", "3::1"}
    by_uuid = listed_tick(agent, clock)
    cluster.kubelet.set_pods(pods)
    by_index = listed_tick(agent, clock)
    assert by_index.attribution is not None
    assert by_index.attribution.unresolved_device_ids == ()
    assert {(g, p) for g, p, _ in _holders(by_index)} == {(g, p) for g, p, _ in _holders(by_uuid)}
    assert (3, "vllm-llama-8b-canary", ("3::1",)) in _holders(by_index)
    gpus = {g.identity.index: g for g in by_index.gpus}
    assert gpus[0].pod == PodRef("team-a", "llama3-sft-0", "trainer")
    assert gpus[3].pod is None  # two replicas held by two pods: no pod wins the GPU
    processes = {p.pid: p.pod for g in by_index.gpus for p in g.processes or ()}
    assert processes[51877] == PodRef("team-b", "vllm-llama-8b-0", "vllm")


def test_an_index_past_the_gpus_is_unresolved(
    demo: tuple[Agent, ManualClock, SimulatedCluster, SimulatedNvml],
) -> None:
    agent, clock, cluster, _ = demo
    ghost = PodAllocation(
        "ns", "ghost", (ContainerAllocation("c", (ContainerDevices("nvidia.com/gpu", ("9",)),)),)
    )
    cluster.kubelet.set_pods([ghost])
    snapshot = listed_tick(agent, clock)
    assert snapshot.attribution is not None
    assert snapshot.attribution.unresolved_device_ids == ("9",)
    assert _holders(snapshot) == set()
