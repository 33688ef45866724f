"""`gpuwatch tco`: rent vs buy for one GPU as a command.

``gpuwatch tco --utilization U [--gpu ID [--bare-card]] [--purchase-usd X]
[--rent-usd-per-hour Y] [--years N] [--cost-of-capital R] [--power-watts W]
[--usd-per-kwh P] [--facility colocation|owned] [--pue F] [--hosting-usd-per-kw-month H]
[--ops-usd-per-year O] [--tokens-per-second T] [--json]`` prints the totals of renting
and owning over the period, the break-even utilization, the months to break even, the
verdict, every input the owned cost used and, with a throughput, $ per 1M tokens.

With `--gpu` the owned GPU is priced as the agent and `gpuwatch size` price it:
`RentVsBuyConfig.inputs_for` of the config's `[rent_vs_buy]` section with the flags
given laid over it — the catalog's price, rent and TDP, the host's share (`--bare-card`
leaves it out), the tier's facility. Without `--gpu` the purchase, rent and power are
the flags' (or the section's), with no host share. `add_tco_parser` registers the
subcommand; `run_tco` runs it: exit 0, or 2 with one line on stderr for bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from gpuwatch.cli import add_command
from gpuwatch.cli.common import EXIT_OK, EXIT_USAGE
from gpuwatch.cli.console import stdout_console
from gpuwatch.config import load_config
from gpuwatch.core.flag_types import NON_NEGATIVE, POSITIVE, number
from gpuwatch.core.text import usd
from gpuwatch.core.units import HOURS_PER_YEAR
from gpuwatch.sizing.gpus import GpuCatalogEntry, GpuSpec, UnknownGpuError, build_gpu_catalog
from gpuwatch.tco.config import DEFAULT_LIFE_YEARS, RentVsBuyConfig
from gpuwatch.tco.model import (
    DEFAULT_COST_OF_CAPITAL,
    DEFAULT_FACILITY,
    DEFAULT_HOSTING_USD_PER_KW_MONTH,
    DEFAULT_OPS_USD_PER_YEAR,
    DEFAULT_PUE,
    DEFAULT_USD_PER_KWH,
    FACILITIES,
    MONTHS_PER_YEAR,
    WATTS_PER_KILOWATT,
    TcoInputs,
    TcoResult,
    evaluate_tco,
)


class TcoUsageError(ValueError):
    """Bad input to `gpuwatch tco`: one line, exit 2."""


DESCRIPTION = (
    "Rent vs buy for one GPU over its life: renting pays the hours used, owning "
    "pays the purchase plus power, hosting and operations every hour. Prints both "
    "totals, the break-even utilization, the months to break even and the verdict."
)


def add_tco_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``tco`` subcommand (numbers are parsed by `run_tco`, one-line errors)."""
    add_command(subparsers, "tco")


def run(args: argparse.Namespace) -> int:
    """Run ``gpuwatch tco`` with the `--config` file's catalog and `[rent_vs_buy]`."""
    config = load_config(args.config)
    return run_tco(args, gpu_overrides=config.sizing.gpus, rent_vs_buy=config.rent_vs_buy)


def add_arguments(tco: argparse.ArgumentParser) -> None:
    """``gpuwatch tco``'s arguments."""
    tco.description = DESCRIPTION
    tco.add_argument("--gpu", metavar="ID", help="a sizing-catalog GPU for unset prices and TDP")
    tco.add_argument(
        "--config",
        type=Path,
        help="agent config whose [sizing] GPUs (your prices) and [rent_vs_buy] are used",
    )
    add_ownership_options(tco)
    tco.add_argument("--purchase-usd", metavar="USD", help="price of one GPU")
    tco.add_argument("--rent-usd-per-hour", metavar="USD", help="rent of one GPU-hour")
    tco.add_argument(
        "--utilization", metavar="U", help="busy fraction of the time: 0.7 or 70%% (required)"
    )
    tco.add_argument(
        "--power-watts",
        metavar="W",
        help="board power of the owned GPU; 0 leaves power out (default: the TDP of --gpu)",
    )
    tco.add_argument(
        "--tokens-per-second", metavar="T", help="throughput while busy, for $ per 1M tokens"
    )
    tco.add_argument("--json", action="store_true", help="print JSON")


