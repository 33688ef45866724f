"""Windowed busy ratios and idle cost against the demo scenario's own timeline.

The agent runs the demo on the simulated fleet (the real sampler, analysis and ledger)
for three hours of simulated time. The truth is computed here, independently, from the
scenario file's activity timelines: a tick's seconds are busy when the GPU was active,
idle or held when they belong to an inactive spell that lasted the whole window, busy
when they belong to a shorter spell that ended (a pause), and in no class yet when the
spell is still open. At several moments the 1 h, 24 h and 30 d windows the agent reports
must hold exactly the truth's seconds for the span they say they cover.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.cost.ledger import RESOLUTION_SECONDS
from gpuwatch.simulate import load_scenario
from gpuwatch.simulate.timeline import Timeline
from tests.conftest import make_agent

STEP = 10.0
WINDOW = 1800.0  # the analysis window (default)
NOISE_FLOOR = 0.01
PRICE_USD_PER_SECOND = 6.88 / 3600  # the demo's static price
CHECK_AT = (2700.0, 3600.0, 4500.0, 5400.0, 7200.0, 9000.0, 10800.0)  # some in a pause


@dataclass
class Tick:
    t: float  # seconds since the start
    seconds: float
    active: bool
    time_class: str | None = None


def truth(ticks: list[Tick], held: bool) -> None:
    """Class every tick by the rule in docs/analysis.md, straight from the timeline."""
    flagged = "held" if held else "idle"
    spell: list[Tick] = []
    for tick in ticks:
        if tick.active:
            for paused in spell:  # a spell that ended before the window: a pause
                paused.time_class = paused.time_class or "busy"
            spell = []
            tick.time_class = "busy"
        else:
            spell.append(tick)
            if sum(s.seconds for s in spell) >= WINDOW:
                for idle in spell:
                    idle.time_class = flagged


def test_windows_hold_exactly_the_timelines_busy_and_idle_seconds() -> None:
    scenario = load_scenario("demo")
    # the levels' on/off shape does not depend on the seed
    timelines = [Timeline(gpu.activity, seed=0) for gpu in scenario.gpus]
    agent, clock = make_agent("demo")
    start = clock.time()
    snapshots: dict[float, FleetSnapshot] = {}
    try:
        agent.tick()
        elapsed = 0.0
        while elapsed < max(CHECK_AT):
            clock.advance(STEP)
            elapsed = clock.time() - start
            snapshot = agent.tick()
            if elapsed in CHECK_AT:
                snapshots[elapsed] = snapshot
    finally:
        agent.stop()

    for now, snapshot in snapshots.items():
        judged = busy = 0.0
        for index, timeline in enumerate(timelines):
            # the tick at t covers (t - STEP, t]: the GPU's activity in the middle of it
            ticks = [Tick(0.0, 0.0, active=False)] + [
                Tick(k * STEP, STEP, timeline.at(k * STEP - STEP / 2).sm >= NOISE_FLOOR)
                for k in range(1, int(now / STEP) + 1)
            ]
            truth(ticks, held=bool(scenario.gpus[index].processes))
            cost = next(c for c in snapshot.cost.gpus if c.gpu_index == index)
            for window in cost.windows:
                lo, hi = window.start_seconds - start, window.end_seconds - start
                inside = [tk for tk in ticks if lo < tk.t <= hi]
                assert all(tk.time_class is not None for tk in inside), "only settled time"
                expected = {
                    name: sum(tk.seconds for tk in inside if tk.time_class == name)
                    for name in ("busy", "idle", "held")
                }
                got = {
                    "busy": window.busy_seconds,
                    "idle": window.idle_seconds,
                    "held": window.held_seconds,
                }
                assert got == pytest.approx(expected, abs=1e-6), (now, index, window.window)
                assert window.idle_cost_usd == pytest.approx(
                    (expected["idle"] + expected["held"]) * PRICE_USD_PER_SECOND
                )
                seconds = dict(WINDOWS)[window.window]
                assert lo >= now - seconds, "nothing from before the window"
                step = RESOLUTION_SECONDS[window.window]
                assert lo <= max(now - seconds, 0.0) + step, "the window is not cut short"
                unsettled = [tk for tk in ticks if tk.t > hi]
                assert all(tk.time_class is None for tk in unsettled), "settled time is booked"
                if window.window == "1h":
                    judged += sum(expected.values())
                    busy += expected["busy"]
        host = dict(snapshot.cost.utilization_busy)
        assert host["1h"] == pytest.approx(busy / judged), now
        pausing = (now - STEP / 2 - 1080.0) % 1200.0 < 120.0  # GPU 0's data-loading pause
        if not pausing:  # GPUs 0 and 3 work, 1 is idle, 2 is held: one half
            assert host["1h"] == pytest.approx(0.5), now
        assert set(host) == {"1h", "24h", "30d"}


WINDOWS = (("1h", 3600.0), ("24h", 86400.0), ("30d", 30 * 86400.0))
