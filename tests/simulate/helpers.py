"""Shared helpers for the stand-in tests: a fresh SimulatedNvml on a manual clock."""

from __future__ import annotations

from pathlib import Path

from gpuwatch.clock import ManualClock
from gpuwatch.simulate import SimulatedNvml, load_scenario


class Sleeps:
    """An injected `sleep` that records and advances the manual clock instead of waiting."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        self.clock.advance(seconds)


def start(scenario: str | Path, *, init: bool = True) -> tuple[SimulatedNvml, ManualClock, Sleeps]:
    """A stand-in for `scenario` at scenario time 0, initialised unless `init` is False."""
    clock = ManualClock()
    sleeps = Sleeps(clock)
    nv = SimulatedNvml(load_scenario(scenario), clock=clock, sleep=sleeps)
    if init:
        nv.nvmlInit()
    return nv, clock, sleeps


def go_to(nv: SimulatedNvml, clock: ManualClock, t: float) -> None:
    """Advance the clock to scenario time `t` (seconds)."""
    clock.advance(t - nv.scenario_time())
