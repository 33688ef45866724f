"""What a GPU costs, rented or owned, in USD: the one owned-cost model.

`model` is the pure arithmetic (owned $/GPU-year, break-even utilization, totals over the
life, months to break even, $/1M tokens), `config` the ``[rent_vs_buy]`` section that
fills unset figures from the sizing catalog, `host_share` the host's part of owning a
GPU by tier, `per_token` $/1M tokens rented and owned and the catalog's GPUs ranked by
it (sizing says which fit and how fast; the dollars are here). The cost model: renting
pays only the GPU-hours used, owning pays for every hour of the life. See docs/tco.md.

What must not live here: a command or its output (``gpuwatch tco`` and ``gpuwatch
size`` are `gpuwatch.cli`'s), an import of `gpuwatch.config` (which embeds
`[rent_vs_buy]`), anything that reads the world. tco sits above sizing: it may import
the sizing catalog and physics, never the other way round.

Layer: tco, above sizing and the sources, below analysis and cost.
"""

from __future__ import annotations

from gpuwatch.tco.config import DEFAULT_LIFE_YEARS, RentVsBuyConfig
from gpuwatch.tco.model import (
    DEFAULT_COST_OF_CAPITAL,
    DEFAULT_FACILITY,
    DEFAULT_HOSTING_USD_PER_KW_MONTH,
    DEFAULT_OPS_USD_PER_YEAR,
    DEFAULT_PUE,
    DEFAULT_USD_PER_KWH,
    FACILITIES,
    Facility,
    TcoInputs,
    TcoResult,
    Verdict,
    applied_pue,
    breakeven_utilization,
    capital_usd_per_year,
    evaluate_tco,
    monthly_delta_usd,
    owned_usd_per_gpu_year,
    running_usd_per_gpu_year,
    usd_per_million_tokens,
)
from gpuwatch.tco.per_token import (
    Ownership,
    RankedGpu,
    owned_usd_per_hour,
    rank_gpus,
    usd_per_million_tokens_at,
    usd_per_million_tokens_owned,
    usd_per_million_tokens_rented,
)

__all__ = [
    "DEFAULT_COST_OF_CAPITAL",
    "DEFAULT_FACILITY",
    "DEFAULT_HOSTING_USD_PER_KW_MONTH",
    "DEFAULT_LIFE_YEARS",
    "DEFAULT_OPS_USD_PER_YEAR",
    "DEFAULT_PUE",
    "DEFAULT_USD_PER_KWH",
    "FACILITIES",
    "Facility",
    "Ownership",
    "RankedGpu",
    "RentVsBuyConfig",
    "TcoInputs",
    "TcoResult",
    "Verdict",
    "applied_pue",
    "breakeven_utilization",
    "capital_usd_per_year",
    "evaluate_tco",
    "monthly_delta_usd",
    "owned_usd_per_gpu_year",
    "owned_usd_per_hour",
    "rank_gpus",
    "running_usd_per_gpu_year",
    "usd_per_million_tokens",
    "usd_per_million_tokens_at",
    "usd_per_million_tokens_owned",
    "usd_per_million_tokens_rented",
]
