"""The waste analysis on simulated fleets, in simulated time (the agent's real code path)."""

from __future__ import annotations

from gpuwatch.agent import Agent
from gpuwatch.clock import ManualClock
from gpuwatch.snapshot import FleetSnapshot, GpuVerdict
from tests.conftest import REPO_ROOT, make_agent

START = 1_767_225_600.0


def run_until(agent: Agent, clock: ManualClock, seconds: float, step: float = 1.0) -> FleetSnapshot:
    snapshot = agent.tick()
    while clock.time() - START < seconds:
        clock.advance(step)
        snapshot = agent.tick()
    return snapshot


def verdict(snapshot: FleetSnapshot, gpu: int) -> GpuVerdict:
    return next(v for v in snapshot.verdicts if v.gpu_index == gpu)


def test_idle_and_held_are_flagged_after_the_window_and_not_before() -> None:
    agent, clock = make_agent("demo")
    try:
        before = run_until(agent, clock, 1790)
        after = run_until(agent, clock, 1810)
    finally:
        agent.stop()
    assert {v.state for v in before.verdicts} == {"pending"}, "no evidence yet, for any GPU"
    assert verdict(before, 1).inactive_seconds == 1790, "how long it has looked idle so far"
    assert verdict(before, 0).inactive_seconds == 0
    assert verdict(after, 1).state == "idle"
    assert verdict(after, 2).state == "held"
    assert verdict(after, 1).state_since_seconds == START, "idle since its first sample"
    assert verdict(after, 1).idle_seconds_total == 1810


def test_training_gpu_with_data_loading_pauses_is_never_flagged() -> None:
    agent, clock = make_agent("demo")
    states = []
    try:
        agent.tick()
        for _ in range(2 * 3600):  # two hours: six 2-minute pauses
            clock.advance(1.0)
            states.append(verdict(agent.tick(), 0).state)
    finally:
        agent.stop()
    assert set(states[:1799]) == {"pending"}
    assert set(states[1799:]) == {"busy"}


def test_inference_server_is_overprovisioned_with_a_cheaper_recommendation() -> None:
    agent, clock = make_agent("demo")
    try:
        early = run_until(agent, clock, 600)
        late = run_until(agent, clock, 1900)
    finally:
        agent.stop()
    assert verdict(early, 3).overprovisioned is None, "not judged before the window"
    server = verdict(late, 3)
    assert server.workload == "llama-3.1-8b"
    assert server.overprovisioned is True
    assert server.catalog_gpu_id == "H100-SXM-80GB"
    assert server.recommendation is not None
    assert server.recommendation.gpu_id != "H100-SXM-80GB"
    assert server.recommendation.savings_usd_per_hour > 0
    required = dict(server.required_memory_bytes)
    assert required["observed"] > 0.85 * 80e9, "vLLM preallocates 90 %"
    assert required["declared"] < 0.5 * required["observed"], "the model needs far less"
    assert verdict(late, 0).overprovisioned is False, "the trainer needs its H100"


def test_a_gpu_that_wakes_up_resolves() -> None:
    agent, clock = make_agent(str(REPO_ROOT / "tests" / "scenarios" / "wake.toml"))
    try:
        idle = run_until(agent, clock, 2300)
        woken = run_until(agent, clock, 2480)
    finally:
        agent.stop()
    assert verdict(idle, 0).state == "idle"
    assert verdict(woken, 0).state == "busy"
    assert verdict(woken, 0).state_since_seconds > START + 2400
