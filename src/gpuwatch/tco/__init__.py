"""Rent vs buy (total cost of ownership) for one GPU, in USD.

`model` is the pure arithmetic (owned $/GPU-year, break-even utilization, totals over the
life, months to break even, $/1M tokens), `config` the ``[rent_vs_buy]`` section that
fills unset figures from the sizing catalog, `command` is ``gpuwatch tco``. The cost
model: renting pays only the GPU-hours used, owning pays for every hour of the life.
See docs/tco.md. The command's names are imported on first use (PEP 562): the agent
reads `[rent_vs_buy]` and the model, never the command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpuwatch.tco.config import DEFAULT_LIFE_YEARS, RentVsBuyConfig
from gpuwatch.tco.model import (
    DEFAULT_COST_OF_CAPITAL,
    DEFAULT_FACILITY,
    DEFAULT_HOSTING_USD_PER_KW_MONTH,
    DEFAULT_OPS_USD_PER_YEAR,
    DEFAULT_PUE,
    DEFAULT_USD_PER_KWH,
    FACILITIES,
    HOURS_PER_MONTH,
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
)

if TYPE_CHECKING:
    from gpuwatch.tco.command import add_tco_parser, parse_utilization, run_tco, tco_report

__all__ = [
    "DEFAULT_COST_OF_CAPITAL",
    "DEFAULT_FACILITY",
    "DEFAULT_HOSTING_USD_PER_KW_MONTH",
    "DEFAULT_LIFE_YEARS",
    "DEFAULT_OPS_USD_PER_YEAR",
    "DEFAULT_PUE",
    "DEFAULT_USD_PER_KWH",
    "FACILITIES",
    "HOURS_PER_MONTH",
    "Facility",
    "RentVsBuyConfig",
    "TcoInputs",
    "TcoResult",
    "Verdict",
    "add_tco_parser",
    "applied_pue",
    "breakeven_utilization",
    "capital_usd_per_year",
    "evaluate_tco",
    "monthly_delta_usd",
    "owned_usd_per_gpu_year",
    "parse_utilization",
    "run_tco",
    "running_usd_per_gpu_year",
    "tco_report",
]


_COMMAND = ("add_tco_parser", "parse_utilization", "run_tco", "tco_report")


def __getattr__(name: str) -> Any:
    """`gpuwatch tco`'s names, imported on first use."""
    if name not in _COMMAND:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("gpuwatch.tco.command"), name)
