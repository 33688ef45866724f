"""The rent vs buy arithmetic: the formulas on literals, the seeds' worked examples, properties."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gpuwatch.core.units import HOURS_PER_MONTH
from gpuwatch.tco import (
    DEFAULT_COST_OF_CAPITAL,
    DEFAULT_OPS_USD_PER_YEAR,
    DEFAULT_PUE,
    Ownership,
    TcoInputs,
    breakeven_utilization,
    evaluate_tco,
    monthly_delta_usd,
    owned_usd_per_gpu_year,
    running_usd_per_gpu_year,
    usd_per_million_tokens_owned,
    usd_per_million_tokens_rented,
)
from gpuwatch.tco.model import capital_usd_per_year

SEED: dict[str, float] = {"ops_usd_per_year": 0.0, "cost_of_capital": 0.0}
"""Seed 001's assumptions beside power: no operations, no interest on the purchase."""


def a100(**changes: float | str | None) -> TcoInputs:
    """Seed 001's break-even example: A100 80GB, $12,000 vs $5.12/GPU-h, 70 %, 3 years."""
    fields: dict[str, float | str | None] = {
        "purchase_usd": 12_000.0,
        "rent_usd_per_hour": 5.12,
        "utilization": 0.7,
        "years": 3.0,
        "power_watts": 0.0,
        "pue": 1.0,
        **SEED,
    }
    fields.update(changes)
    return TcoInputs(**fields)  # type: ignore[arg-type]


# --- formulas on literals ---------------------------------------------------------------


def test_owned_usd_per_gpu_year_adds_every_term() -> None:
    got = owned_usd_per_gpu_year(
        30_000,
        3,
        700,
        usd_per_kwh=0.10,
        pue=1.5,
        hosting_usd_per_kw_month=150,
        ops_usd_per_year=500,
        cost_of_capital=0,
    )
    amortization = 10_000.0
    power = 0.7 * 1.5 * 8760 * 0.10  # 919.80
    hosting = 150 * 0.7 * 12  # 1,260
    assert got == pytest.approx(amortization + power + hosting + 500)
    assert got == pytest.approx(12_679.80)
    assert running_usd_per_gpu_year(
        700, usd_per_kwh=0.10, pue=1.5, hosting_usd_per_kw_month=150, ops_usd_per_year=500
    ) == pytest.approx(2_679.80)


def test_owned_defaults_are_seed_001_power_price_and_industry_pue() -> None:
    # $0.12/kWh (seed 001), PUE 1.58 (Uptime Institute 2023), no hosting; ops $462.50 and
    # 8 % cost of capital (estimates, docs/tco.md); with those at 0, seed 001's arithmetic
    assert (DEFAULT_OPS_USD_PER_YEAR, DEFAULT_COST_OF_CAPITAL) == (462.5, 0.08)
    power = 0.4 * 1.58 * 8760 * 0.12
    assert owned_usd_per_gpu_year(12_000, 3, 400) == pytest.approx(
        capital_usd_per_year(12_000, 3, 0.08) + power + 462.5
    )
    assert owned_usd_per_gpu_year(
        12_000, 3, 400, ops_usd_per_year=0, cost_of_capital=0
    ) == pytest.approx(4000 + power)


def test_capital_is_a_loans_level_payments() -> None:
    """PMT at cost_of_capital / 12 over 12 x life months, x 12; straight-line at 0."""
    # the textbook mortgage: $100,000 at 6 % over 30 years is $599.55 a month
    assert capital_usd_per_year(100_000, 30, 0.06) / 12 == pytest.approx(599.55, abs=0.005)
    # docs/tco.md's H100 with its host: $42,600 at 8 % over 3 years, $1,334.93 a month
    i = 0.08 / 12
    monthly = 42_600 * i / (1 - (1 + i) ** -36)
    assert monthly == pytest.approx(1_334.93, abs=0.005)
    assert capital_usd_per_year(42_600, 3, 0.08) == pytest.approx(12 * monthly)
    assert capital_usd_per_year(42_600, 3, 0.0) == pytest.approx(14_200)
    assert capital_usd_per_year(42_600, 5, 0.08) == pytest.approx(10_365.29, abs=0.005)  # docs
    # interest costs more than straight-line, more at a higher rate and a longer life
    assert 14_200 < capital_usd_per_year(42_600, 3, 0.08) < capital_usd_per_year(42_600, 3, 0.12)
    with pytest.raises(ValueError, match="cost_of_capital"):
        capital_usd_per_year(1.0, 3, 1.5)


