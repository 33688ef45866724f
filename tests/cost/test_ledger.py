"""Cost accrual and checkpoint history on literal sequences."""

from __future__ import annotations

import pytest

from gpuwatch.cost.history import CheckpointHistory
from gpuwatch.cost.ledger import CostLedger
from gpuwatch.snapshot import GpuPrice, GpuVerdict

PRICE = GpuPrice(usd_per_hour=3600.0, source="static")  # $1 per second: easy arithmetic


def verdict(state: str, idle_seconds: float) -> GpuVerdict:
    return GpuVerdict(
        gpu_index=0,
        uuid="GPU-a",
        state=state,
        state_since_seconds=0.0,
        inactive_since_seconds=None,
        idle_seconds_total=idle_seconds,
        activity_mean_ratio=None,
    )


def test_cost_accrues_price_times_time() -> None:
    ledger = CostLedger()
    for t in range(0, 101):
        cost = ledger.observe(float(t), (verdict("busy", 0.0),), {"GPU-a": PRICE})[0]
    assert cost.cost_usd_total == pytest.approx(100.0)
    assert cost.idle_cost_usd_total == 0.0
    assert cost.busy_seconds_total == pytest.approx(100.0)


def test_idle_from_the_first_sample_costs_everything_once_confirmed() -> None:
    ledger = CostLedger()
    for t in range(0, 1800):
        ledger.observe(float(t), (verdict("busy", 0.0),), {"GPU-a": PRICE})
    # the window confirms inactivity since t=0: idle seconds jump retroactively
    cost = ledger.observe(1800.0, (verdict("idle", 1800.0),), {"GPU-a": PRICE})[0]
    assert cost.idle_cost_usd_total == pytest.approx(cost.cost_usd_total)
    assert cost.cost_usd_total == pytest.approx(1800.0)
    assert cost.busy_seconds_total == pytest.approx(0.0)


def test_no_price_no_cost_and_gaps_are_not_charged() -> None:
    ledger = CostLedger()
    ledger.observe(0.0, (verdict("busy", 0.0),), {})
    assert ledger.observe(10.0, (verdict("busy", 0.0),), {})[0].cost_usd_total == 0.0
    ledger.observe(20.0, (verdict("busy", 0.0),), {"GPU-a": PRICE})
    after_gap = ledger.observe(1000.0, (verdict("busy", 0.0),), {"GPU-a": PRICE})[0]
    assert after_gap.cost_usd_total == pytest.approx(10.0)


def test_history_increase_over_windows() -> None:
    history = CheckpointHistory(2, resolution=60.0, retention=3600.0)
    for t in range(0, 7201, 10):
        history.record(float(t), (float(t), 2.0 * t))
    covered, (a, b) = history.increase(600.0)  # type: ignore[misc]
    assert covered == pytest.approx(600.0)
    assert (a, b) == (pytest.approx(600.0), pytest.approx(1200.0))
    covered, _ = history.increase(30 * 86400.0)  # type: ignore[misc]
    assert covered <= 3600.0 + 60.0, "older checkpoints were dropped"
    assert CheckpointHistory(1).increase(60.0) is None
