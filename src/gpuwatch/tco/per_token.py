"""Cost per token, rented and owned, and the catalog's GPUs ranked by it.

Rented: you pay the hourly price while the GPU works, so
``$/1M tokens = rent $/h / (tokens/s x 3600) x 1e6``. Owned: the GPU costs its owned
$/GPU-year (`model.owned_usd_per_gpu_year`, the one owned-cost model) / 8760 every
wall-clock hour, busy or not, while tokens come only at the utilization, so
``$/1M tokens = owned $/h / (tokens/s x utilization x 3600) x 1e6``.

`Ownership` is seed 001's method as that model's inputs: the purchase amortized
without interest over the life, the board's TDP x PUE at $/kWh, and no host share,
hosting or operations, i.e. ``purchase / (life x 8760) + TDP kW x PUE x $/kWh`` per
hour (``pue=1`` gives seed 001's board-power-only figures). `gpuwatch size` prices its
owned column with a `RentVsBuyConfig` instead (host share, cost of capital, facility,
ops), so it agrees with `gpuwatch tco` and the agent.

`rank_gpus` puts dollars on `gpuwatch.sizing.fit.fit_gpus`'s physics (fit, GPUs
needed, tokens/s, shapes): each GPU's shapes priced as a whole (N GPUs x the GPU's $/h,
over the shape's tokens/s), the cheapest by `rank_by` chosen as the GPU's deployment,
and every GPU ranked by its deployment's cost, one GPU or many alike; GPUs with no
shape that holds the workload last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuwatch.core.units import HOURS_PER_YEAR
from gpuwatch.sizing.fit import DEFAULT_HEADROOM, fit_gpus
from gpuwatch.sizing.gpus import GpuCatalog, GpuSpec
from gpuwatch.sizing.parallel import Shape
from gpuwatch.sizing.workload import DEFAULT_ASSUMPTIONS, MemoryAssumptions, Workload
from gpuwatch.tco.config import RentVsBuyConfig
from gpuwatch.tco.model import (
    DEFAULT_PUE,
    DEFAULT_USD_PER_KWH,
    owned_usd_per_gpu_year,
    usd_per_million_tokens,
)


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
    """Wall-clock cost of owning one GPU, $/h, by seed 001's method: the owned-cost
    model with no cost of capital, host share, hosting or operations (amortization plus
    power at TDP x PUE in a room of your own)."""
    per_year = owned_usd_per_gpu_year(
        purchase_usd,
        ownership.life_years,
        tdp_watts,
        usd_per_kwh=ownership.usd_per_kwh,
        pue=ownership.pue,
        hosting_usd_per_kw_month=0.0,
        ops_usd_per_year=0.0,
        cost_of_capital=0.0,
        facility="owned",
    )
    return per_year / HOURS_PER_YEAR


def usd_per_million_tokens_rented(rent_usd_per_hour: float, tokens_per_second: float) -> float:
    """$ per 1M tokens on a rented GPU billed only while it produces tokens."""
    return usd_per_million_tokens(rent_usd_per_hour, tokens_per_second)


def usd_per_million_tokens_at(
    usd_per_hour: float, tokens_per_second: float, utilization: float
) -> float:
    """$ per 1M tokens for a GPU costing `usd_per_hour` every wall-clock hour and busy
    `utilization` (0, 1] of them: `gpuwatch size`'s owned column with the rent-vs-buy
    model's owned $/GPU-year / 8760 (host share, cost of capital, facility, ops)."""
    if not 0 < utilization <= 1:
        raise ValueError("utilization must be in (0, 1]")
    return usd_per_million_tokens(usd_per_hour, tokens_per_second * utilization)


def usd_per_million_tokens_owned(
    purchase_usd: float,
    tdp_watts: float,
    tokens_per_second: float,
    ownership: Ownership = DEFAULT_OWNERSHIP,
) -> float:
    """$ per 1M tokens on an owned GPU busy `ownership.utilization` of the time."""
    return usd_per_million_tokens(
        owned_usd_per_hour(purchase_usd, tdp_watts, ownership),
        tokens_per_second * ownership.utilization,
    )


RankBy = Literal["usd-per-million-tokens", "usd-per-hour"]
RANK_BY: tuple[RankBy, ...] = ("usd-per-million-tokens", "usd-per-hour")
"""What the ranking minimizes: rented $ per 1M tokens (the default), or rented $/h."""


@dataclass(frozen=True, slots=True)
class PricedShape:
    """A shape (`sizing.parallel.Shape`) priced whole: its GPUs' rent per hour, and
    rented and owned $ per 1M of its tokens."""

    shape: Shape
    usd_per_hour_rented: float
    usd_per_million_tokens_rented: float
    usd_per_million_tokens_owned: float

    def cost(self, rank_by: RankBy) -> tuple[float, float]:
        """The sort key: the chosen cost, then the other."""
        if rank_by == "usd-per-hour":
            return (self.usd_per_hour_rented, self.usd_per_million_tokens_rented)
        return (self.usd_per_million_tokens_rented, self.usd_per_hour_rented)


