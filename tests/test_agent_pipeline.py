"""The agent's tick as a table of stages: one read of the token sources, every family
from the tick, the alert cost hook on the snapshot it is given."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric

from gpuwatch.agent.wiring import alert_costs
from gpuwatch.tokens.collector import TokenReading
from tests.conftest import make_agent


def test_the_stages_run_in_their_phases_order() -> None:
    agent, _ = make_agent("demo")
    try:
        phases = [stage.phase for stage in agent.pipeline.stages]
        names = [stage.name for stage in agent.pipeline.stages]
    finally:
        agent.stop()
    order = ["sources", "attribution", "analysis", "cost", "consumers"]
    assert phases == sorted(phases, key=order.index)
    assert names[0] == "nvml"
    assert names[-1] == "publish"


def test_token_readings_are_read_once_a_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    agent, clock = make_agent("demo", servers=True)
    calls = []
    readings = agent.tokens.readings

    def counted() -> tuple[TokenReading, ...]:
        calls.append(1)
        return readings()

    monkeypatch.setattr(agent.tokens, "readings", counted)
    try:
        agent.tokens.scrape_due(inline=True)
        clock.advance(1.0)
        agent.tick()
    finally:
        agent.stop()
    assert len(calls) == 1


def test_a_scrape_reads_the_tick_and_nothing_live(monkeypatch: pytest.MonkeyPatch) -> None:
    agent, clock = make_agent("demo", servers=True)
    try:
        agent.tokens.scrape_due(inline=True)
        clock.advance(1.0)
        agent.tick()
        before = generate_latest(agent.registry)

        def live() -> Iterator[Metric]:
            raise AssertionError("a scrape rendered a live object")

        monkeypatch.setattr(agent.tokens, "families", live)
        monkeypatch.setattr(agent.needs, "families", live)
        assert generate_latest(agent.registry) == before
    finally:
        agent.stop()
    assert b"gpuwatch_token_source_up" in before


def test_alert_costs_come_from_the_snapshot_given() -> None:
    agent, clock = make_agent("demo")
    try:
        for _ in range(60):
            clock.advance(1.0)
            snapshot = agent.tick()
    finally:
        agent.stop()
    priced = next(c for c in snapshot.cost.gpus if c.price is not None)
    verdict = next(v for v in snapshot.verdicts if v.uuid == priced.uuid)
    assert priced.price is not None
    later = replace(snapshot, timestamp_seconds=verdict.state_since_seconds + 3600.0)
    cost, price = alert_costs(later, priced.uuid)
    assert price == priced.price.usd_per_hour
    assert cost == pytest.approx(priced.price.usd_per_hour)
    assert alert_costs(snapshot, "GPU-not-here") == (None, None)
