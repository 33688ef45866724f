"""Rent vs buy on the demo fleet: each GPU at its own busy ratio, the host as the sum."""

from __future__ import annotations

import pytest

from gpuwatch.sizing import build_gpu_catalog
from gpuwatch.tco import RentVsBuyConfig
from tests.conftest import make_agent


def test_each_gpu_is_judged_at_its_own_busy_ratio_and_an_idle_gpu_is_never_a_buy() -> None:
    agent, clock = make_agent("demo")
    try:
        early = agent.tick()
        for _ in range(250):  # 2500 s at 10 s steps: past the 30-minute window
            clock.advance(10.0)
            snapshot = agent.tick()
    finally:
        agent.stop()
    assert early.cost.rent_vs_buy == (), "no settled time: no position, not a flattering one"
    assert early.cost.rent_vs_buy_host_monthly_delta_usd is None
    positions = {p.gpu_index: p for p in snapshot.cost.rent_vs_buy}
    assert set(positions) == {0, 1, 2, 3}
    h100 = build_gpu_catalog().get("H100-SXM-80GB")
    owned = RentVsBuyConfig().owned_usd_per_gpu_year(h100)
    for index, position in positions.items():
        busy = next(
            w
            for c in snapshot.cost.gpus
            if c.gpu_index == index
            for w in c.windows
            if w.window == "30d"
        ).busy_ratio
        assert position.busy_ratio == busy
        assert position.owned_usd_per_year == pytest.approx(owned)
        # rent at the demo's static price x 730 h x the GPU's busy ratio - owned / 12
        assert position.monthly_delta_usd == pytest.approx(6.88 * 730 * busy - owned / 12)
    assert positions[1].busy_ratio == 0.0
    assert positions[1].monthly_delta_usd < 0, "idle all along: renting is cheaper"
    assert positions[2].monthly_delta_usd < 0, "held: computing nothing"
    assert positions[0].busy_ratio == 1.0
    assert positions[0].monthly_delta_usd > 0, "the trainer is busy enough to own"
    assert snapshot.cost.rent_vs_buy_host_monthly_delta_usd == pytest.approx(
        sum(p.monthly_delta_usd for p in positions.values())
    )
