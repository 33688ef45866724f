"""Timelines: precedence, periodic windows, ranged levels and exact integration."""

from __future__ import annotations

import math

import pytest

from gpuwatch.simulate.timeline import (
    Activity,
    Aggregate,
    Levels,
    Periodic,
    Segment,
    Timeline,
    average,
    integrate,
)


def pause_every_20_minutes() -> Timeline:
    return Timeline(
        Activity(
            levels=Levels(util=0.9, sm=0.8),
            periodic=(Periodic(every=1200, duration=120, offset=1080),),
        ),
        seed=1,
    )


def test_periodic_window_replaces_levels_while_open() -> None:
    timeline = pause_every_20_minutes()
    assert timeline.at(0).sm == 0.8
    assert timeline.at(1079.9).sm == 0.8
    assert timeline.at(1080).sm == 0.0
    assert timeline.at(1199.9).sm == 0.0
    assert timeline.at(1200).sm == 0.8
    assert timeline.at(2280 + 60).sm == 0.0


def test_next_change_lands_on_window_edges() -> None:
    timeline = pause_every_20_minutes()
    assert timeline.next_change(0) == 1080
    assert timeline.next_change(1080) == pytest.approx(1200)
    assert timeline.next_change(1200) == pytest.approx(2280)


def test_segments_take_precedence_and_have_their_own_windows() -> None:
    timeline = Timeline(
        Activity(
            levels=Levels(util=0.5),
            segments=(
                Segment(
                    start=100,
                    end=200,
                    levels=Levels(util=0.9),
                    periodic=(Periodic(every=50, duration=10, offset=120),),
                ),
            ),
        ),
        seed=1,
    )
    assert timeline.at(99).util == 0.5
    assert timeline.at(100).util == 0.9
    assert timeline.at(125).util == 0.0
    assert timeline.at(175).util == 0.0
    assert timeline.at(185).util == 0.9
    assert timeline.at(200).util == 0.5
    assert timeline.next_change(50) == 100
    assert timeline.next_change(150) == pytest.approx(170)
    assert timeline.next_change(250) == math.inf


def test_ranged_levels_are_drawn_per_window_and_move_together() -> None:
    activity = Activity(levels=Levels(sm=(0.1, 0.35), dram=(0.2, 0.4)), vary_every=60)
    a, b = Timeline(activity, seed=7), Timeline(activity, seed=7)
    values = [a.at(t).sm for t in range(0, 600, 60)]
    assert values == [b.at(t).sm for t in range(0, 600, 60)]
    assert all(0.1 <= v <= 0.35 for v in values)
    assert len(set(values)) > 5
    assert a.at(0).sm == a.at(59.9).sm
    u_sm = (a.at(130).sm - 0.1) / 0.25
    u_dram = (a.at(130).dram - 0.2) / 0.2
    assert u_sm == pytest.approx(u_dram)
    assert a.next_change(130) == 180
    assert Timeline(activity, seed=8).at(0).sm != a.at(0).sm


def test_integrate_is_exact_over_pieces() -> None:
    timeline = pause_every_20_minutes()
    (sm_seconds,) = integrate(timeline, 0, 3600, lambda act: (act.sm,))
    active = 3600 - 3 * 120
    assert sm_seconds == pytest.approx(0.8 * active)
    mean = average(timeline, 1050, 1110)
    assert mean.sm == pytest.approx(0.4)
    assert average(timeline, 10, 10).sm == 0.8


def test_aggregate_weights_parts() -> None:
    busy = Timeline(Activity(levels=Levels(sm=0.7, pcie_rx_mib_s=100)), seed=1)
    idle = Timeline(Activity(), seed=2)
    both = Aggregate([(busy, 3 / 7), (idle, 4 / 7)])
    assert both.at(0).sm == pytest.approx(0.3)
    assert both.at(0).pcie_rx == pytest.approx(300 / 7)
    assert both.next_change(0) == math.inf


def test_power_override_is_carried() -> None:
    timeline = Timeline(Activity(levels=Levels(power_w=123.0)), seed=1)
    assert timeline.at(5).power_w == 123.0