@dataclass(frozen=True, slots=True)
class RankedGpu:
    """One catalog GPU judged against a workload, priced.

    `tokens_per_second` and the $/1M figures are per GPU: for a GPU that does not fit
    they are what each of `gpus_needed` GPUs would give with ideal sharding.
    `deployment`: the cheapest shape that holds the workload (None: none does), whose
    cost ranks the GPU.
    """

    gpu: GpuSpec
    fits: bool
    gpus_needed: int
    tokens_per_second: float
    usd_per_million_tokens_rented: float
    usd_per_million_tokens_owned: float
    deployment: PricedShape | None = None

    @property
    def name(self) -> str:
        """The catalog id."""
        return self.gpu.id

    @property
    def memory_bytes(self) -> int:
        """The GPU's memory, decimal bytes."""
        return self.gpu.memory_bytes


def _owned_usd_per_hour(
    gpu: GpuSpec, ownership: Ownership, rent_vs_buy: RentVsBuyConfig | None
) -> float:
    """One owned GPU's wall-clock $/h: seed 001's method, or the rent-vs-buy model's."""
    if rent_vs_buy is None:
        return owned_usd_per_hour(gpu.purchase_usd, gpu.tdp_watts, ownership)
    return rent_vs_buy.owned_usd_per_gpu_year(gpu) / HOURS_PER_YEAR


def price_shape(
    shape: Shape, gpu: GpuSpec, owned_usd_per_hour: float, utilization: float
) -> PricedShape:
    """`shape` of `gpu` priced whole: N x rent per hour; $/1M tokens rented and owned."""
    rent = shape.gpus * gpu.rent_usd_per_hour
    return PricedShape(
        shape=shape,
        usd_per_hour_rented=rent,
        usd_per_million_tokens_rented=usd_per_million_tokens(rent, shape.tokens_per_second),
        usd_per_million_tokens_owned=usd_per_million_tokens_at(
            shape.gpus * owned_usd_per_hour, shape.tokens_per_second, utilization
        ),
    )


def rank_gpus(
    catalog: GpuCatalog,
    workload: Workload,
    *,
    headroom: float = DEFAULT_HEADROOM,
    efficiency: float | None = None,
    ownership: Ownership = DEFAULT_OWNERSHIP,
    assumptions: MemoryAssumptions = DEFAULT_ASSUMPTIONS,
    rent_vs_buy: RentVsBuyConfig | None = None,
    rank_by: RankBy = "usd-per-million-tokens",
) -> tuple[RankedGpu, ...]:
    """Every catalog GPU for `workload`, by its deployment's `rank_by` cost (GPUs
    without a deployment last, by per-GPU rented $/1M tokens).

    A GPU's deployment is its cheapest shape by `rank_by` (ties: the other cost, then
    fewer GPUs). `efficiency` None takes the mode's default (see
    `sizing.throughput.tokens_per_second`). `rent_vs_buy` (`gpuwatch size` gives the
    config's, under its owning options) prices the owned column with its owned
    $/GPU-year / 8760 at `ownership.utilization`; None prices it by seed 001's method
    with `ownership`.
    """
    if rank_by not in RANK_BY:
        raise ValueError(f"rank_by must be one of {', '.join(RANK_BY)}, got {rank_by!r}")
    ranked = []
    for fit in fit_gpus(
        catalog, workload, headroom=headroom, efficiency=efficiency, assumptions=assumptions
    ):
        gpu, speed = fit.gpu, fit.tokens_per_second
        owned_per_hour = _owned_usd_per_hour(gpu, ownership, rent_vs_buy)
        priced = [
            price_shape(shape, gpu, owned_per_hour, ownership.utilization) for shape in fit.shapes
        ]
        ranked.append(
            RankedGpu(
                gpu=gpu,
                fits=fit.fits,
                gpus_needed=fit.gpus_needed,
                tokens_per_second=speed,
                usd_per_million_tokens_rented=usd_per_million_tokens_rented(
                    gpu.rent_usd_per_hour, speed
                ),
                usd_per_million_tokens_owned=usd_per_million_tokens_at(
                    owned_per_hour, speed, ownership.utilization
                ),
                deployment=min(
                    priced,
                    key=lambda p: (*p.cost(rank_by), p.shape.gpus),
                    default=None,
                ),
            )
        )
    ranked.sort(key=lambda r: _rank_key(r, rank_by))
    return tuple(ranked)


def _rank_key(row: RankedGpu, rank_by: RankBy) -> tuple[bool, float, float, str]:
    if row.deployment is None:
        return (True, row.usd_per_million_tokens_rented, 0.0, row.name)
    return (False, *row.deployment.cost(rank_by), row.name)
