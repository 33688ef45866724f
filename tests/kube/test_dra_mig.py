"""MIG devices allocated through DRA on a simulated node, end to end: the stand-in's
GPU instances answer `nvmlGpuInstanceGetInfo` (profile ID, placement), the sampler reads
them, the simulated kubelet names the devices as NVIDIA's driver does
(`gpu-<minor>-mig-<profile>-<GI profile ID>-<placement start>`) and the production
collector attributes each to its MIG device, the shared one to both pods."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.simulate.scenario import load_scenario
from gpuwatch.simulate.stand_in import SimulatedNvml
from tests.support.kube_node import kube_node, listed_tick

SCENARIO = """
name = "dra-mig"

[[gpus]]
preset = "h100-sxm"

[[gpus]]
preset = "h100-sxm"
[[gpus.mig]]
profile = "1g.10gb"
gpu_instance_id = 9
[gpus.mig.activity]
levels = { util = 0.9, sm = 0.7 }
[[gpus.mig.processes]]
pid = 700
name = "python3 serve.py"
memory = "6 GiB"
[[gpus.mig]]
profile = "3g.40gb"
gpu_instance_id = 2
[[gpus.mig]]
profile = "1g.10gb"
gpu_instance_id = 13

[[pods]]
namespace = "ml"
name = "server"
[[pods.containers]]
name = "serve"
devices = [{ gpu = 1, mig = 0, form = "dra", claim = "server-mig" }]
pids = [700]

[[pods]]
namespace = "ml"
name = "trainer"
[[pods.containers]]
name = "train"
devices = [
    { gpu = 1, mig = 1, form = "dra", claim = "trainer-3g" },
    { gpu = 0, form = "dra", claim = "trainer-3g" },
]

[[pods]]
namespace = "ml"
name = "sidecar"
[[pods.containers]]
name = "probe"
devices = [{ gpu = 1, mig = 0, form = "dra", claim = "server-mig" }]
"""


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Agent, ManualClock, SimulatedNvml]]:
    path = tmp_path / "dra-mig.toml"
    path.write_text(SCENARIO, "utf-8")
    clock = ManualClock()
    nv = SimulatedNvml(load_scenario(path), clock=clock, sleep=lambda _s: None)
    with kube_node(Config(agent=AgentConfig(hostname="test-host")), nv, clock) as (agent, _):
        yield agent, clock, nv


def test_the_stand_in_answers_the_gpu_instances_info(
    node: tuple[Agent, ManualClock, SimulatedNvml],
) -> None:
    _, _, nv = node
    nv.nvmlInit()
    try:
        gpu = nv.nvmlDeviceGetHandleByIndex(1)
        infos = [
            nv.nvmlGpuInstanceGetInfo(nv.nvmlDeviceGetGpuInstanceById(gpu, i)) for i in (9, 2, 13)
        ]
        assert [(i.id, i.profileId, i.placement.start) for i in infos] == [
            (9, 19, 0),
            (2, 9, 1),  # a 3g.40gb takes four memory slices: the next one starts at 5
            (13, 19, 5),
        ]
        with pytest.raises(nv.NVMLError_NotFound):
            nv.nvmlDeviceGetGpuInstanceById(gpu, 4)
        with pytest.raises(nv.NVMLError_NotSupported):
            nv.nvmlDeviceGetGpuInstanceById(nv.nvmlDeviceGetHandleByIndex(0), 9)
    finally:
        nv.nvmlShutdown()


def _pod_info(agent: Agent) -> list[tuple[str, str, str]]:
    """(gpu, pod, claim) of each `gpuwatch_gpu_pod_info` series, sorted."""
    text = generate_latest(agent.registry).decode()
    return sorted(
        (s.labels["gpu"], s.labels["pod"], s.labels["claim"])
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "gpuwatch_gpu_pod_info"
    )


def test_mig_devices_held_through_claims(node: tuple[Agent, ManualClock, SimulatedNvml]) -> None:
    agent, clock, _ = node
    snapshot = listed_tick(agent, clock)
    assert snapshot.attribution is not None
    assert snapshot.attribution.dra_unresolved == ()
    migs = {m.gpu_instance_id: m for g in snapshot.gpus for m in g.mig_instances}
    assert {gi: (m.gpu_instance_profile_id, m.placement_start) for gi, m in migs.items()} == {
        9: (19, 0),
        2: (9, 1),
        13: (19, 5),
    }
    holds = {
        (a.gpu_index, a.mig_uuid, a.pod.pod, a.claim, a.device_ids, a.allocated_idle)
        for g in snapshot.attribution.gpus
        for a in g.allocations
    }
    pool = "dra-mig-node"
    assert holds == {
        (0, None, "trainer", "trainer-3g", (f"{pool}/gpu-1",), True),
        (1, migs[2].uuid, "trainer", "trainer-3g", (f"{pool}/gpu-0-mig-3g40gb-9-1",), True),
        (1, migs[9].uuid, "server", "server-mig", (f"{pool}/gpu-0-mig-1g10gb-19-0",), False),
        (1, migs[9].uuid, "sidecar", "server-mig", (f"{pool}/gpu-0-mig-1g10gb-19-0",), True),
    }
    assert _pod_info(agent) == [
        ("0", "trainer", "trainer-3g"),
        ("1", "server", "server-mig"),
        ("1", "sidecar", "server-mig"),
        ("1", "trainer", "trainer-3g"),
    ]
