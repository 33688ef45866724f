"""`gpuwatch size`: the sizing model as a command.

``gpuwatch size [MODEL] [--params N] [--precision P] [--mode M] [--context N]
[--batch N] [--headroom F] [--efficiency F] [--utilization F] [--json]`` prints the memory
breakdown, then every catalog GPU with whether it fits (with headroom), tokens/s and
$/1M tokens rented and owned, cheapest fitting first. `add_size_parser` registers the
subcommand on the CLI's subparsers; `run_size` runs it: exit 0, or 2 with one line on
stderr for bad input, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuwatch.sizing.cost import Ownership
from gpuwatch.sizing.fit import DEFAULT_HEADROOM, RankedGpu, rank_gpus
from gpuwatch.sizing.gpus import GpuCatalogEntry, build_gpu_catalog
from gpuwatch.sizing.memory import (
    DEFAULT_BATCH,
    DEFAULT_CONTEXT_TOKENS,
    MemoryBreakdown,
    Mode,
    Precision,
    Workload,
    memory_requirement,
)
from gpuwatch.sizing.models import (
    ModelCatalogEntry,
    ModelSpec,
    UnknownModelError,
    build_model_catalog,
)
from gpuwatch.sizing.throughput import DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_TRAINING_MFU
from gpuwatch.sizing.units import parse_param_count, to_gb, to_gib

EXIT_OK = 0
EXIT_USAGE = 2

_BREAKDOWN_KEYS = (
    "weights_bytes",
    "kv_cache_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "overhead_bytes",
    "total_bytes",
)


class SizeUsageError(ValueError):
    """Bad input to `gpuwatch size`: one line, exit 2."""


def add_size_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``size`` subcommand."""
    size = subparsers.add_parser(
        "size",
        help="VRAM breakdown, which GPUs fit, tokens/s and $/1M tokens",
        description=(
            "Size a model: memory by component, then every catalog GPU with whether it "
            "fits, tokens/s and $ per 1M tokens rented and owned, cheapest fitting first."
        ),
    )
    size.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help="a catalog model: " + ", ".join(build_model_catalog().names),
    )
    size.add_argument(
        "--config", type=Path, help="agent config whose [sizing] GPUs and models are used"
    )
    size.add_argument(
        "--params", metavar="N", help="a bare parameter count instead of MODEL: 7B, 1.5B, 7e9"
    )
    size.add_argument(
        "--precision",
        choices=[p.value for p in Precision],
        help="weight precision (default: fp16 inference, bf16 train/lora, int4 qlora)",
    )
    size.add_argument(
        "--mode", choices=[m.value for m in Mode], default=Mode.INFERENCE.value, help="workload"
    )
    size.add_argument(
        "--context",
        type=int,
        default=DEFAULT_CONTEXT_TOKENS,
        metavar="N",
        help=f"context tokens per sequence, sizes the KV cache (default {DEFAULT_CONTEXT_TOKENS})",
    )
    size.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BATCH,
        metavar="N",
        help="concurrent sequences (default 1)",
    )
    size.add_argument(
        "--headroom",
        type=float,
        default=DEFAULT_HEADROOM,
        metavar="F",
        help=f"spare memory a fit needs, a fraction (default {DEFAULT_HEADROOM})",
    )
    size.add_argument(
        "--efficiency",
        type=float,
        metavar="F",
        help=(
            f"fraction of peak reached (default {DEFAULT_BANDWIDTH_EFFICIENCY} of bandwidth "
            f"for inference, {DEFAULT_TRAINING_MFU} MFU for training)"
        ),
    )
    size.add_argument(
        "--utilization",
        type=float,
        default=Ownership().utilization,
        metavar="F",
        help="busy fraction of an owned GPU, for owned $/1M tokens (default 0.7)",
    )
    size.add_argument("--json", action="store_true", help="print JSON")


def _workload(args: argparse.Namespace, extra_models: Sequence[ModelCatalogEntry]) -> Workload:
    if (args.model is None) == (args.params is None):
        raise SizeUsageError("give a MODEL or --params N (one of them)")
    model: ModelSpec | int
    if args.params is not None:
        try:
            model = parse_param_count(args.params)
        except ValueError as exc:
            raise SizeUsageError(f"--params: {exc}") from None
    else:
        try:
            model = build_model_catalog(extra_models).get(args.model)
        except UnknownModelError as exc:
            raise SizeUsageError(f"{exc} (or give --params N)") from None
    return Workload(
        model=model,
        mode=Mode(args.mode),
        precision=None if args.precision is None else Precision(args.precision),
        context_tokens=args.context,
        batch=args.batch,
    )