def test_colocation_does_not_apply_the_pue_again() -> None:
    """A colocation fee covers cooling and power delivery: energy at the IT meter."""
    colo = running_usd_per_gpu_year(
        1000, pue=1.58, hosting_usd_per_kw_month=150, ops_usd_per_year=0, facility="colocation"
    )
    assert colo == pytest.approx(1 * 8760 * 0.12 + 150 * 12)
    owned = running_usd_per_gpu_year(1000, pue=1.58, ops_usd_per_year=0, facility="owned")
    assert owned == pytest.approx(1 * 1.58 * 8760 * 0.12)
    result = evaluate_tco(a100(power_watts=1000.0, pue=1.58, facility="colocation"))
    assert result.pue_applied == 1.0
    assert result.energy_usd_per_year == pytest.approx(8760 * 0.12)


def test_months_to_break_even_repays_the_financed_purchase() -> None:
    """With interest the balance grows at i a month and the monthly saving repays it."""
    inputs = a100(cost_of_capital=0.08, power_watts=400.0, usd_per_kwh=0.12)
    result = evaluate_tco(inputs)
    months = result.months_to_break_even
    assert months is not None
    i = 0.08 / 12
    saved = 5.12 * 730 * 0.7 - 0.4 * 8760 * 0.12 / 12
    balance = 12_000 * (1 + i) ** months - saved * ((1 + i) ** months - 1) / i
    assert balance == pytest.approx(0, abs=1e-6)
    assert months > evaluate_tco(replace(inputs, cost_of_capital=0.0)).months_to_break_even  # type: ignore[operator]
    assert result.capital_usd_per_year + result.energy_usd_per_year + (
        result.hosting_usd_per_year + result.ops_usd_per_year
    ) == pytest.approx(result.owned_usd_per_gpu_year)


def test_breakeven_utilization_formula() -> None:
    assert breakeven_utilization(8760.0, 2.0) == pytest.approx(0.5)
    assert breakeven_utilization(8760.0, 1.0) == pytest.approx(1.0)
    assert breakeven_utilization(17_520.0, 1.0) == pytest.approx(2.0)  # > 1: always rent
    assert breakeven_utilization(4000.0, 5.12) == pytest.approx(4000 / 44_851.2)
    with pytest.raises(ValueError, match="rent_usd_per_hour"):
        breakeven_utilization(1.0, 0.0)
    with pytest.raises(ValueError, match="life_years"):
        owned_usd_per_gpu_year(1.0, 0.0, 0.0)


def test_monthly_delta_is_rent_at_utilization_minus_owned_month() -> None:
    assert HOURS_PER_MONTH == 730
    assert monthly_delta_usd(2.0, 0.5, 1200.0) == pytest.approx(2.0 * 730 * 0.5 - 100)
    assert monthly_delta_usd(2.0, 0.0, 1200.0) == pytest.approx(-100.0)  # idle: all wasted
    with pytest.raises(ValueError, match="utilization"):
        monthly_delta_usd(2.0, 1.5, 1200.0)


def test_months_to_break_even_front_loads_the_purchase() -> None:
    # rent $2/h at 50 % = $730/month; running: 1 kW x PUE 1 x $0.10 = $73/month
    inputs = TcoInputs(
        purchase_usd=10_000,
        rent_usd_per_hour=2.0,
        utilization=0.5,
        years=3,
        power_watts=1000,
        usd_per_kwh=0.10,
        pue=1.0,
        ops_usd_per_year=0.0,
        cost_of_capital=0.0,
    )
    months = evaluate_tco(inputs).months_to_break_even
    assert months == pytest.approx(10_000 / (730 - 73))  # 15.22
    assert months is not None
    # at that month the cumulative costs meet; after it renting costs more
    assert 730 * months == pytest.approx(10_000 + 73 * months)
    # a 1-year life ends before month 15: never, and renting wins
    short = evaluate_tco(replace(inputs, years=1.0))
    assert short.months_to_break_even is None
    assert short.verdict == "rent"


def test_no_break_even_when_running_costs_exceed_rent() -> None:
    result = evaluate_tco(a100(power_watts=50_000.0, usd_per_kwh=1.0))
    assert result.months_to_break_even is None
    assert result.verdict == "rent"
    assert result.breakeven_utilization > 1


