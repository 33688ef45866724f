"""Long replays: `replay` reports its progress and `ProgressLine` shows it on one line."""

from __future__ import annotations

import io
import time

from gpuwatch.agent import Agent, AgentOptions
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.simulate import SimulatedNvml, load_scenario
from gpuwatch.status.local import PROGRESS_EVERY_SECONDS, ProgressLine, replay


def test_replay_reports_its_progress_up_to_one() -> None:
    clock = ManualClock()
    nv = SimulatedNvml(load_scenario("demo"), clock=clock, sleep=lambda s: time.sleep(min(s, 0.01)))
    agent = Agent(Config(agent=AgentConfig(hostname="h")), nv, clock, AgentOptions(environ={}))
    agent.open()
    fractions: list[float] = []
    try:
        replay(agent, clock, 300.0, progress=fractions.append)
    finally:
        agent.stop()
    assert len(fractions) == 300  # one per tick at the default 1 s interval
    assert fractions == sorted(fractions)
    assert fractions[-1] == 1.0


def test_progress_line_rewrites_one_line_at_most_twice_a_second_and_erases_it() -> None:
    now = [0.0]
    out = io.StringIO()
    line = ProgressLine(out, now=lambda: now[0])
    line(0.1)  # too soon: nothing
    assert out.getvalue() == ""
    for step in range(1, 5):
        now[0] = step * PROGRESS_EVERY_SECONDS
        line(step / 4)
    written = out.getvalue()
    assert "\n" not in written
    assert written.count("\r") == 4
    assert written.endswith("replaying 100%")
    line.close()
    assert out.getvalue().endswith("\r\x1b[K")


def test_a_progress_line_never_shown_is_not_erased() -> None:
    out = io.StringIO()
    ProgressLine(out, now=lambda: 0.0).close()
    assert out.getvalue() == ""
