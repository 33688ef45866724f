"""`process_utilization_since` takes runs of identical periods at once: same answers.

A replay ticks up to 60 s apart, so each process-utilization call covers up to 60
(at most 120) one-second periods; the simulation adds up runs of periods in which the
activity and the running processes cannot change instead of averaging each second.
These tests compare it with the period-by-period definition on every bundled scenario.
"""

from __future__ import annotations

import math

import pytest

from gpuwatch.simulate import load_scenario
from gpuwatch.simulate.device import build_devices
from gpuwatch.simulate.faults import FaultPlan
from gpuwatch.simulate.processes import SimProcess, process_utilization_since
from gpuwatch.simulate.timeline import Activity, Levels, Periodic, Segment, Timeline
from tests.simulate.helpers import process_utilization_one_by_one

SCENARIOS = ("demo", "dgx-h100", "dgx-h100-mig", "faults", "legacy")


@pytest.mark.parametrize("name", SCENARIOS)
def test_runs_give_the_per_period_answer_on_every_scenario(name: str) -> None:
    scenario = load_scenario(name)
    for device in build_devices(scenario, FaultPlan(scenario.faults)):
        sources = [(device.processes, device.source)]
        sources += [(mig.processes, mig.source) for mig in device.mig]
        for processes, source in sources:
            # replay-like calls (60 s, then 45 s steps) and odd ends, over the first hour
            for step, offset in ((60, 0.0), (45, 0.5), (7, 0.25)):
                last = 0
                now = offset
                while now < 3600:
                    now += step
                    expected = process_utilization_one_by_one(processes, source, last + 1, now)
                    assert process_utilization_since(processes, source, last + 1, now) == expected
                    last = math.floor(now)


def _process(pid: int, start: float, end: float, share: float) -> SimProcess:
    return SimProcess(pid, f"p{pid}", "C", 1 << 30, start, end, share, True)


def test_runs_stop_at_activity_and_process_edges_off_the_second() -> None:
    activity = Activity(
        levels=Levels(util=(0.2, 0.9), dram=0.3),
        periodic=(Periodic(every=37.3, duration=11.7, offset=5.1, levels=Levels(util=0.05)),),
        segments=(Segment(start=400.4, end=700.9, levels=Levels(util=0.6, dram=(0.1, 0.8))),),
        vary_every=13.3,
    )
    source = Timeline(activity, seed=7)
    processes = (
        _process(1, 0.0, math.inf, 1.0),
        _process(2, 30.5, 95.2, 2.0),
        _process(3, 200.0, 201.0, 0.5),
        _process(4, 300.7, 300.9, 3.0),
    )
    for first in range(1, 900, 17):
        for span in (1.0, 2.5, 59.9, 60.0, 121.0, 300.0):
            now = first + span
            expected = process_utilization_one_by_one(processes, source, first, now)
            assert process_utilization_since(processes, source, first, now) == expected