def test_free_hardware_breaks_even_at_once() -> None:
    assert evaluate_tco(a100(purchase_usd=0.0)).months_to_break_even == 0.0


# --- seed 001 ---------------------------------------------------------------------------


def test_seed_001_break_even_example() -> None:
    """'3 x 365 x 24 x 0.7 = 18,396 GPU-hours', 'x $5.12 = $94,187 vs buying for $12,000'."""
    result = evaluate_tco(a100())
    assert result.gpu_hours_used == pytest.approx(18_396)
    assert result.rent_total_usd == pytest.approx(94_187.52)
    assert round(result.rent_total_usd) == 94_188  # the seed truncates to $94,187
    assert result.own_total_usd == pytest.approx(12_000)
    assert result.verdict == "buy"
    # "buying an A100 is 7x cheaper": 7.85x on the purchase alone, 7.10x with 400 W power
    assert result.rent_total_usd / result.own_total_usd == pytest.approx(7.849, abs=1e-3)
    powered = evaluate_tco(a100(power_watts=400.0, usd_per_kwh=0.12))
    assert powered.own_total_usd == pytest.approx(12_000 + 0.4 * 0.12 * 26_280)  # 13,261.44
    assert powered.rent_total_usd / powered.own_total_usd == pytest.approx(7.102, abs=1e-3)
    assert result.breakeven_utilization == pytest.approx(0.0892, abs=1e-4)
    assert powered.breakeven_utilization == pytest.approx(0.0986, abs=1e-4)


def test_seed_001_30_to_40_percent_rule_is_the_spot_price_break_even() -> None:
    """'above 30-40 % typically justifies purchase': u* against the seed's $1.53/h spot."""
    spot = evaluate_tco(a100(rent_usd_per_hour=1.53))
    assert spot.breakeven_utilization == pytest.approx(0.298, abs=1e-3)
    powered = evaluate_tco(a100(rent_usd_per_hour=1.53, power_watts=400.0, usd_per_kwh=0.12))
    assert powered.breakeven_utilization == pytest.approx(0.330, abs=1e-3)


def test_seed_001_q4_owned_cluster_breaks_even_in_under_4_months() -> None:
    """8x A100 80GB ($96k) vs p4de.24xlarge $40.96/h: '~$30k/month', 'under 4 months'."""
    cluster = a100(purchase_usd=96_000.0, rent_usd_per_hour=40.96, utilization=1.0)
    monthly_rent = 40.96 * HOURS_PER_MONTH
    assert monthly_rent == pytest.approx(29_900.80)
    months = evaluate_tco(cluster).months_to_break_even
    assert months == pytest.approx(3.21, abs=0.01)
    per_gpu = evaluate_tco(a100(utilization=1.0)).months_to_break_even
    assert per_gpu == pytest.approx(months)
    with_power = evaluate_tco(a100(utilization=1.0, power_watts=400.0, usd_per_kwh=0.12))
    assert with_power.months_to_break_even == pytest.approx(3.24, abs=0.01)


def seed_001_cost_per_1m_tokens(
    hardware_cost_usd: float,
    utilization: float,
    throughput_tokens_per_sec: float,
    gpu_tdp_watts: float,
    *,
    hardware_lifetime_years: float = 3.0,
    power_cost_per_kwh: float = 0.12,
) -> float:
    """Seed 001's `cost_per_1m_tokens` arithmetic (one GPU), unrounded."""
    seconds_per_year = 365 * 24 * 3600
    hardware_per_sec = hardware_cost_usd / (hardware_lifetime_years * seconds_per_year)
    power_per_sec = gpu_tdp_watts / (1000 * 3600) * power_cost_per_kwh
    return (hardware_per_sec + power_per_sec) / (throughput_tokens_per_sec * utilization) * 1e6


SEED_001_7B_TABLE = [
    # name, hw_cost, throughput tokens/s, tdp W, $/1M tokens at round(..., 4)
    ("RTX 3090 (used)", 700, 65, 350, 0.4190),
    ("RTX 4090", 1600, 70, 450, 0.6513),
    ("A100 40GB SXM", 8000, 114, 400, 1.2267),
    ("H100 SXM (overkill)", 30000, 239, 700, 2.0349),
]