def add_ownership_options(parser: argparse.ArgumentParser) -> None:
    """The owned-cost options `gpuwatch tco` and `gpuwatch size` share (strings, parsed
    by `ownership_config`; unset ones come from `[rent_vs_buy]`, else the defaults)."""
    group = parser.add_argument_group(
        "owning a GPU (default: the config's [rent_vs_buy], else these; docs/tco.md)"
    )
    group.add_argument(
        "--years",
        metavar="N",
        help=f"life the purchase is amortized over, and the period compared "
        f"(default {DEFAULT_LIFE_YEARS:g}, seed 001)",
    )
    group.add_argument(
        "--cost-of-capital",
        metavar="R",
        help=f"yearly rate the purchase is financed at: 0.08 or 8%% "
        f"(default {DEFAULT_COST_OF_CAPITAL:.0%}%, estimate)",
    )
    group.add_argument(
        "--ops-usd-per-year",
        metavar="USD",
        help=f"operations per GPU per year (default {DEFAULT_OPS_USD_PER_YEAR:g}, estimate)",
    )
    group.add_argument(
        "--facility",
        choices=FACILITIES,
        help="colocation: a $/kW-month fee covering cooling, PUE not applied; owned: energy "
        "x PUE (default: by the GPU's tier, datacenter colocation, else owned)",
    )
    group.add_argument(
        "--pue",
        metavar="F",
        help=f"facility watts per IT watt, >= 1, in an owned facility (default {DEFAULT_PUE})",
    )
    group.add_argument(
        "--hosting-usd-per-kw-month",
        metavar="USD",
        help="fee per kW of IT load per month (default: the tier's colocation fee in "
        f"colocation, {DEFAULT_HOSTING_USD_PER_KW_MONTH:g} in an owned facility)",
    )
    group.add_argument(
        "--usd-per-kwh", metavar="USD", help=f"electricity price (default {DEFAULT_USD_PER_KWH})"
    )
    group.add_argument(
        "--bare-card",
        action="store_true",
        help="price the card alone, without its host's server, networking and power",
    )


def parse_rate(flag: str, text: str) -> float:
    """A yearly rate from ``0.08`` or ``8%``, in [0, 1]; raises TcoUsageError."""
    raw = text.strip()
    try:
        value = float(raw.removesuffix("%").strip())
    except ValueError:
        raise TcoUsageError(
            f"{flag}: expected a rate like 0.08 or a percentage like 8%, got {text!r}"
        ) from None
    if raw.endswith("%"):
        value /= 100
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise TcoUsageError(f"{flag} must be in [0, 1] (0.08 or 8%), got {text!r}")
    return value


def ownership_config(args: argparse.Namespace, base: RentVsBuyConfig) -> RentVsBuyConfig:
    """`base` (the config's `[rent_vs_buy]`) with the owned-cost flags given laid over it.

    Raises TcoUsageError, naming the flag, for a bad value.
    """
    update: dict[str, Any] = {}
    years = _optional_number("--years", args.years, number(gt=0, le=30))
    if years is not None:
        update["life_years"] = years
    if args.cost_of_capital is not None:
        update["cost_of_capital"] = parse_rate("--cost-of-capital", args.cost_of_capital)
    for flag, key, text in (
        ("--ops-usd-per-year", "ops_usd_per_year_per_gpu", args.ops_usd_per_year),
        ("--hosting-usd-per-kw-month", "hosting_usd_per_kw_month", args.hosting_usd_per_kw_month),
        ("--usd-per-kwh", "usd_per_kwh", args.usd_per_kwh),
    ):
        value = _optional_number(flag, text)
        if value is not None:
            update[key] = value
    pue = _optional_number("--pue", args.pue, number(ge=1))
    if pue is not None:
        update["pue"] = pue
    if args.facility is not None:
        update["facility"] = args.facility
    if args.bare_card:
        update["host_share"] = False
    return base.model_copy(update=update)


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


