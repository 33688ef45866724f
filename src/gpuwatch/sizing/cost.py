"""Cost per token: renting a GPU-hour versus owning the GPU (seed 001's method).

Rented: you pay the hourly price while the GPU works, so
``$/1M tokens = rent $/h / (tokens/s x 3600) x 1e6``. Owned: the purchase is amortized
over the life and the board draws its TDP every hour of it, busy or not, times the
facility's PUE, while tokens come only at the utilization, so
``$/1M tokens = (purchase / (life x 8760) + TDP kW x PUE x $/kWh) / (tokens/s x
utilization x 3600) x 1e6``. `DEFAULT_PUE` and `DEFAULT_USD_PER_KWH` are the project's
one default of each (``gpuwatch tco`` uses the same); ``pue=1`` gives seed 001's
board-power-only figures. Not counted: the host, networking, hosting, operations and the
cost of capital. `gpuwatch size` prices its owned column with the rent-vs-buy model
instead (`usd_per_million_tokens_at` of `RentVsBuyConfig.owned_usd_per_gpu_year` / 8760),
so it agrees with `gpuwatch tco` and the agent; these functions are seed 001's method.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.sizing.units import HOURS_PER_YEAR, SECONDS_PER_HOUR

TOKENS_PER_MILLION = 1_000_000
WATTS_PER_KILOWATT = 1000

DEFAULT_USD_PER_KWH = 0.12
"""Electricity price, $/kWh: seed 001's cost table."""

DEFAULT_PUE = 1.58
"""Facility power / IT power: Uptime Institute Global Data Center Survey 2023 average
(REFERENCE.md: industry 1.55-1.59). Seed 001 counts board power only (PUE 1.0)."""


@dataclass(frozen=True, slots=True)
class Ownership:
    """Owned-hardware assumptions: seed 001's cost table, with the project's PUE.

    `life_years`: amortization period. `usd_per_kwh`: electricity price.
    `utilization`: fraction of wall-clock time the GPU produces tokens (0-1].
    `pue`: facility watts per board watt, >= 1 (1.0 is seed 001's board power only).
    """

    life_years: float = 3.0
    usd_per_kwh: float = DEFAULT_USD_PER_KWH
    utilization: float = 0.7
    pue: float = DEFAULT_PUE

    def __post_init__(self) -> None:
        if self.life_years <= 0:
            raise ValueError("life_years must be positive")
        if self.usd_per_kwh < 0:
            raise ValueError("usd_per_kwh must be >= 0")
        if not 0 < self.utilization <= 1:
            raise ValueError("utilization must be in (0, 1]")
        if not self.pue >= 1:
            raise ValueError(f"pue must be >= 1 (facility watts per IT watt), got {self.pue}")


DEFAULT_OWNERSHIP = Ownership()


def owned_usd_per_hour(
    purchase_usd: float, tdp_watts: float, ownership: Ownership = DEFAULT_OWNERSHIP
) -> float:
    """Wall-clock cost of owning one GPU, $/h: amortization plus power at TDP x PUE."""
    amortization = purchase_usd / (ownership.life_years * HOURS_PER_YEAR)
    power = tdp_watts / WATTS_PER_KILOWATT * ownership.pue * ownership.usd_per_kwh
    return amortization + power


def _per_million(usd_per_hour: float, tokens_per_second: float) -> float:
    if tokens_per_second <= 0:
        raise ValueError("tokens_per_second must be positive")
    return usd_per_hour / (tokens_per_second * SECONDS_PER_HOUR) * TOKENS_PER_MILLION


def usd_per_million_tokens_rented(rent_usd_per_hour: float, tokens_per_second: float) -> float:
    """$ per 1M tokens on a rented GPU billed only while it produces tokens."""
    return _per_million(rent_usd_per_hour, tokens_per_second)


def usd_per_million_tokens_at(
    usd_per_hour: float, tokens_per_second: float, utilization: float
) -> float:
    """$ per 1M tokens for a GPU costing `usd_per_hour` every wall-clock hour and busy
    `utilization` (0, 1] of them: `gpuwatch size`'s owned column with the rent-vs-buy
    model's owned $/GPU-year / 8760 (host share, cost of capital, facility, ops)."""
    if not 0 < utilization <= 1:
        raise ValueError("utilization must be in (0, 1]")
    return _per_million(usd_per_hour, tokens_per_second * utilization)


def usd_per_million_tokens_owned(
    purchase_usd: float,
    tdp_watts: float,
    tokens_per_second: float,
    ownership: Ownership = DEFAULT_OWNERSHIP,
) -> float:
    """$ per 1M tokens on an owned GPU busy `ownership.utilization` of the time."""
    return _per_million(
        owned_usd_per_hour(purchase_usd, tdp_watts, ownership),
        tokens_per_second * ownership.utilization,
    )