@pytest.mark.parametrize(("name", "purchase", "tokens", "tdp", "usd"), SEED_001_7B_TABLE)
def test_seed_001_owned_cost_per_million_tokens_7b(
    name: str, purchase: float, tokens: float, tdp: float, usd: float
) -> None:
    """'COST PER 1M TOKENS - 7B FP16 INFERENCE (70% utilization, 3-yr life)', $0.12/kWh."""
    inputs = TcoInputs(
        purchase_usd=purchase,
        rent_usd_per_hour=1.0,
        utilization=0.7,
        years=3,
        power_watts=tdp,
        usd_per_kwh=0.12,
        pue=1.0,  # the seed counts board power only
        tokens_per_second=tokens,
        ops_usd_per_year=0.0,
        cost_of_capital=0.0,
    )
    got = evaluate_tco(inputs).own_usd_per_million_tokens
    assert got is not None
    assert round(got, 4) == usd, name
    assert got == pytest.approx(seed_001_cost_per_1m_tokens(purchase, 0.7, tokens, tdp))
    board_only = Ownership(pue=1.0)  # `gpuwatch size --pue 1`
    assert got == pytest.approx(usd_per_million_tokens_owned(purchase, tdp, tokens, board_only))


def test_size_and_tco_share_one_pue_default() -> None:
    """`gpuwatch size`'s owned column and `gpuwatch tco` price power with the same PUE."""
    assert Ownership().pue == DEFAULT_PUE == TcoInputs(1, 1, 1, 1, 1).pue
    inputs = TcoInputs(
        purchase_usd=30000,
        rent_usd_per_hour=1.0,
        utilization=0.7,
        years=3,
        power_watts=700,
        tokens_per_second=239,
        ops_usd_per_year=0.0,
        cost_of_capital=0.0,
    )
    tco = evaluate_tco(inputs).own_usd_per_million_tokens
    assert tco == pytest.approx(usd_per_million_tokens_owned(30000, 700, 239))


def test_seed_001_4090_row_spelled_out() -> None:
    """$1,600 / 26,280 h + 0.45 kW x $0.12 = $0.1149/h over 70 x 0.7 x 3600 tokens/h."""
    hourly = 1600 / 26_280 + 0.45 * 0.12
    assert hourly / (70 * 0.7 * 3600) * 1e6 == pytest.approx(0.65126, abs=1e-5)


# --- seed 002 ---------------------------------------------------------------------------


def test_seed_002_rtx_4090_pays_for_itself_in_months() -> None:
    """'$2,000 ... renting the equivalent at $2 per hour hits $1,440 monthly' (720-h month)."""
    result = evaluate_tco(
        TcoInputs(
            purchase_usd=2000,
            rent_usd_per_hour=2.0,
            utilization=1.0,
            years=3,
            power_watts=0,
            ops_usd_per_year=0.0,
            cost_of_capital=0.0,
        )
    )
    assert 2.0 * 720 == 1440  # the seed's 30-day month; this model's month is 730 h
    assert result.months_to_break_even == pytest.approx(2000 / 1460)  # 1.37 months


# --- $/1M tokens ------------------------------------------------------------------------


def test_cost_per_million_tokens_rented_and_owned() -> None:
    inputs = a100(power_watts=400.0, usd_per_kwh=0.12, pue=1.58, tokens_per_second=143.0)
    result = evaluate_tco(inputs)
    assert result.rent_usd_per_million_tokens == pytest.approx(5.12 / (143 * 3600) * 1e6)
    assert result.rent_usd_per_million_tokens == pytest.approx(
        usd_per_million_tokens_rented(5.12, 143)
    )
    owned_hourly = result.owned_usd_per_gpu_year / 8760
    own, rent = result.own_usd_per_million_tokens, result.rent_usd_per_million_tokens
    assert own is not None
    assert rent is not None
    assert own == pytest.approx(owned_hourly / (143 * 0.7 * 3600) * 1e6)
    # renting the used hours vs owning all of them: per token, the same break-even
    assert (own < rent) == (result.verdict == "buy")


def test_no_throughput_no_token_price() -> None:
    result = evaluate_tco(a100())
    assert result.own_usd_per_million_tokens is None
    assert result.rent_usd_per_million_tokens is None


# --- properties -------------------------------------------------------------------------

UTILIZATIONS = [0.01, 0.05, 0.1, 0.25, 0.333, 0.5, 0.7, 0.9, 1.0]