def _optional_number(
    flag: str, text: str | None, parse: Callable[[str], float] = NON_NEGATIVE
) -> float | None:
    """The flag's value, None when absent, checked by `parse` (a `gpuwatch.core.flag_types`
    number type, the one every float flag uses); raises TcoUsageError naming the flag."""
    if text is None:
        return None
    try:
        return parse(text)
    except argparse.ArgumentTypeError as exc:
        raise TcoUsageError(f"{flag}: {exc}") from None


def _required(flag: str, value: float | None, how: str) -> float:
    if value is None:
        raise TcoUsageError(f"{flag} is required: {how}")
    return value


def tco_inputs(
    args: argparse.Namespace, gpu: GpuSpec | None, base: RentVsBuyConfig | None = None
) -> TcoInputs:
    """`TcoInputs` from the parsed flags over `base` (the config's `[rent_vs_buy]`).

    With `gpu`, `RentVsBuyConfig.inputs_for`: the agent's and `gpuwatch size`'s pricing.
    """
    if args.utilization is None:
        raise TcoUsageError("--utilization is required: the busy fraction, e.g. 0.7 or 70%")
    utilization = parse_utilization(args.utilization)
    config = ownership_config(args, RentVsBuyConfig() if base is None else base)
    if gpu is None and args.bare_card:
        raise TcoUsageError(
            "--bare-card applies to --gpu ID (without it there is no host share to leave out)"
        )
    update: dict[str, Any] = {}
    for flag, key, text, positive in (
        ("--purchase-usd", "purchase_usd", args.purchase_usd, False),
        ("--rent-usd-per-hour", "rent_usd_per_hour", args.rent_usd_per_hour, True),
        ("--power-watts", "power_watts", args.power_watts, False),
    ):
        value = _optional_number(flag, text, POSITIVE if positive else NON_NEGATIVE)
        if value is not None:
            update[key] = value
    config = config.model_copy(update=update)
    tokens_per_second = _optional_number("--tokens-per-second", args.tokens_per_second, POSITIVE)
    if gpu is not None:
        return config.inputs_for(gpu, utilization, tokens_per_second)
    purchase = _required(
        "--purchase-usd", config.purchase_usd, "the price of one GPU (or --gpu ID)"
    )
    rent = _required(
        "--rent-usd-per-hour", config.rent_usd_per_hour, "the rent of one GPU-hour (or --gpu ID)"
    )
    power = _required(
        "--power-watts",
        config.power_watts,
        "the owned GPU's board power in W, 0 to leave power out (or --gpu ID for its TDP)",
    )
    return TcoInputs(
        purchase_usd=purchase,
        rent_usd_per_hour=rent,
        utilization=utilization,
        years=config.life_years,
        power_watts=power,
        usd_per_kwh=config.usd_per_kwh,
        pue=config.pue,
        hosting_usd_per_kw_month=(
            DEFAULT_HOSTING_USD_PER_KW_MONTH
            if config.hosting_usd_per_kw_month is None
            else config.hosting_usd_per_kw_month
        ),
        ops_usd_per_year=config.ops_usd_per_year_per_gpu,
        tokens_per_second=tokens_per_second,
        cost_of_capital=config.cost_of_capital,
        facility=DEFAULT_FACILITY if config.facility is None else config.facility,
    )


