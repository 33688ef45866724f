"""A wall clock that steps back (NTP, a VM restored from a snapshot) after a restart.

The alert memory then holds alert times later than now; without care `now - alerted_at`
is negative and reminders stay silent for the size of the step plus the cooldown. The
clock here is injected and stepped by hand: nothing sleeps.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwatch.alerts import SlackConfig
from gpuwatch.alerts.dispatcher import AlertDispatcher
from gpuwatch.alerts.policy import AlertMemory, decide
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.slack.outbox import OUTBOX_FILE, Outbox
from tests.alerts.conftest import FAST, HOSTNAME, START, FakeSlack, SleepRecorder, snapshot
from tests.alerts.conftest import verdict as make_verdict

COOLDOWN = 3600.0
STEP = 10 * 3600.0  # the clock goes back ten hours


class SteppingClock:
    """Wall time that can go back (`step_back`), as a real one can; monotonic time never
    does."""

    def __init__(self, start: float) -> None:
        self._now = start
        self._monotonic = 0.0
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
            self._monotonic += seconds

    def step_back(self, seconds: float) -> None:
        with self._lock:
            self._now -= seconds


def _idle_at(now: float, since: float = START) -> FleetSnapshot:
    """GPU 0 idle since `since`, in a snapshot taken at `now` (before `since` too)."""
    return replace(snapshot(ManualClock(), [make_verdict(0, "idle", since)]), timestamp_seconds=now)


def _evaluate(dispatcher: AlertDispatcher, clock: SteppingClock) -> None:
    dispatcher.evaluate(_idle_at(clock.time()))
    dispatcher.deliver_pending()


def test_policy_takes_an_alert_time_in_the_future_as_now() -> None:
    snap = _idle_at(START, START - 600)
    uuid = snap.verdicts[0].uuid
    memory = {uuid: AlertMemory("idle", START + STEP)}
    decision = decide(snap, memory, states=("idle",), cooldown_seconds=COOLDOWN)
    assert decision.events == ()
    assert decision.updates == {uuid: AlertMemory("idle", START)}
    assert decision.clock_went_back_seconds == STEP
    memory = {uuid: AlertMemory("idle", START - 60)}
    fine = decide(snap, memory, states=("idle",), cooldown_seconds=COOLDOWN)
    assert fine.clock_went_back_seconds == 0.0
    assert fine.updates == {}


def test_reminders_resume_a_cooldown_after_the_clock_went_back(
    tmp_path: Path, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    state_dir = tmp_path / "state"
    config = SlackConfig(
        timeout_seconds=FAST.timeout_seconds,
        retry_backoff_seconds=FAST.retry_backoff_seconds,
        retry_backoff_max_seconds=FAST.retry_backoff_max_seconds,
        max_retries=FAST.max_retries,
        cooldown_seconds=COOLDOWN,
        states=["idle"],
    )
    clock = SteppingClock(START + STEP)
    first = AlertDispatcher(config, slack.url, state_dir, clock, HOSTNAME, sleep=SleepRecorder())
    try:
        _evaluate(first, clock)  # the first alert, stamped START + STEP
    finally:
        first.stop()
    assert len(slack.delivered()) == 1

    clock.step_back(STEP)  # restart on a clock ten hours behind
    caplog.set_level(logging.WARNING, logger="gpuwatch.alerts.dispatcher")
    second = AlertDispatcher(config, slack.url, state_dir, clock, HOSTNAME, sleep=SleepRecorder())
    try:
        _evaluate(second, clock)
        steps = [r for r in caplog.records if "clock went back" in r.getMessage()]
        assert len(steps) == 1, caplog.text
        assert "36000 s" in steps[0].getMessage()
        for _ in range(5):  # later evaluations log nothing more
            clock.advance(60.0)
            _evaluate(second, clock)
        assert len([r for r in caplog.records if "clock went back" in r.getMessage()]) == 1
        assert len(slack.delivered()) == 1  # within the cooldown: no reminder yet
        clock.advance(COOLDOWN - 5 * 60.0)  # a cooldown after the restart, not STEP + it
        _evaluate(second, clock)
    finally:
        second.stop()
    posts = slack.delivered()
    assert len(posts) == 2, [p.body["text"] for p in posts]
    assert "(reminder)" in posts[1].body["blocks"][3]["text"]["text"]
    outbox = Outbox(state_dir / OUTBOX_FILE, max_messages=10)
    try:
        (memory,) = outbox.load_memory().values()
    finally:
        outbox.close()
    assert memory.alerted_at_seconds == START + COOLDOWN  # the reminder's time, not the future


def test_a_clock_that_never_goes_back_logs_nothing(
    tmp_path: Path, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    clock = SteppingClock(START)
    caplog.set_level(logging.WARNING, logger="gpuwatch.alerts.dispatcher")
    dispatcher = AlertDispatcher(
        FAST, slack.url, tmp_path / "state", clock, HOSTNAME, sleep=SleepRecorder()
    )
    try:
        for _ in range(3):
            _evaluate(dispatcher, clock)
            clock.advance(60.0)
    finally:
        dispatcher.stop()
    assert "clock went back" not in caplog.text
    assert len(slack.delivered()) == 1
