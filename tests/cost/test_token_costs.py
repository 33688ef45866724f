"""Realized $/1M tokens by kind, shared GPUs and uncharged gaps, on literal sequences.

Prices are $3,600/h ($1 per GPU-second) so that every expected figure is plain arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gpuwatch.core.costs import CostSummary, GpuPrice
from gpuwatch.cost.engine import CostEngine, TokenTotals
from gpuwatch.sizing import build_gpu_catalog
from gpuwatch.tco import RentVsBuyConfig
from tests.cost.helpers import Fleet

PRICE = GpuPrice(usd_per_hour=3600.0, source="static")


def engine() -> CostEngine:
    return CostEngine(build_gpu_catalog(), RentVsBuyConfig())


class Server:
    """A token source serving constant rates, scraped every `interval` seconds."""

    def __init__(
        self,
        name: str,
        gpus: Sequence[int | str],
        prompt_per_second: float,
        generation_per_second: float,
        interval: float = 15.0,
    ) -> None:
        self.name = name
        self.gpus = tuple(gpus)
        self.rates = (prompt_per_second, generation_per_second)
        self.interval = interval
        self.scraped_at: float | None = None
        self.baseline = 0.0

    def totals(self, t: float) -> TokenTotals:
        """What the collector holds at `t`: totals as of its latest scrape (baseline at 0)."""
        if self.scraped_at is None:
            self.scraped_at = t  # the baseline: totals count from here
            self.baseline = t
        else:
            self.scraped_at += self.interval * ((t - self.scraped_at) // self.interval)
        since = self.scraped_at - self.baseline
        return TokenTotals(
            source=self.name,
            gpus=self.gpus,
            prompt_tokens_total=self.rates[0] * since,
            generation_tokens_total=self.rates[1] * since,
            scraped_at_seconds=self.scraped_at,
        )


def per_million(summary: CostSummary, source: str, kind: str, window: str = "1h") -> float | None:
    for w in summary.tokens:
        if (w.source, w.kind, w.window) == (source, kind, window):
            return w.usd_per_million_tokens
    return None


def run(
    servers: Sequence[Server],
    times: Sequence[float],
    gpus: Sequence[int] = (0,),
    prices: dict[str, GpuPrice] | None = None,
) -> list[CostSummary]:
    cost = engine()
    prices = {f"GPU-{i}": PRICE for i in gpus} if prices is None else prices
    fleet = Fleet()
    return [
        cost.observe(t, (), fleet.verdicts(t, tuple(gpus)), prices, [s.totals(t) for s in servers])
        for t in times
    ]


def test_each_kind_has_its_own_price_and_all_is_their_harmonic_sum() -> None:
    server = Server("llm", (0,), prompt_per_second=500.0, generation_per_second=100.0)
    summary = run([server], [float(t) for t in range(0, 601)])[-1]
    prompt = per_million(summary, "llm", "prompt")
    generation = per_million(summary, "llm", "generation")
    every = per_million(summary, "llm", "all")
    assert prompt == pytest.approx(1e6 / 500.0)  # $1/s for 500 prompt tokens/s
    assert generation == pytest.approx(1e6 / 100.0)
    assert every == pytest.approx(1e6 / 600.0)
    assert prompt is not None
    assert generation is not None
    assert every is not None
    assert 1.0 / every == pytest.approx(1.0 / prompt + 1.0 / generation, rel=1e-12)
    hour = [w for w in summary.tokens if w.window == "1h"]
    assert {w.kind for w in hour} == {"prompt", "generation", "all"}
    assert all(w.covered_seconds == pytest.approx(600.0) for w in hour)


def test_absent_before_the_second_scrape_and_for_a_kind_without_tokens() -> None:
    server = Server("llm", (0,), prompt_per_second=500.0, generation_per_second=0.0)
    summaries = run([server], [float(t) for t in range(0, 61)])
    for summary in summaries[:15]:  # baseline at t=0, next scrape at t=15
        assert summary.tokens == ()
    assert per_million(summaries[15], "llm", "prompt") == pytest.approx(2000.0)
    for summary in summaries[15:]:
        assert per_million(summary, "llm", "generation") is None
        assert per_million(summary, "llm", "prompt") == pytest.approx(2000.0)


def test_a_span_the_ledger_did_not_charge_counts_neither_cost_nor_tokens() -> None:
    server = Server("llm", (0,), prompt_per_second=500.0, generation_per_second=100.0)
    # ticks every second, except a 90 s stall (longer than the ledger's gap limit)
    times = [float(t) for t in range(0, 301)] + [390.0 + t for t in range(0, 301)]
    summary = run([server], times)[-1]
    assert per_million(summary, "llm", "all") == pytest.approx(1e6 / 600.0, rel=1e-9)


def test_ticks_always_too_far_apart_leave_the_ratio_absent_never_zero() -> None:
    # like `gpuwatch run --speed 3000`: every tick is 150 simulated seconds after the last
    server = Server("llm", (0,), prompt_per_second=500.0, generation_per_second=100.0)
    summaries = run([server], [150.0 * k for k in range(0, 40)])
    assert summaries[-1].gpus[0].cost_usd_total == 0.0  # the ledger charged nothing
    for summary in summaries:
        for window in summary.tokens:
            assert window.usd_per_million_tokens is None
            assert window.tokens == 0.0


def test_a_scrape_between_ticks_is_priced_at_its_own_time() -> None:
    # ticks every 10 s, scrapes every 15 s: half of them fall between two ticks
    cost, fleet = engine(), Fleet()
    summaries = []
    for k in range(0, 61):
        t = 10.0 * k
        scraped = 15.0 * (t // 15.0)
        tokens = TokenTotals("llm", (0,), 1000.0 * scraped, 1000.0 * scraped, scraped)
        summaries.append(cost.observe(t, (), fleet.verdicts(t), {"GPU-0": PRICE}, [tokens]))
    for summary in summaries[2:]:
        assert per_million(summary, "llm", "generation") == pytest.approx(1000.0, rel=1e-9)


@pytest.mark.parametrize(
    ("gpus", "prices"),
    [
        ((), {"GPU-0": PRICE}),  # a source that names no GPU
        ((7,), {"GPU-0": PRICE}),  # a GPU this host does not have
        ((0, "GPU-9"), {"GPU-0": PRICE}),  # one of its GPUs is unknown
        ((0,), {}),  # its GPU has no price
    ],
)
def test_no_cost_basis_means_no_ratio(
    gpus: tuple[int | str, ...], prices: dict[str, GpuPrice]
) -> None:
    server = Server("llm", gpus, prompt_per_second=500.0, generation_per_second=100.0)
    summaries = run([server], [float(t) for t in range(0, 121)], prices=prices)
    assert all(w.usd_per_million_tokens is None for s in summaries for w in s.tokens)
    assert any(w.tokens == 0.0 for w in summaries[-1].tokens)


def test_a_shared_gpu_is_split_equally_and_never_charged_twice() -> None:
    servers = [
        Server("a", (0,), 100.0, 10.0),  # GPU 0 by index
        Server("b", ("GPU-0", 1), 300.0, 30.0, interval=10.0),  # GPU 0 by uuid, and GPU 1
        Server("c", (2,), 50.0, 5.0),
    ]
    cost, fleet = engine(), Fleet()
    prices = {f"GPU-{i}": PRICE for i in range(4)}
    for t in range(0, 901):
        verdicts = fleet.verdicts(float(t), (0, 1, 2, 3))  # GPU 3 is named by no source
        summary = cost.observe(float(t), (), verdicts, prices, [s.totals(t) for s in servers])
        charged = {c.source: c.cost_usd_total for c in summary.token_sources}
        gpu = {c.gpu_index: c.cost_usd_total for c in summary.gpus}
        assert sum(charged.values()) == pytest.approx(gpu[0] + gpu[1] + gpu[2], rel=1e-12)
        assert charged["a"] == pytest.approx(gpu[0] / 2, rel=1e-12)
        assert charged["b"] == pytest.approx(gpu[0] / 2 + gpu[1], rel=1e-12)
        assert charged["c"] == pytest.approx(gpu[2], rel=1e-12)
    assert gpu[0] == pytest.approx(900.0)
    # a: $0.5/s for 110 tokens/s; b: $1.5/s for 330 tokens/s; c: $1/s for 55 tokens/s
    assert per_million(summary, "a", "all") == pytest.approx(0.5 / 110 * 1e6, rel=1e-9)
    assert per_million(summary, "b", "all") == pytest.approx(1.5 / 330 * 1e6, rel=1e-9)
    assert per_million(summary, "c", "generation") == pytest.approx(1.0 / 5 * 1e6, rel=1e-9)


def test_windows_forget_what_is_older_than_them() -> None:
    # a server busy for an hour, then idle (no tokens) for an hour: the 1 h window has
    # cost but no tokens (absent), the 24 h window divides both hours' cost by its tokens
    cost, fleet = engine(), Fleet()
    summary = CostSummary()
    for t in range(0, 7201):
        scraped = 15.0 * (t // 15)
        served = 1000.0 * min(scraped, 3600.0)
        tokens = TokenTotals("llm", (0,), served, served, scraped)
        summary = cost.observe(float(t), (), fleet.verdicts(float(t)), {"GPU-0": PRICE}, [tokens])
    assert per_million(summary, "llm", "all", "1h") is None
    hour = next(w for w in summary.tokens if w.window == "1h" and w.kind == "all")
    assert hour.cost_usd == pytest.approx(3600.0, rel=0.02)
    # 7,200 s at $1/s over 2 x 1,000 tokens/s x 3,600 s
    assert per_million(summary, "llm", "all", "24h") == pytest.approx(1000.0, rel=1e-6)


def test_a_span_across_a_refused_increase_counts_neither_cost_nor_tokens() -> None:
    """As the collector reports a lie (`tests/tokens/test_lying_counters.py`): the scrape
    at 165 s is refused (totals and scrape time kept), the one at 180 s is a new baseline
    (totals unchanged), honest counting resumes after it. The 150-180 s span's tokens were
    never counted, so its cost is not charged either: $/1M tokens stays the honest 2,000,
    not more (cost without tokens) and never towards 0 (the lie)."""
    rate = 500.0

    def totals(t: float) -> TokenTotals:
        scraped = 15.0 * (t // 15.0)
        if scraped == 165.0:  # refused: the reading keeps its last good scrape
            scraped = 150.0
        baseline = 0.0 if scraped < 180.0 else 180.0
        counted = rate * min(scraped, 150.0) + rate * max(scraped - 180.0, 0.0)
        return TokenTotals("llm", (0,), counted, 0.0, scraped, baseline)

    cost = engine()
    fleet = Fleet()
    summary = None
    for t in range(0, 601):
        summary = cost.observe(
            float(t), (), fleet.verdicts(float(t), (0,)), {"GPU-0": PRICE}, [totals(float(t))]
        )
    assert summary is not None
    assert per_million(summary, "llm", "prompt") == pytest.approx(1e6 / rate, rel=1e-9)
