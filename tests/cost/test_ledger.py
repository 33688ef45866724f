"""Cost accrual, classed time and windows on literal sequences, through the real tracker."""

from __future__ import annotations

import pytest

from gpuwatch.core.costs import GpuCost, GpuPrice, TimeWindow
from gpuwatch.core.verdict import GpuVerdict
from gpuwatch.cost.history import CheckpointHistory
from gpuwatch.cost.ledger import CostLedger
from tests.cost.helpers import Gpu

PRICE = GpuPrice(usd_per_hour=3600.0, source="static")  # $1 per second: easy arithmetic
WINDOW = 1800.0


def run(
    ledger: CostLedger,
    gpu: Gpu,
    start: int,
    end: int,
    activity: float | None,
    *,
    price: bool = True,
) -> GpuCost:
    cost = None
    for t in range(start, end):
        prices = {gpu.uuid: PRICE} if price else {}
        cost = ledger.observe(float(t), (gpu.verdict(float(t), activity),), prices)[0]
    assert cost is not None
    return cost


def window(cost: GpuCost, name: str) -> TimeWindow:
    return next(w for w in cost.windows if w.window == name)


def test_cost_accrues_price_times_time_and_pending_time_is_unsettled() -> None:
    ledger, gpu = CostLedger(), Gpu()
    cost = run(ledger, gpu, 0, 101, 0.9)
    assert cost.cost_usd_total == pytest.approx(100.0)
    assert cost.idle_cost_usd_total == 0.0
    assert cost.busy_seconds_total == 0.0, "pending: no evidence yet"
    assert cost.unsettled_seconds == pytest.approx(100.0)
    assert cost.windows == (), "no settled time: no window, no ratio"
    cost = run(ledger, gpu, 101, 1801, 0.9)
    assert cost.busy_seconds_total == pytest.approx(1800.0)
    assert cost.unsettled_seconds == 0.0
    assert window(cost, "1h").busy_ratio == 1.0


def test_idle_from_the_first_sample_costs_everything_once_confirmed() -> None:
    ledger, gpu = CostLedger(), Gpu()
    cost = run(ledger, gpu, 0, 1800, 0.0)
    assert cost.idle_cost_usd_total == 0.0, "not confirmed yet"
    assert cost.busy_seconds_total == 0.0, "nor busy"
    cost = run(ledger, gpu, 1800, 1801, 0.0)
    assert cost.idle_cost_usd_total == pytest.approx(cost.cost_usd_total)
    assert cost.cost_usd_total == pytest.approx(1800.0)
    assert cost.idle_seconds_total == pytest.approx(1800.0)
    assert cost.busy_seconds_total == 0.0
    assert window(cost, "1h").busy_ratio == 0.0


def test_no_price_no_cost_and_gaps_are_not_charged() -> None:
    ledger, gpu = CostLedger(), Gpu()
    assert run(ledger, gpu, 0, 11, 0.9, price=False).cost_usd_total == 0.0
    run(ledger, gpu, 11, 21, 0.9)
    after_gap = run(ledger, gpu, 1000, 1001, 0.9)
    assert after_gap.cost_usd_total == pytest.approx(10.0)
    assert after_gap.observed_seconds_total == pytest.approx(20.0)


def test_a_window_never_counts_idle_time_from_before_its_start() -> None:
    """Busy 2 h, then idle: the confirmation at 2 h 30 min is charged back to 2 h, and
    the 1 h window at 2 h 45 min holds exactly 15 busy and 45 idle minutes."""
    ledger, gpu = CostLedger(), Gpu()
    run(ledger, gpu, 0, 7201, 0.9)
    during_spell = run(ledger, gpu, 7201, 8900, 0.0)
    hour = window(during_spell, "1h")
    assert hour.idle_seconds == 0.0, "a spell shorter than the window is not idle yet"
    assert hour.end_seconds == 7200.0, "the spell is unsettled: the window ends before it"
    assert during_spell.unsettled_seconds == pytest.approx(1699.0)
    cost = run(ledger, gpu, 8900, 9901, 0.0)  # now t = 9900 = 2 h 45 min
    hour = window(cost, "1h")
    assert hour.end_seconds == 9900.0
    assert hour.start_seconds == 6300.0  # a checkpoint every 60 s
    assert hour.busy_seconds == pytest.approx(900.0)
    assert hour.idle_seconds == pytest.approx(2700.0)
    assert hour.busy_ratio == pytest.approx(0.25)
    assert hour.idle_cost_usd == pytest.approx(2700.0)
    day = window(cost, "24h")
    assert day.busy_seconds == pytest.approx(7200.0)
    assert day.idle_seconds == pytest.approx(2700.0)


def test_unknown_time_is_charged_but_judged_neither_busy_nor_idle() -> None:
    ledger, gpu = CostLedger(), Gpu()
    run(ledger, gpu, 0, 1801, 0.9)
    cost = run(ledger, gpu, 1801, 2401, None)
    assert cost.unknown_seconds_total == pytest.approx(600.0)
    assert cost.cost_usd_total == pytest.approx(2400.0)
    hour = window(cost, "1h")
    assert hour.unknown_seconds == pytest.approx(600.0)
    assert hour.busy_ratio == 1.0


def test_history_span_ends_at_the_latest_record_and_starts_inside_the_window() -> None:
    history = CheckpointHistory(1, resolution=60.0, retention=7200.0)
    for t in range(0, 3001, 10):
        history.record(float(t), (float(t),))
    span = history.span(600.0, now=3300.0)
    assert span is not None
    start, end, (delta,) = span
    assert (start, end) == (2700.0, 3000.0), "the window is [now - 600, now]; data ends at 3000"
    assert delta == pytest.approx(300.0)
    assert history.span(60.0, now=4000.0) is None, "no checkpoint inside the window"


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


def test_a_gpu_down_for_a_tick_keeps_its_cost_in_the_token_source_total() -> None:
    from gpuwatch.cost.engine import CostEngine, TokenTotals
    from gpuwatch.sizing import build_gpu_catalog
    from gpuwatch.tco import RentVsBuyConfig

    engine = CostEngine(build_gpu_catalog(), RentVsBuyConfig())
    prices = {"GPU-a": PRICE, "GPU-b": PRICE}

    a, b = Gpu("GPU-a", 0), Gpu("GPU-b", 1)

    per_million = []
    for t in range(0, 600):
        tokens = [TokenTotals("server", (0, 1), 500.0 * t, 500.0 * t, float(t))]
        verdicts: tuple[GpuVerdict, ...] = (a.verdict(float(t), 0.9), b.verdict(float(t), 0.9))
        if t == 300:
            verdicts = verdicts[:1]  # GPU b down at t=300
        summary = engine.observe(float(t), (), verdicts, prices, tokens)
        hour = next((w for w in summary.tokens if (w.window, w.kind) == ("1h", "all")), None)
        if hour is not None and hour.usd_per_million_tokens is not None:
            per_million.append(hour.usd_per_million_tokens)
    # two GPUs at $1/s each for 1,000 tokens/s: $2 per 1,000 tokens = $2,000 per million
    assert per_million
    assert all(v == pytest.approx(2000.0, rel=0.01) for v in per_million)
