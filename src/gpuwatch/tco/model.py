"""Rent vs buy arithmetic for one GPU: pure functions of floats, no I/O.

The cost model (the one behind the seeds' break-even): renting pays only the GPU-hours
used, ``rent $/h x 8760 x years x utilization``; owning pays for the GPU every hour of
its life, busy or not, ``owned $/GPU-year x years``, where

    owned $/GPU-year = capital + kW x PUE' x 8760 x $/kWh
                       + hosting $/kW-month x kW x 12 + ops $/year
    capital          = 12 x capex x i / (1 - (1 + i)^-(12 x life)),  i = cost of capital / 12
                       (capex / life when the cost of capital is 0)

with capex the GPU's price plus its host's share and kW the GPU's plus the host's power.
PUE' is the facility's PUE in a room of your own ("owned") and 1 in a colocation
facility ("colocation"), whose $/kW-month fee already pays for cooling and power
delivery. Buying wins above the break-even utilization ``u* = owned $/GPU-year / (rent
$/h x 8760)``. The period compared is the life the purchase is amortized over. Years are
365 days (8760 h, seed 001), months a twelfth of that (730 h). Money is USD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpuwatch.core.units import HOUR_SECONDS, HOURS_PER_MONTH, HOURS_PER_YEAR

MONTHS_PER_YEAR = 12

WATTS_PER_KILOWATT = 1000
TOKENS_PER_MILLION = 1_000_000

DEFAULT_USD_PER_KWH = 0.12
"""Electricity price, $/kWh: the project's one default, `gpuwatch size`'s too (seed 001's
cost table)."""

DEFAULT_PUE = 1.58
"""Facility power / IT power: the project's one default, `gpuwatch size`'s owned column's
too: Uptime Institute Global Data Center Survey 2023 average (REFERENCE.md: industry
1.55-1.59). Seed 001 counts board power only (PUE 1.0)."""

DEFAULT_HOSTING_USD_PER_KW_MONTH = 0.0
"""Colocation fee per kW of IT load per month: none (a room of your own)."""

DEFAULT_OPS_USD_PER_YEAR = 462.5
"""Operations per GPU per year, $: an estimate. One GPU cluster engineer (US median base
salary $185,000, levels.fyi 2022-2025 as summarised in "AI Infrastructure at Scale",
AI Engineers, June 2026) looks after 50-200 8-GPU nodes; the low end, 400 GPUs, is taken:
185,000 / 400 = 462.50. Seed 001 leaves operations out (set 0 to reproduce it)."""

DEFAULT_COST_OF_CAPITAL = 0.08
"""Cost of capital, a nominal yearly rate compounded monthly: an estimate, 8 %. The US
bank prime loan rate (Federal Reserve H.15, series DPRIME) stood between 7.5 % and 8.5 %
from July 2023 to September 2025, the least a business borrowing to buy hardware pays.
Seed 001 amortizes without interest (set 0 to reproduce it)."""

Verdict = Literal["rent", "buy"]

Facility = Literal["colocation", "owned"]
"""Where an owned GPU stands. "colocation": a $/kW-month fee that already covers cooling
and power delivery, energy metered at the IT load (PUE not applied again). "owned": a
room of your own, energy x PUE."""

FACILITIES: tuple[Facility, ...] = ("colocation", "owned")

DEFAULT_FACILITY: Facility = "owned"
"""For bare figures (no catalog GPU): a room of your own, as seed 001 prices power."""


def _check(name: str, value: float, *, positive: bool = False) -> None:
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")


def _check_cost_of_capital(value: float) -> None:
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise ValueError(f"cost_of_capital must be in [0, 1] (0.08 is 8 %/year), got {value!r}")


def _check_facility(value: str) -> None:
    if value not in FACILITIES:
        raise ValueError(f"facility must be one of {', '.join(FACILITIES)}, got {value!r}")


def applied_pue(pue: float, facility: Facility) -> float:
    """The PUE energy is multiplied by: `pue` in a room of your own, 1 in colocation."""
    return 1.0 if facility == "colocation" else pue


def capital_usd_per_year(capex_usd: float, life_years: float, cost_of_capital: float) -> float:
    """The purchase as level monthly payments over the life, $/year (a loan's PMT x 12).

    ``12 x capex x i / (1 - (1 + i)^-(12 x life))`` with ``i = cost_of_capital / 12``;
    ``capex / life`` (straight-line) when the cost of capital is 0.
    """
    if life_years <= 0:
        raise ValueError(f"life_years must be > 0, got {life_years!r}")
    _check_cost_of_capital(cost_of_capital)
    if cost_of_capital == 0:
        return capex_usd / life_years
    i = cost_of_capital / MONTHS_PER_YEAR
    months = MONTHS_PER_YEAR * life_years
    return MONTHS_PER_YEAR * capex_usd * i / (1 - math.pow(1 + i, -months))


@dataclass(frozen=True, slots=True)
class TcoInputs:
    """One GPU, rented or bought, over `years`.

    `purchase_usd`: price of one GPU, $. `rent_usd_per_hour`: rent of one GPU, $/h.
    `utilization`: busy fraction of wall-clock time, (0, 1]. `years`: the life the
    purchase is amortized over and the period compared. `power_watts`: board power
    drawn every hour owned, W (0 leaves power out). `usd_per_kwh`: electricity, $/kWh.
    `pue`: facility power per IT watt, >= 1, applied only when `facility` is "owned".
    `hosting_usd_per_kw_month`: colocation, $ per kW of IT load per month.
    `ops_usd_per_year`: operations per GPU, $/year. `cost_of_capital`: yearly rate
    [0, 1] the purchase is financed at (monthly payments). `facility`: "colocation" or
    "owned" (see `Facility`). `host_capex_usd`, `host_power_watts`: the host's share of
    server and networking, and of power, per GPU (0: a bare card).
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
    cost_of_capital: float = DEFAULT_COST_OF_CAPITAL
    facility: Facility = DEFAULT_FACILITY
    host_capex_usd: float = 0.0
    host_power_watts: float = 0.0

    @property
    def capex_usd(self) -> float:
        """What is bought, $: the GPU and its host's share."""
        return self.purchase_usd + self.host_capex_usd

    @property
    def it_power_watts(self) -> float:
        """IT power drawn every hour owned, W: the GPU and its host's share."""
        return self.power_watts + self.host_power_watts

    @property
    def applied_pue(self) -> float:
        """The PUE energy is multiplied by (1 in colocation)."""
        return applied_pue(self.pue, self.facility)

    def __post_init__(self) -> None:
        _check("purchase_usd", self.purchase_usd)
        _check("rent_usd_per_hour", self.rent_usd_per_hour, positive=True)
        _check("years", self.years, positive=True)
        _check("power_watts", self.power_watts)
        _check("usd_per_kwh", self.usd_per_kwh)
        _check("hosting_usd_per_kw_month", self.hosting_usd_per_kw_month)
        _check("ops_usd_per_year", self.ops_usd_per_year)
        _check("host_capex_usd", self.host_capex_usd)
        _check("host_power_watts", self.host_power_watts)
        _check_cost_of_capital(self.cost_of_capital)
        _check_facility(self.facility)
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
    token figures are None without `tokens_per_second`. `capital_usd_per_year`,
    `energy_usd_per_year`, `hosting_usd_per_year` and `ops_usd_per_year` are the parts
    of `owned_usd_per_gpu_year` (they sum to it); `pue_applied` the PUE energy was
    multiplied by.
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
    capital_usd_per_year: float = 0.0
    energy_usd_per_year: float = 0.0
    hosting_usd_per_year: float = 0.0
    ops_usd_per_year: float = 0.0
    pue_applied: float = 1.0


def running_usd_per_gpu_year(
    power_watts: float,
    *,
    usd_per_kwh: float = DEFAULT_USD_PER_KWH,
    pue: float = DEFAULT_PUE,
    hosting_usd_per_kw_month: float = DEFAULT_HOSTING_USD_PER_KW_MONTH,
    ops_usd_per_year: float = DEFAULT_OPS_USD_PER_YEAR,
    facility: Facility = DEFAULT_FACILITY,
) -> float:
    """Owning's yearly cost besides the purchase, $/GPU-year: energy (x PUE in a room of
    your own), hosting, ops. `power_watts` is the IT power (GPU and host)."""
    _check_facility(facility)
    kilowatts = power_watts / WATTS_PER_KILOWATT
    power = kilowatts * applied_pue(pue, facility) * HOURS_PER_YEAR * usd_per_kwh
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
    cost_of_capital: float = DEFAULT_COST_OF_CAPITAL,
    facility: Facility = DEFAULT_FACILITY,
) -> float:
    """Cost of owning one GPU, $/year: capital (the purchase financed at the cost of
    capital over the life) + energy + hosting + ops. `purchase_usd` and `power_watts`
    are what is bought and drawn: the GPU's, plus its host's share if counted."""
    return capital_usd_per_year(purchase_usd, life_years, cost_of_capital) + (
        running_usd_per_gpu_year(
            power_watts,
            usd_per_kwh=usd_per_kwh,
            pue=pue,
            hosting_usd_per_kw_month=hosting_usd_per_kw_month,
            ops_usd_per_year=ops_usd_per_year,
            facility=facility,
        )
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


def _running_per_year(inputs: TcoInputs) -> float:
    return running_usd_per_gpu_year(
        inputs.it_power_watts,
        usd_per_kwh=inputs.usd_per_kwh,
        pue=inputs.pue,
        hosting_usd_per_kw_month=inputs.hosting_usd_per_kw_month,
        ops_usd_per_year=inputs.ops_usd_per_year,
        facility=inputs.facility,
    )


def _months_to_break_even(inputs: TcoInputs) -> float | None:
    """Purchase at month 0, financed at the cost of capital; then each month renting
    would cost `saved` more than running the owned GPU, which repays the balance.

    Months until the balance is repaid: ``capex / saved`` without interest, else
    ``-ln(1 - capex x i / saved) / ln(1 + i)`` with ``i = cost_of_capital / 12``;
    None when it never is.
    """
    saved_per_month = (
        inputs.rent_usd_per_hour * HOURS_PER_MONTH * inputs.utilization
        - _running_per_year(inputs) / MONTHS_PER_YEAR
    )
    if saved_per_month <= 0:
        return None
    i = inputs.cost_of_capital / MONTHS_PER_YEAR
    if i == 0:
        return inputs.capex_usd / saved_per_month
    owed = inputs.capex_usd * i / saved_per_month
    if owed >= 1:
        return None
    return -math.log(1 - owed) / math.log(1 + i)


def usd_per_million_tokens(usd_per_hour: float, tokens_per_second: float) -> float:
    """$ per 1M tokens from a cost per hour and the tokens/s of that hour."""
    if tokens_per_second <= 0:
        raise ValueError("tokens_per_second must be positive")
    return usd_per_hour / (tokens_per_second * HOUR_SECONDS) * TOKENS_PER_MILLION


def evaluate_tco(inputs: TcoInputs) -> TcoResult:
    """Rent vs buy for `inputs`: totals over the period, break-even, verdict, $/1M tokens.

    The verdict is "buy" when owning costs strictly less over the period, else "rent";
    `months_to_break_even` is set exactly when the verdict is "buy".
    """
    capital = capital_usd_per_year(inputs.capex_usd, inputs.years, inputs.cost_of_capital)
    kilowatts = inputs.it_power_watts / WATTS_PER_KILOWATT
    energy = kilowatts * inputs.applied_pue * HOURS_PER_YEAR * inputs.usd_per_kwh
    hosting = inputs.hosting_usd_per_kw_month * kilowatts * MONTHS_PER_YEAR
    owned_per_year = capital + energy + hosting + inputs.ops_usd_per_year
    gpu_hours_used = HOURS_PER_YEAR * inputs.years * inputs.utilization
    rent_total = inputs.rent_usd_per_hour * gpu_hours_used
    own_total = owned_per_year * inputs.years
    verdict: Verdict = "buy" if own_total < rent_total else "rent"
    own_per_million: float | None = None
    rent_per_million: float | None = None
    if inputs.tokens_per_second is not None:
        # the owned GPU's cost per wall-clock hour, spread over the tokens of its busy hours
        own_per_million = usd_per_million_tokens(
            owned_per_year / HOURS_PER_YEAR, inputs.tokens_per_second * inputs.utilization
        )
        rent_per_million = usd_per_million_tokens(
            inputs.rent_usd_per_hour, inputs.tokens_per_second
        )
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
        capital_usd_per_year=capital,
        energy_usd_per_year=energy,
        hosting_usd_per_year=hosting,
        ops_usd_per_year=inputs.ops_usd_per_year,
        pue_applied=inputs.applied_pue,
    )
