"""`gpuwatch tco`: rent vs buy for one GPU as a command.

``gpuwatch tco --purchase-usd X --rent-usd-per-hour Y --utilization U --years N
[--power-watts W] [--usd-per-kwh P] [--pue F] [--hosting-usd-per-kw-month H]
[--ops-usd-per-year O] [--tokens-per-second T] [--gpu ID] [--json]`` prints the totals of
renting and owning over the period, the break-even utilization, the months to break
even, the verdict and, with a throughput, $ per 1M tokens. `--gpu` takes the purchase
price, rent and TDP of a sizing-catalog GPU for the flags not given. Power is explicit:
`--power-watts` (0 leaves it out) or the TDP of `--gpu`. `add_tco_parser` registers the
subcommand; `run_tco` runs it: exit 0, or 2 with one line on stderr for bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuwatch.sizing.gpus import GpuCatalogEntry, GpuSpec, UnknownGpuError, build_gpu_catalog
from gpuwatch.sizing.units import HOURS_PER_YEAR
from gpuwatch.tco.model import (
    DEFAULT_HOSTING_USD_PER_KW_MONTH,
    DEFAULT_OPS_USD_PER_YEAR,
    DEFAULT_PUE,
    DEFAULT_USD_PER_KWH,
    MONTHS_PER_YEAR,
    TcoInputs,
    TcoResult,
    evaluate_tco,
)

EXIT_OK = 0
EXIT_USAGE = 2


class TcoUsageError(ValueError):
    """Bad input to `gpuwatch tco`: one line, exit 2."""


def add_tco_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``tco`` subcommand (numbers are parsed by `run_tco`, one-line errors)."""
    tco = subparsers.add_parser(
        "tco",
        help="rent vs buy: totals, break-even utilization, $/1M tokens owned vs rented",
        description=(
            "Rent vs buy for one GPU over its life: renting pays the hours used, owning "
            "pays the purchase plus power, hosting and operations every hour. Prints both "
            "totals, the break-even utilization, the months to break even and the verdict."
        ),
    )
    tco.add_argument("--gpu", metavar="ID", help="a sizing-catalog GPU for unset prices and TDP")
    tco.add_argument(
        "--config", type=Path, help="agent config whose [sizing] GPUs (your prices) are used"
    )
    tco.add_argument("--purchase-usd", metavar="USD", help="price of one GPU")
    tco.add_argument("--rent-usd-per-hour", metavar="USD", help="rent of one GPU-hour")
    tco.add_argument(
        "--utilization", metavar="U", help="busy fraction of the time: 0.7 or 70%% (required)"
    )
    tco.add_argument(
        "--years",
        metavar="N",
        help="life the purchase is amortized over, and the period compared (required)",
    )
    tco.add_argument(
        "--power-watts",
        metavar="W",
        help="board power of the owned GPU; 0 leaves power out (default: the TDP of --gpu)",
    )
    tco.add_argument(
        "--usd-per-kwh", metavar="USD", help=f"electricity price (default {DEFAULT_USD_PER_KWH})"
    )
    tco.add_argument(
        "--pue", metavar="F", help=f"facility watts per IT watt, >= 1 (default {DEFAULT_PUE})"
    )
    tco.add_argument(
        "--hosting-usd-per-kw-month",
        metavar="USD",
        help=f"colocation per kW of IT per month (default {DEFAULT_HOSTING_USD_PER_KW_MONTH:g})",
    )
    tco.add_argument(
        "--ops-usd-per-year",
        metavar="USD",
        help=f"operations per GPU per year (default {DEFAULT_OPS_USD_PER_YEAR:g})",
    )
    tco.add_argument(
        "--tokens-per-second", metavar="T", help="throughput while busy, for $ per 1M tokens"
    )
    tco.add_argument("--json", action="store_true", help="print JSON")


def parse_utilization(text: str) -> float:
    """A busy fraction from ``0.7`` or ``70%``, in (0, 1]; raises TcoUsageError."""
    raw = text.strip()
    percent = raw.endswith("%")
    try:
        value = float(raw.removesuffix("%").strip())
    except ValueError:
        raise TcoUsageError(
            f"--utilization: expected a fraction like 0.7 or a percentage like 70%, got {text!r}"
        ) from None
    if percent:
        value /= 100
    if not (math.isfinite(value) and 0 < value <= 1):
        raise TcoUsageError(
            f"--utilization must be in (0, 1] (a fraction like 0.7 or a percentage like 70%), "
            f"got {text!r}"
        )
    return value