def run_size(
    args: argparse.Namespace,
    *,
    gpu_overrides: Sequence[GpuCatalogEntry] = (),
    extra_models: Sequence[ModelCatalogEntry] = (),
) -> int:
    """Run ``gpuwatch size``; `gpu_overrides` and `extra_models` come from the agent config."""
    try:
        workload = _workload(args, extra_models)
        ownership = Ownership(utilization=args.utilization)
        breakdown = memory_requirement(workload)
        ranked = rank_gpus(
            build_gpu_catalog(gpu_overrides),
            workload,
            headroom=args.headroom,
            efficiency=args.efficiency,
            ownership=ownership,
        )
    except ValueError as exc:  # SizeUsageError, bad numbers, an incomplete catalog entry
        print(f"gpuwatch size: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(size_report(workload, breakdown, ranked, args.headroom), indent=2))
    else:
        _render(workload, breakdown, ranked, args, ownership)
    return EXIT_OK


def _model_name(workload: Workload) -> str | None:
    return None if workload.architecture is None else workload.architecture.name


def _gpu_to_dict(row: RankedGpu) -> dict[str, Any]:
    return {
        "name": row.name,
        "tier": row.gpu.tier,
        "memory_bytes": row.memory_bytes,
        "fits": row.fits,
        "gpus_needed": row.gpus_needed,
        "tokens_per_second": row.tokens_per_second,
        "usd_per_million_tokens_rented": row.usd_per_million_tokens_rented,
        "usd_per_million_tokens_owned": row.usd_per_million_tokens_owned,
        "rent_usd_per_hour": row.gpu.rent_usd_per_hour,
    }


def size_report(
    workload: Workload,
    breakdown: MemoryBreakdown,
    ranked: Sequence[RankedGpu],
    headroom: float,
) -> dict[str, Any]:
    """The JSON object `gpuwatch size --json` prints (bytes, tokens/s, USD)."""
    return {
        "model": _model_name(workload),
        "parameters": workload.parameters,
        "mode": workload.mode.value,
        "precision": workload.weight_precision.value,
        "context_tokens": workload.context_tokens,
        "batch": workload.batch,
        "headroom": headroom,
        **{key: getattr(breakdown, key) for key in _BREAKDOWN_KEYS},
        "notes": list(breakdown.notes),
        "gpus": [_gpu_to_dict(row) for row in ranked],
    }


def _size_text(n_bytes: int) -> str:
    return f"{to_gb(n_bytes):,.1f} GB ({to_gib(n_bytes):,.1f} GiB)"


def _count_text(parameters: int) -> str:
    for factor, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if parameters >= factor:
            return f"{parameters / factor:.3g}{suffix}"
    return str(parameters)


def _render(
    workload: Workload,
    breakdown: MemoryBreakdown,
    ranked: Sequence[RankedGpu],
    args: argparse.Namespace,
    ownership: Ownership,
) -> None:
    from rich.console import Console  # noqa: PLC0415 - keep CLI startup light
    from rich.table import Table  # noqa: PLC0415

    console = Console()
    name = _model_name(workload) or "model"
    context = (
        f", context {workload.context_tokens} x batch {workload.batch}"
        if workload.mode is Mode.INFERENCE
        else ""
    )
    memory = Table(
        title=(
            f"{name}: {_count_text(workload.parameters)} parameters, {workload.mode.value}, "
            f"{workload.weight_precision.value}{context}"
        )
    )
    memory.add_column("component")
    memory.add_column("memory (1 GB = 10^9 bytes)", justify="right")
    for key in _BREAKDOWN_KEYS:
        value = getattr(breakdown, key)
        if value or key in ("weights_bytes", "total_bytes"):
            memory.add_row(key.removesuffix("_bytes").replace("_", " "), _size_text(value))
    console.print(memory)
    for note in breakdown.notes:
        console.print(f"note: {note}", highlight=False)

    speed = "decode" if workload.mode is Mode.INFERENCE else "training"
    gpus = Table(
        title=(
            f"GPUs, cheapest fitting first: fit with {args.headroom:.0%} headroom, "
            f"{speed} tokens/s and $ per 1M tokens, per GPU"
        )
    )
    gpus.add_column("GPU", no_wrap=True)
    gpus.add_column("memory", justify="right", no_wrap=True)
    gpus.add_column("fits", no_wrap=True)
    gpus.add_column("tokens/s", justify="right")
    gpus.add_column("$/1M rented", justify="right")
    gpus.add_column("$/1M owned", justify="right")
    for row in ranked:
        gpus.add_row(
            row.name,
            f"{to_gb(row.memory_bytes):g} GB",
            "yes" if row.fits else f"no: needs {row.gpus_needed}",
            f"{row.tokens_per_second:,.1f}",
            f"{row.usd_per_million_tokens_rented:,.3f}",
            f"{row.usd_per_million_tokens_owned:,.3f}",
        )
    console.print(gpus)
    console.print(
        f"rented: the catalog's on-demand $/GPU-hour; owned: purchase over "
        f"{ownership.life_years:g} years + TDP at ${ownership.usd_per_kwh}/kWh, busy "
        f"{ownership.utilization:.0%} of the time. Prices: docs/sizing.md.",
        highlight=False,
    )
