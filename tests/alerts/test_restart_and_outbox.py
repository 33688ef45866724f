"""In-process agents on the simulated demo fleet posting to the loopback Slack: a restart
never resolves an alert that is still true, and a broken outbox never stops monitoring."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.agent import Agent
from gpuwatch.alerts import SlackConfig
from gpuwatch.alerts.config import AlertsConfig
from gpuwatch.analysis.config import AnalysisConfig
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.slack.outbox import OUTBOX_FILE, Outbox
from tests.alerts.conftest import SECRET_TOKEN, FakeSlack
from tests.conftest import scenario_agent, simulated

WINDOW_SECONDS = 120.0
START = 1_767_225_600.0


def _agent(state_dir: Path, slack: FakeSlack, clock: ManualClock) -> Agent:
    nv, _ = simulated("demo", clock)
    config = Config(
        agent=AgentConfig(hostname="test-host", state_dir=state_dir),
        analysis=AnalysisConfig(window_seconds=WINDOW_SECONDS),
        alerts=AlertsConfig(slack=SlackConfig(timeout_seconds=2.0, cooldown_seconds=86400.0)),
    )
    return scenario_agent(config, nv, clock, environ={"GPUWATCH_SLACK_WEBHOOK_URL": slack.url})


def _run(agent: Agent, clock: ManualClock, seconds: float) -> None:
    """Tick every simulated second, evaluate and deliver every 10."""
    for step in range(int(seconds)):
        clock.advance(1.0)
        agent.tick()
        if step % 10 == 9:
            agent.evaluate_alerts()
            assert agent.alerts is not None
            agent.alerts.deliver_pending()


def _texts(slack: FakeSlack) -> list[str]:
    return [str(post.body.get("text", "")) for post in slack.delivered()]


def test_a_restart_does_not_resolve_an_alert_that_is_still_true(
    slack: FakeSlack, tmp_path: Path
) -> None:
    clock = ManualClock(START)
    state_dir = tmp_path / "state"
    first = _agent(state_dir, slack, clock)
    try:
        _run(first, clock, WINDOW_SECONDS * 2)
    finally:
        first.stop()
    before = _texts(slack)
    assert any("GPU 1 (" in text for text in before), f"the idle GPU 1 was alerted: {before}"
    assert not any("back to work" in text for text in before)

    clock.advance(30.0)  # the agent is down for 30 s
    second = _agent(state_dir, slack, clock)
    try:
        _run(second, clock, WINDOW_SECONDS * 3)  # pending, then the window refills
    finally:
        second.stop()
    after = _texts(slack)[len(before) :]
    assert after == [], f"posted after the restart while nothing changed: {after}"


def _slack_agent_families(agent: Agent) -> dict[str, float]:
    values = {}
    for family in agent.registry.collect():
        for sample in family.samples:
            if not sample.labels:
                values[sample.name] = sample.value
    return values


def test_a_corrupt_outbox_is_moved_aside_and_alerting_goes_on(
    slack: FakeSlack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    garbage = b"this is not an SQLite database\n" * 200
    (state_dir / OUTBOX_FILE).write_bytes(garbage)
    clock = ManualClock(START)
    with caplog.at_level(logging.WARNING):
        agent = _agent(state_dir, slack, clock)
    try:
        aside = sorted(state_dir.glob(f"{OUTBOX_FILE}.corrupt-*"))
        assert [p.name for p in aside] == [f"{OUTBOX_FILE}.corrupt-20260101T000000Z"]
        assert aside[0].read_bytes() == garbage, "moved aside, not deleted or rewritten"
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1
        assert "moved aside" in warnings[0].getMessage()
        _run(agent, clock, WINDOW_SECONDS * 2)
        assert any("GPU 1 (" in text for text in _texts(slack)), "alerting works on"
        assert _slack_agent_families(agent)["gpuwatch_alert_outbox_up"] == 1.0
    finally:
        agent.stop()


def test_a_malformed_database_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / OUTBOX_FILE
    outbox = Outbox(path, max_messages=10, now=lambda: START)
    for n in range(200):

        def build(i: int, n: int = n) -> dict[str, Any]:
            return {"text": f"message {i} {'x' * 500} {n}"}

        outbox.enqueue(build, START, {})
    outbox.close()
    with sqlite3.connect(path) as db:  # fold the WAL into the main file
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    data = bytearray(path.read_bytes())
    page = 4096
    data[page * 2 : page * 6] = b"\xa5" * (page * 4)  # wreck pages 3-6 (btree pages)
    path.write_bytes(bytes(data))
    reopened = Outbox(path, max_messages=10, now=lambda: START + 61.0)
    try:
        assert reopened.moved_aside == tmp_path / f"{OUTBOX_FILE}.corrupt-20260101T000101Z"
        assert reopened.moved_aside.read_bytes() == bytes(data)
        assert reopened.pending_count == 0
    finally:
        reopened.close()


def test_an_unusable_outbox_turns_alerting_off_not_monitoring(
    slack: FakeSlack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state_dir = tmp_path / "state"
    (state_dir / OUTBOX_FILE).mkdir(parents=True)  # a directory where the file should be
    clock = ManualClock(START)
    with caplog.at_level(logging.WARNING):
        agent = _agent(state_dir, slack, clock)
    try:
        assert agent.alerts is None
        errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(errors) == 1
        assert "Slack alerting is off" in errors[0].getMessage()
        assert SECRET_TOKEN not in caplog.text
        for _ in range(5):
            clock.advance(1.0)
            agent.tick()
        values = _slack_agent_families(agent)
        assert values["gpuwatch_alert_outbox_up"] == 0.0
        assert agent.readiness()[0], "the agent samples and serves on"
        assert (state_dir / OUTBOX_FILE).is_dir(), "nothing of the user's is removed"
    finally:
        agent.stop()