def test_rent_total_is_linear_in_utilization_and_own_total_is_not_affected() -> None:
    inputs = a100(power_watts=400.0, usd_per_kwh=0.12, pue=1.58, ops_usd_per_year=300.0)
    full = evaluate_tco(replace(inputs, utilization=1.0))
    for u in UTILIZATIONS:
        result = evaluate_tco(replace(inputs, utilization=u))
        assert result.rent_total_usd == pytest.approx(u * full.rent_total_usd)
        assert result.gpu_hours_used == pytest.approx(u * 8760 * 3)
        assert result.own_total_usd == pytest.approx(full.own_total_usd)
        assert result.owned_usd_per_gpu_year == pytest.approx(full.owned_usd_per_gpu_year)
        assert result.breakeven_utilization == pytest.approx(full.breakeven_utilization)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"power_watts": 400.0, "usd_per_kwh": 0.12, "pue": 1.58},
        {"rent_usd_per_hour": 1.53, "power_watts": 400.0},
        {"hosting_usd_per_kw_month": 200.0, "power_watts": 700.0, "ops_usd_per_year": 1500.0},
        {"years": 5.0, "rent_usd_per_hour": 0.9},
        {"cost_of_capital": 0.08, "power_watts": 700.0, "ops_usd_per_year": 462.5},
        {"cost_of_capital": 0.2, "years": 5.0, "rent_usd_per_hour": 0.9},
    ],
)
def test_verdict_flips_at_the_breakeven_utilization(changes: dict[str, float]) -> None:
    u_star = evaluate_tco(a100(**changes)).breakeven_utilization
    assert 0 < u_star < 1
    below = evaluate_tco(a100(**changes, utilization=u_star * 0.999))
    above = evaluate_tco(a100(**changes, utilization=min(1.0, u_star * 1.001)))
    assert below.verdict == "rent"
    assert above.verdict == "buy"
    assert below.months_to_break_even is None
    assert above.months_to_break_even is not None
    assert below.monthly_delta_usd < 0 < above.monthly_delta_usd
    assert above.months_to_break_even == pytest.approx(12 * a100(**changes).years, rel=0.01)


def test_months_to_break_even_exactly_when_buying_wins() -> None:
    for rent in (0.3, 1.0, 2.5, 5.12):
        for u in UTILIZATIONS:
            for rate in (0.0, 0.08):
                result = evaluate_tco(
                    a100(
                        rent_usd_per_hour=rent,
                        utilization=u,
                        power_watts=400.0,
                        cost_of_capital=rate,
                    )
                )
                assert (result.months_to_break_even is not None) == (result.verdict == "buy")
                assert (result.monthly_delta_usd > 0) == (result.verdict == "buy")
                if result.months_to_break_even is not None:
                    assert 0 < result.months_to_break_even < 36


def test_equal_costs_rent() -> None:
    # owned $8,760/year against $2/h at 50 %: both $8,760 a year
    inputs = TcoInputs(
        purchase_usd=8760,
        rent_usd_per_hour=2.0,
        utilization=0.5,
        years=1,
        power_watts=0,
        ops_usd_per_year=0.0,
        cost_of_capital=0.0,
    )
    result = evaluate_tco(inputs)
    assert result.rent_total_usd == result.own_total_usd
    assert result.verdict == "rent"
    assert result.months_to_break_even is None


# --- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"purchase_usd": -1.0}, "purchase_usd"),
        ({"rent_usd_per_hour": 0.0}, "rent_usd_per_hour"),
        ({"utilization": 0.0}, "utilization"),
        ({"utilization": 1.01}, "utilization"),
        ({"utilization": math.nan}, "utilization"),
        ({"years": 0.0}, "years"),
        ({"power_watts": -400.0}, "power_watts"),
        ({"usd_per_kwh": math.inf}, "usd_per_kwh"),
        ({"pue": 0.9}, "pue"),
        ({"hosting_usd_per_kw_month": -5.0}, "hosting"),
        ({"ops_usd_per_year": -1.0}, "ops"),
        ({"tokens_per_second": 0.0}, "tokens_per_second"),
        ({"cost_of_capital": 8.0}, "cost_of_capital"),
        ({"cost_of_capital": -0.01}, "cost_of_capital"),
        ({"facility": "garage"}, "facility"),
        ({"host_capex_usd": -1.0}, "host_capex_usd"),
    ],
)
def test_inputs_are_validated(changes: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        a100(**changes)
