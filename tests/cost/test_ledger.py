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


def test_retroactive_idle_seconds_never_exceed_what_was_observed() -> None:
    ledger = CostLedger()
    for t in range(0, 101):
        ledger.observe(float(t), (verdict("busy", 0.0),), {"GPU-a": PRICE})
    # a two-hour sampling gap, after which the analysis confirms inactivity since t=0
    ledger.observe(7300.0, (verdict("idle", 7300.0),), {"GPU-a": PRICE})
    for t in range(7301, 10901):
        cost = ledger.observe(float(t), (verdict("busy", 7300.0),), {"GPU-a": PRICE})[0]
    assert cost.idle_cost_usd_total == pytest.approx(100.0), "only the observed 100 s"
    assert cost.cost_usd_total == pytest.approx(100.0 + 3600.0)  # the gap is not charged
    assert cost.busy_seconds_total == pytest.approx(3600.0)


def test_a_gpu_down_for_a_tick_keeps_its_cost_in_the_token_source_total() -> None:
    from gpuwatch.cost.engine import CostEngine, TokenTotals
    from gpuwatch.sizing import build_gpu_catalog
    from gpuwatch.tco import RentVsBuyConfig

    engine = CostEngine(build_gpu_catalog(), RentVsBuyConfig())
    prices = {"GPU-a": PRICE, "GPU-b": PRICE}

    def both(state: str) -> tuple[GpuVerdict, ...]:
        return (
            verdict(state, 0.0),
            GpuVerdict(
                gpu_index=1,
                uuid="GPU-b",
                state=state,
                state_since_seconds=0.0,
                inactive_since_seconds=None,
                idle_seconds_total=0.0,
                activity_mean_ratio=None,
            ),
        )

    per_million = []
    for t in range(0, 600):
        tokens = [TokenTotals("server", (0, 1), 500.0 * t, 500.0 * t, float(t))]
        verdicts = both("busy") if t != 300 else both("busy")[:1]  # GPU b down at t=300
        summary = engine.observe(float(t), (), verdicts, prices, tokens)
        hour = next((w for w in summary.tokens if (w.window, w.kind) == ("1h", "all")), None)
        if hour is not None and hour.usd_per_million_tokens is not None:
            per_million.append(hour.usd_per_million_tokens)
    # two GPUs at $1/s each for 1,000 tokens/s: $2 per 1,000 tokens = $2,000 per million
    assert per_million
    assert all(v == pytest.approx(2000.0, rel=0.01) for v in per_million)
