"""The waste analysis on simulated fleets, in simulated time (the agent's real code path)."""

from __future__ import annotations

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.core.verdict import GpuVerdict
from gpuwatch.simulate.services import ScenarioServices
from gpuwatch.workloads import WorkloadDeclaration
from tests.conftest import REPO_ROOT, make_agent, scenario_agent, simulated

START = 1_767_225_600.0


def run_until(agent: Agent, clock: ManualClock, seconds: float, step: float = 1.0) -> FleetSnapshot:
    """Tick every `step` s until `seconds` into the scenario, reading the token sources
    (the scenario's inference servers, when the agent has them) as they are due."""
    agent.tokens.scrape_due(inline=True)
    snapshot = agent.tick()
    while clock.time() - START < seconds:
        clock.advance(step)
        agent.tokens.scrape_due(inline=True)
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
    """The demo declares no workload: GPU 3's need is measured from its vLLM server's KV
    cache use (model from the server's model_name), and judged on it."""
    agent, clock = make_agent("demo", servers=True)
    try:
        early = run_until(agent, clock, 600)
        late = run_until(agent, clock, 1900)
    finally:
        agent.stop()
    assert verdict(early, 3).overprovisioned is None, "not judged before the window"
    assert verdict(early, 3).need_basis == "measured"
    server = verdict(late, 3)
    assert server.need_basis == "measured"
    assert server.workload == "llama-3.1-8b", "from meta-llama/Llama-3.1-8B-Instruct"
    assert server.overprovisioned is True
    assert server.catalog_gpu_id == "H100-SXM-80GB"
    assert server.recommendation is not None
    assert server.recommendation.gpu_id != "H100-SXM-80GB"
    assert server.recommendation.savings_usd_per_hour > 0
    required = dict(server.required_memory_bytes)
    assert "declared" not in required
    assert required["observed"] > 0.85 * 80e9, "vLLM preallocates 90 %"
    weights_and_overhead = 16_060_522_496 + 3_142_612_419
    assert weights_and_overhead < required["measured"] < 0.5 * required["observed"]
    assert required["measured_p95"] <= required["measured"]
    assert required["need"] == int(required["measured"] * 1.1)
    assert server.need_sample_bytes is not None
    assert weights_and_overhead < server.need_sample_bytes <= required["measured"]
    assert verdict(late, 0).overprovisioned is False, "the trainer needs its H100"
    assert verdict(late, 0).need_basis == "observed"


def test_a_declaration_still_wins_over_the_measured_need() -> None:
    nv, clock = simulated("demo", ManualClock(START))
    services = ScenarioServices(nv, clock, cluster=False)
    services.start()
    declared = WorkloadDeclaration(
        gpu_index=3, model="llama-3.1-8b", precision="bf16", context=8192, batch=16
    )
    config = Config(agent=AgentConfig(hostname="test-host"), workloads=[declared])
    agent = scenario_agent(config, nv, clock, services=services)
    try:
        late = run_until(agent, clock, 1900)
    finally:
        agent.stop()
    server = verdict(late, 3)
    assert server.need_basis == "declared"
    required = dict(server.required_memory_bytes)
    assert required["need"] == int(required["declared"] * 1.1)
    assert "measured" in required, "measured all the same, and shown"
    assert server.need_sample_bytes == required["declared"]
    assert server.recommendation is not None
    assert server.theoretical_tokens_per_second is not None, "for a declared workload only"
    assert verdict(late, 3).workload == "llama-3.1-8b"


def test_without_its_server_the_inference_gpu_is_judged_on_observed_memory() -> None:
    agent, clock = make_agent("demo")
    try:
        late = run_until(agent, clock, 1900)
    finally:
        agent.stop()
    server = verdict(late, 3)
    assert server.need_basis == "observed"
    assert server.overprovisioned is False, "90 % of an H100 held: no smaller GPU fits"
    assert server.workload is None


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
