"""Rent vs buy arithmetic for one GPU: pure functions of floats, no I/O.

The cost model (the one behind the seeds' break-even): renting pays only the GPU-hours
used, ``rent $/h x 8760 x years x utilization``; owning pays for the GPU every hour of
its life, busy or not, ``owned $/GPU-year x years``, where

    owned $/GPU-year = purchase / life + kW x PUE x 8760 x $/kWh
                       + hosting $/kW-month x kW x 12 + ops $/year

so buying wins above the break-even utilization ``u* = owned $/GPU-year / (rent $/h x
8760)``. The period compared is the life the purchase is amortized over. Years are 365
days (8760 h, seed 001), months a twelfth of that (730 h). Money is USD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpuwatch.sizing import cost as sizing_cost
from gpuwatch.sizing.units import HOURS_PER_YEAR, SECONDS_PER_HOUR

MONTHS_PER_YEAR = 12
HOURS_PER_MONTH = HOURS_PER_YEAR / MONTHS_PER_YEAR
"""730: a twelfth of a 365-day year."""

WATTS_PER_KILOWATT = 1000
TOKENS_PER_MILLION = 1_000_000

DEFAULT_USD_PER_KWH = sizing_cost.DEFAULT_USD_PER_KWH
"""Electricity price, $/kWh: the project's one default, `gpuwatch size`'s too (seed 001's)."""

DEFAULT_PUE = sizing_cost.DEFAULT_PUE
"""Facility power / IT power: the project's one default (1.58, Uptime Institute 2023),
`gpuwatch size`'s owned column's too. Seed 001 counts board power only (PUE 1.0)."""

DEFAULT_HOSTING_USD_PER_KW_MONTH = 0.0
"""Colocation fee per kW of IT load per month: none (a room of your own)."""

DEFAULT_OPS_USD_PER_YEAR = 0.0
"""Operations labour, support, spares per GPU per year: none (seed 001 leaves it out)."""

Verdict = Literal["rent", "buy"]


def _check(name: str, value: float, *, positive: bool = False) -> None:
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")


@dataclass(frozen=True, slots=True)
class TcoInputs:
    """One GPU, rented or bought, over `years`.

    `purchase_usd`: price of one GPU, $. `rent_usd_per_hour`: rent of one GPU, $/h.
    `utilization`: busy fraction of wall-clock time, (0, 1]. `years`: the life the
    purchase is amortized over and the period compared. `power_watts`: board power
    drawn every hour owned, W (0 leaves power out). `usd_per_kwh`: electricity, $/kWh.
    `pue`: facility power per IT watt, >= 1. `hosting_usd_per_kw_month`: colocation,
    $ per kW of IT load per month. `ops_usd_per_year`: operations per GPU, $/year.
    `tokens_per_second`: throughput while busy, for $/1M tokens; None: not priced.
    """

    purchase_usd: float
    rent_usd_per_hour: float
    utilization: float
    years: float
    power_watts: float
    usd_per_kwh: float = DEFAULT_USD_PER_KWH
    pue: float = DEFAULT_PUE
    hosting_usd_per_kw_month: float = DEFAULT_HOSTING_USD_PER_KW_MONTH
    ops_usd_per_year: float = DEFAULT_OPS_USD_PER_YEAR
    tokens_per_second: float | None = None

    def __post_init__(self) -> None:
        _check("purchase_usd", self.purchase_usd)
        _check("rent_usd_per_hour", self.rent_usd_per_hour, positive=True)
        _check("years", self.years, positive=True)
        _check("power_watts", self.power_watts)
        _check("usd_per_kwh", self.usd_per_kwh)
        _check("hosting_usd_per_kw_month", self.hosting_usd_per_kw_month)
        _check("ops_usd_per_year", self.ops_usd_per_year)
        if not (math.isfinite(self.utilization) and 0 < self.utilization <= 1):
            raise ValueError(f"utilization must be in (0, 1], got {self.utilization!r}")
        if not (math.isfinite(self.pue) and self.pue >= 1):
            raise ValueError(f"pue must be a finite number >= 1, got {self.pue!r}")
        if self.tokens_per_second is not None:
            _check("tokens_per_second", self.tokens_per_second, positive=True)


@dataclass(frozen=True, slots=True)
class TcoResult:
    """Renting vs owning one GPU over the period, USD.

    `gpu_hours_used`: hours rented (= used) over the period. `owned_usd_per_gpu_year`:
    the owned GPU's cost per year, busy or not. `breakeven_utilization`: the busy
    fraction at which both cost the same (above 1: renting is cheaper even at 100 %).
    `months_to_break_even`: when cumulative rent overtakes the purchase plus running
    costs, None if not within the period. `monthly_delta_usd`: monthly rent at the
    utilization minus monthly owned cost, positive when buying is cheaper. The $/1M
    token figures are None without `tokens_per_second`.
    """

    rent_total_usd: float
    own_total_usd: float
    owned_usd_per_gpu_year: float
    breakeven_utilization: float
    months_to_break_even: float | None
    verdict: Verdict
    own_usd_per_million_tokens: float | None
    rent_usd_per_million_tokens: float | None
    gpu_hours_used: float
    monthly_delta_usd: float


def running_usd_per_gpu_year(
    power_watts: float,
    *,
    usd_per_kwh: float = DEFAULT_USD_PER_KWH,
    pue: float = DEFAULT_PUE,
    hosting_usd_per_kw_month: float = DEFAULT_HOSTING_USD_PER_KW_MONTH,
    ops_usd_per_year: float = DEFAULT_OPS_USD_PER_YEAR,
) -> float:
    """Owning's yearly cost besides the purchase, $/GPU-year: power x PUE, hosting, ops."""
    kilowatts = power_watts / WATTS_PER_KILOWATT
    power = kilowatts * pue * HOURS_PER_YEAR * usd_per_kwh
    hosting = hosting_usd_per_kw_month * kilowatts * MONTHS_PER_YEAR
    return power + hosting + ops_usd_per_year


def owned_usd_per_gpu_year(
    purchase_usd: float,
    life_years: float,
    power_watts: float,
    *,
    usd_per_kwh: float = DEFAULT_USD_PER_KWH,
    pue: float = DEFAULT_PUE,
    hosting_usd_per_kw_month: float = DEFAULT_HOSTING_USD_PER_KW_MONTH,
    ops_usd_per_year: float = DEFAULT_OPS_USD_PER_YEAR,
) -> float:
    """Cost of owning one GPU, $/year: purchase / life + power x PUE + hosting + ops."""
    if life_years <= 0:
        raise ValueError(f"life_years must be > 0, got {life_years!r}")
    return purchase_usd / life_years + running_usd_per_gpu_year(
        power_watts,
        usd_per_kwh=usd_per_kwh,
        pue=pue,
        hosting_usd_per_kw_month=hosting_usd_per_kw_month,
        ops_usd_per_year=ops_usd_per_year,
    )


def breakeven_utilization(owned_usd_per_gpu_year: float, rent_usd_per_hour: float) -> float:
    """u* = owned $/GPU-year / (rent $/h x 8760): buying is cheaper above it (a ratio)."""
    if rent_usd_per_hour <= 0:
        raise ValueError(f"rent_usd_per_hour must be > 0, got {rent_usd_per_hour!r}")
    return owned_usd_per_gpu_year / (rent_usd_per_hour * HOURS_PER_YEAR)


def monthly_delta_usd(
    rent_usd_per_hour: float, utilization: float, owned_usd_per_gpu_year: float
) -> float:
    """Monthly rent at `utilization` [0, 1] minus the monthly owned cost, $/month.

    Positive when buying would be cheaper; the live gauge the agent exports.
    """
    if not 0 <= utilization <= 1:
        raise ValueError(f"utilization must be in [0, 1], got {utilization!r}")
    return (
        rent_usd_per_hour * HOURS_PER_MONTH * utilization - owned_usd_per_gpu_year / MONTHS_PER_YEAR
    )


def _owned_per_year(inputs: TcoInputs) -> float:
    return owned_usd_per_gpu_year(
        inputs.purchase_usd,
        inputs.years,
        inputs.power_watts,
        usd_per_kwh=inputs.usd_per_kwh,
        pue=inputs.pue,
        hosting_usd_per_kw_month=inputs.hosting_usd_per_kw_month,
        ops_usd_per_year=inputs.ops_usd_per_year,
    )


def _months_to_break_even(inputs: TcoInputs) -> float | None:
    """Purchase at month 0, then running costs monthly against rent monthly."""
    running = running_usd_per_gpu_year(
        inputs.power_watts,
        usd_per_kwh=inputs.usd_per_kwh,
        pue=inputs.pue,
        hosting_usd_per_kw_month=inputs.hosting_usd_per_kw_month,
        ops_usd_per_year=inputs.ops_usd_per_year,
    )
    saved_per_month = (
        inputs.rent_usd_per_hour * HOURS_PER_MONTH * inputs.utilization - running / MONTHS_PER_YEAR
    )
    if saved_per_month <= 0:
        return None
    return inputs.purchase_usd / saved_per_month


def _per_million(usd_per_hour: float, tokens_per_second: float) -> float:
    return usd_per_hour / (tokens_per_second * SECONDS_PER_HOUR) * TOKENS_PER_MILLION


def evaluate_tco(inputs: TcoInputs) -> TcoResult:
    """Rent vs buy for `inputs`: totals over the period, break-even, verdict, $/1M tokens.

    The verdict is "buy" when owning costs strictly less over the period, else "rent";
    `months_to_break_even` is set exactly when the verdict is "buy".
    """
    owned_per_year = _owned_per_year(inputs)
    gpu_hours_used = HOURS_PER_YEAR * inputs.years * inputs.utilization
    rent_total = inputs.rent_usd_per_hour * gpu_hours_used
    own_total = owned_per_year * inputs.years
    verdict: Verdict = "buy" if own_total < rent_total else "rent"
    own_per_million: float | None = None
    rent_per_million: float | None = None
    if inputs.tokens_per_second is not None:
        # the owned GPU's cost per wall-clock hour, spread over the tokens of its busy hours
        own_per_million = _per_million(
            owned_per_year / HOURS_PER_YEAR, inputs.tokens_per_second * inputs.utilization
        )
        rent_per_million = _per_million(inputs.rent_usd_per_hour, inputs.tokens_per_second)
    return TcoResult(
        rent_total_usd=rent_total,
        own_total_usd=own_total,
        owned_usd_per_gpu_year=owned_per_year,
        breakeven_utilization=breakeven_utilization(owned_per_year, inputs.rent_usd_per_hour),
        months_to_break_even=_months_to_break_even(inputs) if verdict == "buy" else None,
        verdict=verdict,
        own_usd_per_million_tokens=own_per_million,
        rent_usd_per_million_tokens=rent_per_million,
        gpu_hours_used=gpu_hours_used,
        monthly_delta_usd=monthly_delta_usd(
            inputs.rent_usd_per_hour, inputs.utilization, owned_per_year
        ),
    )