def _optional_number(flag: str, text: str | None, *, positive: bool = False) -> float | None:
    """The flag's value, None when absent; raises TcoUsageError when not >= 0 (or > 0)."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise TcoUsageError(f"{flag}: expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise TcoUsageError(f"{flag} must be {'> 0' if positive else '>= 0'}, got {text!r}")
    return value


def _number(flag: str, text: str | None, default: float | None, how: str) -> float:
    """A non-negative flag, else `default`; without either, "flag is required: how"."""
    value = _optional_number(flag, text)
    if value is None:
        value = default
    if value is None:
        raise TcoUsageError(f"{flag} is required: {how}")
    return value


def tco_inputs(args: argparse.Namespace, gpu: GpuSpec | None) -> TcoInputs:
    """`TcoInputs` from the parsed flags, unset prices and power from `gpu`."""
    if args.utilization is None:
        raise TcoUsageError("--utilization is required: the busy fraction, e.g. 0.7 or 70%")
    utilization = parse_utilization(args.utilization)
    years = _optional_number("--years", args.years, positive=True)
    if years is None:
        raise TcoUsageError("--years is required: the life the purchase is amortized over, e.g. 3")
    rent = _optional_number("--rent-usd-per-hour", args.rent_usd_per_hour, positive=True)
    if rent is None:
        if gpu is None:
            raise TcoUsageError(
                "--rent-usd-per-hour is required: the rent of one GPU-hour (or --gpu ID)"
            )
        rent = gpu.rent_usd_per_hour
    pue = _number("--pue", args.pue, DEFAULT_PUE, "")
    if pue < 1:
        raise TcoUsageError(f"--pue must be >= 1 (facility watts per IT watt), got {args.pue!r}")
    return TcoInputs(
        purchase_usd=_number(
            "--purchase-usd",
            args.purchase_usd,
            None if gpu is None else gpu.purchase_usd,
            "the price of one GPU (or --gpu ID for the catalog's)",
        ),
        rent_usd_per_hour=rent,
        utilization=utilization,
        years=years,
        power_watts=_number(
            "--power-watts",
            args.power_watts,
            None if gpu is None else gpu.tdp_watts,
            "the owned GPU's board power in W, 0 to leave power out (or --gpu ID for its TDP)",
        ),
        usd_per_kwh=_number("--usd-per-kwh", args.usd_per_kwh, DEFAULT_USD_PER_KWH, ""),
        pue=pue,
        hosting_usd_per_kw_month=_number(
            "--hosting-usd-per-kw-month",
            args.hosting_usd_per_kw_month,
            DEFAULT_HOSTING_USD_PER_KW_MONTH,
            "",
        ),
        ops_usd_per_year=_number(
            "--ops-usd-per-year", args.ops_usd_per_year, DEFAULT_OPS_USD_PER_YEAR, ""
        ),
        tokens_per_second=_optional_number(
            "--tokens-per-second", args.tokens_per_second, positive=True
        ),
    )


def run_tco(args: argparse.Namespace, *, gpu_overrides: Sequence[GpuCatalogEntry] = ()) -> int:
    """Run ``gpuwatch tco``; `gpu_overrides` (the agent config's) apply to `--gpu`."""
    try:
        gpu = None if args.gpu is None else build_gpu_catalog(gpu_overrides).get(args.gpu)
        inputs = tco_inputs(args, gpu)
        result = evaluate_tco(inputs)
    except UnknownGpuError as exc:
        print(f"gpuwatch tco: --gpu: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:  # TcoUsageError, a bad catalog override
        print(f"gpuwatch tco: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(tco_report(inputs, result, gpu), indent=2))
    else:
        _render(inputs, result, gpu)
    return EXIT_OK


def tco_report(inputs: TcoInputs, result: TcoResult, gpu: GpuSpec | None = None) -> dict[str, Any]:
    """The JSON object `gpuwatch tco --json` prints (USD, hours, months, ratios 0-1)."""
    return {
        "gpu": None if gpu is None else gpu.id,
        "inputs": dataclasses.asdict(inputs),
        **dataclasses.asdict(result),
    }


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _per_million(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"  # seed 001 prints 4 decimals


def _render(inputs: TcoInputs, result: TcoResult, gpu: GpuSpec | None) -> None:
    from rich.console import Console  # noqa: PLC0415 - keep CLI startup light
    from rich.table import Table  # noqa: PLC0415

    console = Console()
    name = "one GPU" if gpu is None else gpu.id
    table = Table(
        title=(
            f"Rent vs buy, {name}: {inputs.years:g} years at {inputs.utilization:.0%} utilization"
        )
    )
    table.add_column("")
    table.add_column("rent", justify="right")
    table.add_column("own", justify="right")
    running = result.owned_usd_per_gpu_year - inputs.purchase_usd / inputs.years
    table.add_row(
        "GPU-hours paid for",
        f"{result.gpu_hours_used:,.0f} (used)",
        f"{inputs.years * HOURS_PER_YEAR:,.0f} (all)",
    )
    table.add_row(
        "price",
        f"{_usd(inputs.rent_usd_per_hour)}/h",
        f"{_usd(inputs.purchase_usd)} + {_usd(running)}/year",
    )
    table.add_row(
        f"total, {inputs.years:g} years", _usd(result.rent_total_usd), _usd(result.own_total_usd)
    )
    table.add_row(
        "per month",
        _usd(result.rent_total_usd / (inputs.years * MONTHS_PER_YEAR)),
        _usd(result.own_total_usd / (inputs.years * MONTHS_PER_YEAR)),
    )
    if inputs.tokens_per_second is not None:
        table.add_row(
            f"per 1M tokens ({inputs.tokens_per_second:g} tokens/s)",
            _per_million(result.rent_usd_per_million_tokens),
            _per_million(result.own_usd_per_million_tokens),
        )
    console.print(table)
    months = (
        f"{result.months_to_break_even:,.1f} months"
        if result.months_to_break_even is not None
        else f"not within {inputs.years:g} years"
    )
    saving = abs(result.rent_total_usd - result.own_total_usd)
    cheaper = "owning" if result.verdict == "buy" else "renting"
    lines = (
        f"break-even utilization: {result.breakeven_utilization:.1%} (buying is cheaper above it)",
        f"months to break even: {months}",
        f"verdict: {result.verdict} ({cheaper} saves {_usd(saving)} over {inputs.years:g} years)",
        f"owned: {_usd(result.owned_usd_per_gpu_year)}/GPU-year = purchase / {inputs.years:g} "
        f"years + {inputs.power_watts:g} W x PUE {inputs.pue:g} x ${inputs.usd_per_kwh:g}/kWh",
        f"       + hosting {_usd(inputs.hosting_usd_per_kw_month)}/kW-month"
        f" + ops {_usd(inputs.ops_usd_per_year)}/year (docs/tco.md)",
    )
    for line in lines:
        console.print(line, highlight=False)
