"""Shared helpers for the stand-in tests: a fresh SimulatedNvml on a manual clock."""

from __future__ import annotations

import math
from pathlib import Path

from gpuwatch.core.clock import ManualClock
from gpuwatch.simulate import SimulatedNvml, load_scenario
from gpuwatch.simulate.processes import (
    PROCESS_SAMPLE_BUFFER,
    PROCESS_SAMPLE_PERIOD_S,
    ProcessUtilization,
    SimProcess,
    process_utilization,
)
from gpuwatch.simulate.timeline import ActivitySource


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


def process_utilization_one_by_one(
    processes: tuple[SimProcess, ...], source: ActivitySource, first: int, now: float
) -> list[ProcessUtilization]:
    """`process_utilization_since` by its definition: every period averaged on its own,
    then summed (the simulation adds up runs of identical periods at once)."""
    newest = math.floor(now / PROCESS_SAMPLE_PERIOD_S)
    first = max(first, 1, newest - PROCESS_SAMPLE_BUFFER + 1)
    periods = newest - first + 1
    if periods <= 0:
        return []
    totals: dict[int, list[float]] = {}
    for k in range(first, newest + 1):
        for sample in process_utilization(processes, source, k * PROCESS_SAMPLE_PERIOD_S):
            entry = totals.setdefault(sample.pid, [0.0, 0.0, 0.0])
            entry[0] += sample.sm_percent
            entry[1] += sample.mem_percent
            entry[2] = sample.tick
    return [
        ProcessUtilization(pid, tick, round(sm / periods), round(mem / periods))
        for pid, (sm, mem, tick) in totals.items()
    ]