def run_tco(
    args: argparse.Namespace,
    *,
    gpu_overrides: Sequence[GpuCatalogEntry] = (),
    rent_vs_buy: RentVsBuyConfig | None = None,
) -> int:
    """Run ``gpuwatch tco``; `gpu_overrides` (the agent config's) apply to `--gpu`,
    `rent_vs_buy` (its `[rent_vs_buy]`) is what the flags are laid over."""
    try:
        gpu = None if args.gpu is None else build_gpu_catalog(gpu_overrides).get(args.gpu)
        inputs = tco_inputs(args, gpu, rent_vs_buy)
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


def _per_million(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"  # seed 001 prints 4 decimals


def _render(inputs: TcoInputs, result: TcoResult, gpu: GpuSpec | None) -> None:
    console = stdout_console()
    name = "one GPU" if gpu is None else gpu.id
    table = Table(
        title=(
            f"Rent vs buy, {name}: {inputs.years:g} years at {inputs.utilization:.0%} utilization"
        )
    )
    table.add_column("")
    table.add_column("rent", justify="right")
    table.add_column("own", justify="right")
    running = result.energy_usd_per_year + result.hosting_usd_per_year + result.ops_usd_per_year
    table.add_row(
        "GPU-hours paid for",
        f"{result.gpu_hours_used:,.0f} (used)",
        f"{inputs.years * HOURS_PER_YEAR:,.0f} (all)",
    )
    table.add_row(
        "price",
        f"{usd(inputs.rent_usd_per_hour)}/h",
        f"{usd(inputs.capex_usd)} at {_percent(inputs.cost_of_capital)}/year + {usd(running)}/year",
    )
    table.add_row(
        f"total, {inputs.years:g} years", usd(result.rent_total_usd), usd(result.own_total_usd)
    )
    table.add_row(
        "per month",
        usd(result.rent_total_usd / (inputs.years * MONTHS_PER_YEAR)),
        usd(result.own_total_usd / (inputs.years * MONTHS_PER_YEAR)),
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
        f"verdict: {result.verdict} ({cheaper} saves {usd(saving)} over {inputs.years:g} years)",
        *ownership_lines(inputs, result),
    )
    for line in lines:
        console.print(line, highlight=False)


def _percent(rate: float) -> str:
    return f"{rate * 100:.4g}%"


def ownership_lines(inputs: TcoInputs, result: TcoResult) -> tuple[str, ...]:
    """The owned $/GPU-year and every input behind it, one part a line (docs/tco.md)."""
    kilowatts = inputs.it_power_watts / WATTS_PER_KILOWATT
    host = (
        f" (GPU {usd(inputs.purchase_usd)} + host {usd(inputs.host_capex_usd)})"
        if inputs.host_capex_usd
        else ""
    )
    host_watts = (
        f" (GPU {inputs.power_watts:g} + host {inputs.host_power_watts:g})"
        if inputs.host_power_watts
        else ""
    )
    facility = (
        "colocation: the fee covers cooling, PUE not applied"
        if inputs.facility == "colocation"
        else "owned facility: energy x PUE"
    )
    return (
        f"owned: {usd(result.owned_usd_per_gpu_year)}/GPU-year = capital "
        f"{usd(result.capital_usd_per_year)} + energy {usd(result.energy_usd_per_year)}",
        f"       + hosting {usd(result.hosting_usd_per_year)} + ops "
        f"{usd(result.ops_usd_per_year)} (docs/tco.md)",
        f"capital: {usd(inputs.capex_usd)}{host}, {inputs.years:g} years at "
        f"{_percent(inputs.cost_of_capital)}/year, paid monthly",
        f"energy: {inputs.it_power_watts:,.4g} W{host_watts} x PUE {result.pue_applied:g} x "
        f"8760 h x ${inputs.usd_per_kwh:g}/kWh",
        f"hosting: {usd(inputs.hosting_usd_per_kw_month)}/kW-month x {kilowatts:.4g} kW x 12 "
        f"({facility})",
        f"ops: {usd(inputs.ops_usd_per_year)}/GPU-year",
    )
