"""The production attribution collector end to end on the demo's simulated node: a real
kubelet gRPC socket, cgroup files, pod-log folders, the stand-in's processes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config, ExporterConfig
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import PodRef
from gpuwatch.simulate.cluster import SimulatedCluster
from tests.conftest import REPO_ROOT, require_binary, simulated
from tests.support.kube_node import kube_node, listed_tick

DEMO_TOML = REPO_ROOT / "src" / "gpuwatch" / "simulate" / "scenarios" / "demo.toml"


@pytest.fixture
def demo() -> Iterator[tuple[Agent, ManualClock, SimulatedCluster]]:
    nv, clock = simulated("demo")
    config = Config(
        agent=AgentConfig(hostname="test-host", per_process_metrics=True),
        exporter=ExporterConfig(dcgm_compat=True),
    )
    with kube_node(config, nv, clock, scenario_extras=False) as (agent, cluster):
        yield agent, clock, cluster


def _samples(agent: Agent, name: str) -> list[dict[str, str]]:
    text = generate_latest(agent.registry).decode()
    return [
        {**s.labels, "value": str(s.value)}
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    ]


def test_demo_pods_on_gpus_and_processes(
    demo: tuple[Agent, ManualClock, SimulatedCluster],
) -> None:
    agent, clock, _ = demo
    snapshot = listed_tick(agent, clock)
    by_index = {g.identity.index: g for g in snapshot.gpus}
    # one holder of a whole GPU: the GPU carries it; a shared GPU carries none
    assert by_index[0].pod == PodRef("team-a", "llama3-sft-0", "trainer")
    assert by_index[1].pod == PodRef("team-b", "batch-eval-7f9c", "eval")  # GKE nvidia<minor>
    assert by_index[2].pod == PodRef("team-a", "notebook-alice", "jupyter")
    assert by_index[3].pod is None
    # processes: systemd v2, cgroupfs v1, a cgroup namespace's relative path
    pods = {p.pid: p.pod for g in snapshot.gpus for p in g.processes or ()}
    assert pods == {
        48213: PodRef("team-a", "llama3-sft-0", "trainer"),
        30517: PodRef("team-a", "notebook-alice", "jupyter"),
        51877: PodRef("team-b", "vllm-llama-8b-0", "vllm"),
    }
    assert snapshot.attribution is not None
    idle = {
        (a.pod.pod, a.gpu_index)
        for g in snapshot.attribution.gpus
        for a in g.allocations
        if a.allocated_idle
    }
    assert idle == {("batch-eval-7f9c", 1), ("vllm-llama-8b-canary", 3)}
    assert snapshot.attribution.unresolved_device_ids == ()


def test_exported_without_double_counting(
    demo: tuple[Agent, ManualClock, SimulatedCluster],
) -> None:
    agent, clock, _ = demo
    listed_tick(agent, clock)
    info = _samples(agent, "gpuwatch_gpu_pod_info")
    assert sorted((s["gpu"], s["namespace"], s["pod"]) for s in info) == [
        ("0", "team-a", "llama3-sft-0"),
        ("1", "team-b", "batch-eval-7f9c"),
        ("2", "team-a", "notebook-alice"),
        ("3", "team-b", "vllm-llama-8b-0"),
        ("3", "team-b", "vllm-llama-8b-canary"),
    ]
    # every DCGM family has exactly one series per GPU, whoever holds it; the two that
    # OpenCost reads per container add one per container on the shared GPU 3
    for name in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED"):
        series = [s for s in _samples(agent, name) if s["gpu"] != "3" or s["pod"] == ""]
        assert sorted(s["gpu"] for s in series) == ["0", "1", "2", "3"]
        by_gpu = {s["gpu"]: s for s in series}
        assert by_gpu["0"]["pod"] == "llama3-sft-0"
        assert by_gpu["3"]["pod"] == ""
    shared = [s["pod"] for s in _samples(agent, "DCGM_FI_PROF_GR_ENGINE_ACTIVE") if s["gpu"] == "3"]
    assert shared == ["", "vllm-llama-8b-0", "vllm-llama-8b-canary"]
    assert [s["pod"] for s in _samples(agent, "DCGM_FI_DEV_FB_USED") if s["gpu"] == "3"] == [""]
    idle = {s["pod"]: s["value"] for s in _samples(agent, "gpuwatch_gpu_pod_allocated_idle")}
    assert idle == {
        "llama3-sft-0": "0.0",
        "batch-eval-7f9c": "1.0",
        "notebook-alice": "0.0",
        "vllm-llama-8b-0": "0.0",
        "vllm-llama-8b-canary": "1.0",
    }
    success = {s["collector"]: s["value"] for s in _samples(agent, "gpuwatch_collector_success")}
    assert success["attribution"] == "1.0"


def test_pod_gone_is_gone_and_kubelet_down_is_a_metric(
    demo: tuple[Agent, ManualClock, SimulatedCluster],
) -> None:
    agent, clock, cluster = demo
    listed_tick(agent, clock)
    cluster.kubelet.set_pods([])
    snapshot = listed_tick(agent, clock)
    assert all(g.pod is None for g in snapshot.gpus)
    assert _samples(agent, "gpuwatch_gpu_pod_info") == []
    cluster.kubelet.stop()
    agent.refresh_attribution()
    clock.advance(1.0)
    agent.tick()
    success = {s["collector"]: s["value"] for s in _samples(agent, "gpuwatch_collector_success")}
    assert success["attribution"] == "0.0"
    assert success["nvml"] == "1.0"


def test_a_listing_too_old_is_kept_marked_stale(
    demo: tuple[Agent, ManualClock, SimulatedCluster],
) -> None:
    """The kubelet restarting keeps the holds (and the alerts on them) until it answers
    with a listing that drops them."""
    agent, clock, cluster = demo
    fresh = listed_tick(agent, clock)
    holders = _samples(agent, "gpuwatch_gpu_pod_info")
    assert fresh.attribution is not None
    assert fresh.attribution.fresh
    cluster.kubelet.stop()
    clock.advance(3 * 5.0 + 1.0)
    agent.refresh_attribution()  # fails: the socket is gone
    snapshot = agent.tick()
    assert snapshot.attribution is not None
    assert snapshot.attribution.stale
    assert snapshot.attribution.pods_listed == 5
    assert [g.pod for g in snapshot.gpus] == [g.pod for g in fresh.gpus]
    assert _samples(agent, "gpuwatch_gpu_pod_info") == holders
    idle = {s["pod"]: s["value"] for s in _samples(agent, "gpuwatch_gpu_pod_allocated_idle")}
    assert idle["batch-eval-7f9c"] == "1.0"
    assert _samples(agent, "gpuwatch_attribution_stale")[0]["value"] == "1.0"
    cluster.kubelet.set_pods([])
    cluster.kubelet.start()
    listed_tick(agent, clock)
    assert _samples(agent, "gpuwatch_gpu_pod_info") == []
    assert _samples(agent, "gpuwatch_attribution_stale")[0]["value"] == "0.0"


def _demo_without_host_proc(tmp_path: Path) -> Path:
    """The demo scenario with the chart's container view without the host's /proc."""
    text = DEMO_TOML.read_text(encoding="utf-8")
    path = tmp_path / "demo-no-host-proc.toml"
    path.write_text(text + "\n[kubernetes]\nhost_proc = false\n", encoding="utf-8")
    return path


def test_without_the_host_proc_no_busy_pod_is_allocated_idle(tmp_path: Path) -> None:
    """NVML's PIDs are not in the agent's /proc: no process joins a pod, and a hold whose
    GPU runs processes is unknown (with its reason), never allocated-idle; the trainer
    that holds GPU 0 alone and keeps it busy is not idle; GPU 1, with no process at all,
    is allocated-idle for sure."""
    nv, clock = simulated(str(_demo_without_host_proc(tmp_path)))
    config = Config(agent=AgentConfig(hostname="test-host", per_process_metrics=True))
    with kube_node(config, nv, clock, scenario_extras=False) as (agent, _):
        for _ in range(3):
            snapshot = listed_tick(agent, clock)
        idle = {s["pod"]: s["value"] for s in _samples(agent, "gpuwatch_gpu_pod_allocated_idle")}
        unknown = {
            s["pod"]: s["reason"]
            for s in _samples(agent, "gpuwatch_gpu_pod_allocated_idle_unknown")
        }
        unmapped = {
            s["gpu"]: s["value"] for s in _samples(agent, "gpuwatch_gpu_unmapped_processes")
        }
    assert all(p.pod is None for g in snapshot.gpus for p in g.processes or ())
    busy = {g.identity.index for g in snapshot.gpus if (g.sm_active_ratio or 0.0) > 0.01}
    assert busy == {0, 3}
    assert idle == {"llama3-sft-0": "0.0", "batch-eval-7f9c": "1.0"}
    assert unknown == {
        "notebook-alice": "pid_unmapped",
        "vllm-llama-8b-0": "pid_unmapped",
        "vllm-llama-8b-canary": "pid_unmapped",
    }
    assert unmapped == {"0": "1.0", "1": "0.0", "2": "1.0", "3": "1.0"}


def test_attribution_families_pass_promtool(
    demo: tuple[Agent, ManualClock, SimulatedCluster],
) -> None:
    agent, clock, _ = demo
    listed_tick(agent, clock)
    text = generate_latest(agent.registry).decode()
    text = text[: text.index("# HELP DCGM_")]
    result = subprocess.run(
        [require_binary("promtool"), "check", "metrics"],
        input=text.encode(),
        capture_output=True,
        check=False,
    )
    assert (result.stdout + result.stderr).decode().splitlines() == []
    assert result.returncode == 0


MIG_NO_HOST_PROC = """
name = "mig-no-host-proc"
[[gpus]]
preset = "h100-sxm"
[[gpus.mig]]
profile = "3g.40gb"
gpu_instance_id = 1
[gpus.mig.activity]
levels = { util = 0.9, sm = 0.7 }
[[gpus.mig.processes]]
pid = 101
name = "python3 train.py"
memory = "20 GiB"
[[gpus.mig]]
profile = "2g.20gb"
gpu_instance_id = 2
[[gpus.mig]]
profile = "1g.10gb"
gpu_instance_id = 3
[[gpus.mig.processes]]
pid = 103
name = "python3 notebook.py"
memory = "5 GiB"
share = 0.0

