"""Each GPU's cost split among pods: the rule on literals, the exact invariant on every
tick of the demo's simulated node, and pods that leave keep no series."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import (
    Attribution,
    GpuAttribution,
    GpuIdentity,
    GpuSample,
    PodAllocationSample,
    PodRef,
    ProcessSample,
)
from gpuwatch.cost.pods import PodLedger, split_gpu_cost
from tests.conftest import simulated
from tests.support.kube_node import kube_node

A = PodRef("team-a", "train", "c")
B = PodRef("team-b", "serve", "c")
C = PodRef("team-b", "canary", "c")


def _gpu(utilization: float | None, *processes: ProcessSample) -> GpuSample:
    identity = GpuIdentity(0, "GPU-0", "NVIDIA A100-SXM4-80GB", None, "0", None, None, False)
    return GpuSample(identity, True, utilization_ratio=utilization, processes=processes)


def _proc(pid: int, pod: PodRef | None, sm: float | None, memory: int | None) -> ProcessSample:
    return ProcessSample(pid, "python", "compute", memory, sm, pod=pod)


def _holders(*held: tuple[PodRef, int]) -> GpuAttribution:
    allocations = tuple(
        PodAllocationSample(
            0, "GPU-0", None, pod, "nvidia.com/gpu", tuple(f"GPU-0::{i}" for i in range(n)), ()
        )
        for pod, n in held
    )
    return GpuAttribution(0, "GPU-0", allocations)


def _by_pod(split: object) -> dict[str, tuple[float, float]]:
    return {s.pod: (s.busy_cost_usd, s.idle_cost_usd) for s in split.pods}  # type: ignore[attr-defined]


def test_busy_part_by_sm_share_idle_part_by_device_ids_held() -> None:
    gpu = _gpu(0.6, _proc(1, A, 0.45, 10), _proc(2, B, 0.15, 90))
    split = split_gpu_cost(gpu, _holders((A, 1), (B, 1), (C, 2)), 1.0)
    pods = _by_pod(split)
    assert pods["train"] == pytest.approx((0.45, 0.1))  # 0.6 x 3/4; 0.4 x 1/4
    assert pods["serve"] == pytest.approx((0.15, 0.1))
    assert pods["canary"] == pytest.approx((0.0, 0.2))  # holds 2 replicas, runs nothing
    assert split.unattributed_cost_usd == 0.0
    assert split.unallocated_idle_cost_usd == pytest.approx(0.0, abs=1e-14)


def test_memory_share_when_a_process_has_no_sm_figure() -> None:
    gpu = _gpu(0.5, _proc(1, A, None, 30), _proc(2, B, 0.2, 10))
    pods = _by_pod(split_gpu_cost(gpu, _holders((A, 1)), 2.0))
    assert pods["train"] == pytest.approx((0.75, 1.0))
    assert pods["serve"] == pytest.approx((0.25, 0.0))


def test_processes_in_no_pod_and_a_gpu_nobody_holds_charge_no_pod() -> None:
    gpu = _gpu(0.25, _proc(1, None, 0.2, 5))
    split = split_gpu_cost(gpu, None, 4.0)
    assert split.pods == ()
    assert split.unattributed_cost_usd == pytest.approx(1.0)
    assert split.unallocated_idle_cost_usd == pytest.approx(3.0)


def test_without_an_activity_signal_a_running_process_is_busy() -> None:
    split = split_gpu_cost(_gpu(None, _proc(1, A, None, None)), _holders((A, 1)), 1.0)
    assert _by_pod(split)["train"] == pytest.approx((1.0, 0.0))
    idle = split_gpu_cost(_gpu(None), _holders((A, 1)), 1.0)
    assert _by_pod(idle)["train"] == (0.0, 1.0)


def test_parts_sum_to_the_tick_cost_bit_for_bit_in_any_order() -> None:
    rng = random.Random(11)
    pods = [PodRef("ns", f"p{i}", "c") for i in range(6)]
    for _ in range(3000):
        processes = [
            _proc(i, rng.choice([*pods, None]), rng.random(), rng.randrange(1, 1 << 34))
            for i in range(rng.randrange(0, 7))
        ]
        held = [(p, rng.randrange(1, 4)) for p in rng.sample(pods, rng.randrange(0, 4))]
        cost = rng.uniform(0, 50) * 10 ** rng.randrange(-9, 2)
        split = split_gpu_cost(_gpu(rng.random(), *processes), _holders(*held), cost)
        parts = list(split.parts())
        assert all(p >= 0 for p in parts)
        assert sum(parts) == cost
        assert sum(reversed(parts)) == cost
        rng.shuffle(parts)
        assert sum(parts) == cost
        assert math.fsum(parts) == cost


def test_a_pod_that_leaves_keeps_no_totals() -> None:
    ledger = PodLedger()
    gpu = _gpu(0.5, _proc(1, A, 0.5, 1))
    holders = _holders((A, 1), (B, 1))
    present = Attribution(0.0, 2, (holders,))
    ledger.observe([split_gpu_cost(gpu, holders, 1.0)], present)
    assert [p.pod for p in ledger.pods()] == ["train", "serve"]  # by namespace, pod
    gone = _holders((A, 1))
    ledger.observe([split_gpu_cost(gpu, gone, 1.0)], Attribution(1.0, 1, (gone,)))
    pods = ledger.pods()
    assert [p.pod for p in pods] == ["train"]
    assert pods[0].cost_usd_total == pytest.approx(0.75 + 1.0)
    assert pods[0].idle_cost_usd_total == pytest.approx(0.25 + 0.5)
    # a tick whose pod view failed drops nobody and charges no pod
    ledger.observe([], None)
    assert [p.pod for p in ledger.pods()] == ["train"]


@pytest.fixture
def demo() -> Iterator[tuple[Agent, ManualClock]]:
    nv, clock = simulated("demo")
    with kube_node(
        Config(agent=AgentConfig(hostname="test-host")), nv, clock, scenario_extras=False
    ) as (agent, _):
        yield agent, clock


def test_demo_every_tick_splits_each_gpus_cost_exactly(demo: tuple[Agent, ManualClock]) -> None:
    agent, clock = demo
    previous: dict[str, float] = {}
    for tick in range(600):
        if tick % 5 == 0:
            agent.refresh_attribution()
        clock.advance(1.0)
        snapshot = agent.tick()
        costs = {c.uuid: c.cost_usd_total for c in snapshot.cost.gpus}
        assert {s.uuid for s in snapshot.cost.splits} == {g.identity.uuid for g in snapshot.gpus}
        for split in snapshot.cost.splits:
            # the split's tick cost is what the ledger charged the GPU this tick
            charged = costs[split.uuid] - previous.get(split.uuid, 0.0)
            assert split.tick_cost_usd == pytest.approx(charged, rel=1e-9, abs=1e-12)
            assert sum(split.parts()) == split.tick_cost_usd
            assert math.fsum(split.parts()) == split.tick_cost_usd
        previous = costs
    # over the run (no pod left): pods' totals plus each GPU's unattributed part
    pods = sum(p.cost_usd_total for p in snapshot.cost.pods)
    nobody = sum(g.cost_usd_total for g in snapshot.cost.unattributed)
    assert pods + nobody == pytest.approx(sum(costs.values()), rel=1e-12)
    totals = {(p.namespace, p.pod): p for p in snapshot.cost.pods}
    # GPU 1: held by the eval pod that runs nothing: all its cost is the pod's idle cost
    eval_pod = totals["team-b", "batch-eval-7f9c"]
    assert eval_pod.cost_usd_total > 0
    assert eval_pod.idle_cost_usd_total == eval_pod.cost_usd_total
    # GPU 3: vLLM and its canary hold a replica each; only vLLM runs
    vllm, canary = totals["team-b", "vllm-llama-8b-0"], totals["team-b", "vllm-llama-8b-canary"]
    assert canary.cost_usd_total == canary.idle_cost_usd_total > 0
    assert vllm.idle_cost_usd_total == pytest.approx(canary.idle_cost_usd_total, rel=1e-9)
    assert vllm.cost_usd_total > vllm.idle_cost_usd_total
    # the same on /metrics: one series per pod, names as label values
    text = generate_latest(agent.registry).decode()
    exported = {
        (s.name, s.labels["namespace"], s.labels["pod"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name in {"gpuwatch_pod_cost_usd_total", "gpuwatch_pod_idle_cost_usd_total"}
    }
    assert {(ns, pod) for _, ns, pod in exported} == set(totals)
    key = ("gpuwatch_pod_idle_cost_usd_total", "team-b", "batch-eval-7f9c")
    assert exported[key] == pytest.approx(eval_pod.idle_cost_usd_total)
