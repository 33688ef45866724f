"""`gpuwatch status --simulate` shows what a running agent would serve at that time.

The agent here runs its own schedule on a manual clock (a tick every
`agent.interval_seconds`, the slow job every `agent.slow_interval_seconds`, as
`Agent.start` schedules them) on a stand-in that computes process utilization period
by period, by its definition; the replay runs with the simulation's shortcuts (runs of
identical periods added up at once). Their status documents must be the same.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.export.status_json import encode, status_document
from gpuwatch.simulate import SimulatedNvml, load_scenario
from gpuwatch.simulate.stand_in import process_calls
from gpuwatch.status.local import replay, replay_step
from tests.conftest import scenario_agent
from tests.simulate.helpers import process_utilization_one_by_one


def _served(scenario: str, at: float, config: Config) -> Any:
    """The agent's own /status.json after running `at` simulated seconds."""
    clock = ManualClock()
    start = clock.time()
    nv = SimulatedNvml(
        load_scenario(scenario), clock=clock, sleep=lambda s: time.sleep(min(s, 0.01))
    )
    agent = scenario_agent(config, nv, clock)
    interval = config.agent.interval_seconds
    slow = config.agent.slow_interval_seconds
    try:
        agent.tick()
        next_slow = slow
        for k in range(1, round(at / interval) + 1):
            clock.set(start + k * interval)
            if k * interval >= next_slow:
                agent.nvml.collect_slow()
                next_slow += slow
            agent.tick()
        body = agent.status_body(local_client=True)
    finally:
        agent.stop()
    assert body is not None
    return json.loads(body)


def _replayed(scenario: str, at: float, config: Config) -> Any:
    clock = ManualClock()
    nv = SimulatedNvml(
        load_scenario(scenario), clock=clock, sleep=lambda s: time.sleep(min(s, 0.01))
    )
    agent = scenario_agent(config, nv, clock)
    try:
        snapshot = replay(agent, clock, at)
    finally:
        agent.stop()
    return json.loads(encode(status_document(snapshot, source="simulation")))


@pytest.mark.parametrize(
    ("at", "interval", "slow"),
    [
        (2000.0, 1.0, 15.0),  # the README's example: one tick a second
        (7200.0, 30.0, 30.0),  # 30 s ticks: each process-utilization read spans 30 periods
    ],
)
def test_the_replay_shows_what_the_agent_serves(
    monkeypatch: pytest.MonkeyPatch, at: float, interval: float, slow: float
) -> None:
    config = Config(
        agent=AgentConfig(hostname="h", interval_seconds=interval, slow_interval_seconds=slow)
    )
    assert replay_step(at, interval) == interval  # the replay ticks as the agent does
    replayed = _replayed("demo", at, config)
    monkeypatch.setattr(process_calls, "process_utilization_since", process_utilization_one_by_one)
    served = _served("demo", at, config)
    assert served.pop("source") == "agent"
    assert replayed.pop("source") == "simulation"
    assert replayed == served
    states = [gpu["verdict"]["state"] for gpu in served["gpus"]]
    assert "pending" not in states  # past the first window: the states are the analysis's