[[pods]]
namespace = "ml"
name = "train-0"
[[pods.containers]]
name = "trainer"
resource = "nvidia.com/mig-3g.40gb"
devices = [{ gpu = 0, mig = 0 }]
pids = [101]

[[pods]]
namespace = "ml"
name = "spare-0"
[[pods.containers]]
name = "spare"
resource = "nvidia.com/mig-2g.20gb"
devices = [{ gpu = 0, mig = 1 }]

[[pods]]
namespace = "ml"
name = "notebook-0"
[[pods.containers]]
name = "jupyter"
resource = "nvidia.com/mig-1g.10gb"
devices = [{ gpu = 0, mig = 2 }]
pids = [103]

[kubernetes]
host_proc = false
"""


def test_mig_devices_without_the_host_proc(tmp_path: Path) -> None:
    """Per MIG device: the lone holder of a working instance is not idle, an instance with
    no process is allocated-idle, one whose process cannot be mapped and that does not
    work is unknown; an unmapped process on one instance leaves the others known."""
    scenario = tmp_path / "mig.toml"
    scenario.write_text(MIG_NO_HOST_PROC, encoding="utf-8")
    nv, clock = simulated(str(scenario))
    with kube_node(Config(), nv, clock, scenario_extras=False) as (agent, _):
        for _ in range(3):
            snapshot = listed_tick(agent, clock)
    assert snapshot.attribution is not None
    holds = {
        a.pod.pod: (a.allocated_idle, a.unknown_reason)
        for g in snapshot.attribution.gpus
        for a in g.allocations
    }
    assert holds == {
        "train-0": (False, "pid_unmapped"),
        "spare-0": (True, None),
        "notebook-0": (None, "pid_unmapped"),
    }


def test_a_gpu_without_a_process_list_leaves_its_holders_unknown(
    demo: tuple[Agent, ManualClock, SimulatedCluster],
) -> None:
    """NVML lists no processes (NotSupported, a failed call): no holder is allocated-idle
    on a guess; the trainer, alone on its busy GPU, is still not idle."""
    agent, clock, _ = demo
    listed_tick(agent, clock)
    assert agent.attribution is not None
    gpus, _ = agent.nvml.collect()
    _, attribution, _ = agent.attribution.attribute(tuple(replace(g, processes=None) for g in gpus))
    holds = {a.pod.pod: a.allocated_idle for g in attribution.gpus for a in g.allocations}
    assert holds == {
        "llama3-sft-0": False,
        "batch-eval-7f9c": None,
        "notebook-alice": None,
        "vllm-llama-8b-0": None,
        "vllm-llama-8b-canary": None,
    }
    reasons = {a.unknown_reason for g in attribution.gpus for a in g.allocations}
    assert reasons == {"no_process_list"}
