"""`gpuwatch size`: the sizing model as a command.

``gpuwatch size [MODEL] [--params N] [--precision P] [--mode M] [--context N]
[--batch N] [training and LoRA options] [--engine vllm|none] [--max-num-seqs N]
[--max-num-batched-tokens N] [--headroom F] [--overhead F] [--efficiency F]
[--utilization U] [owning options: --years, --cost-of-capital, --ops-usd-per-year,
--facility, --pue, --hosting-usd-per-kw-month, --usd-per-kwh, --bare-card] [--json]``
prints the memory breakdown, the architecture and assumptions it used, then every
catalog GPU with its cheapest shape that fits with headroom (one GPU, or tensor and
pipeline parallel: `sizing.parallel`), the shape's tokens/s, $/h and $/1M tokens rented
and owned, ranked by `--rank-by` (rented $/1M tokens or $/h). The owned column is
`gpuwatch tco`'s owned $/GPU-year (the config's `[rent_vs_buy]` with the owning options
over it, host share included) spread over the tokens of the busy hours. `add_size_parser`
registers the subcommand on the CLI's subparsers; `run_size` runs it: exit 0, or 2 with
one line on stderr for bad input, never a traceback. `size_output` renders the output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from gpuwatch.cli import add_command
from gpuwatch.cli.common import EXIT_OK, EXIT_USAGE
from gpuwatch.cli.size_output import SizeRun, render_text, size_report
from gpuwatch.cli.tco import add_ownership_options, ownership_config, parse_utilization
from gpuwatch.config import load_config
from gpuwatch.core.flag_types import NON_NEGATIVE, number
from gpuwatch.sizing.adapters import DEFAULT_LORA_RANK, LORA_MODULES
from gpuwatch.sizing.engine import (
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    EngineSettings,
)
from gpuwatch.sizing.fit import DEFAULT_HEADROOM
from gpuwatch.sizing.gpus import GpuCatalogEntry, build_gpu_catalog
from gpuwatch.sizing.hf_config import ConfigJsonError, load_config_json
from gpuwatch.sizing.memory import memory_requirement
from gpuwatch.sizing.models import (
    ModelCatalogEntry,
    ModelSpec,
    UnknownModelError,
    build_model_catalog,
)
from gpuwatch.sizing.quantization import SCHEMES, QuantizationScheme
from gpuwatch.sizing.size_bounds import size_bound_error
from gpuwatch.sizing.throughput import DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_TRAINING_MFU
from gpuwatch.sizing.units import parse_param_count
from gpuwatch.sizing.workload import (
    ADAPTER_PRECISIONS,
    DEFAULT_ASSUMPTIONS,
    DEFAULT_BATCH,
    DEFAULT_CONTEXT_TOKENS,
    MemoryAssumptions,
    Mode,
    Precision,
    TrainingSetup,
    Workload,
)
from gpuwatch.tco.config import RentVsBuyConfig
from gpuwatch.tco.per_token import RANK_BY, Ownership, RankBy, rank_gpus

PRECISION_VALUES = tuple(p.value for p in Precision)
PRECISION_CHOICES = PRECISION_VALUES + tuple(n for n in SCHEMES if n not in PRECISION_VALUES)
"""--precision: the storage precisions, then the checkpoint layouts (`quantization.SCHEMES`)."""

ALL_LINEAR = "all-linear"
"""`--lora-targets` shorthand for every projection (PEFT's name for it)."""


KV_CACHE_PRECISIONS = ("fp32", "fp16", "bf16", "fp8")
"""--kv-cache-precision: the KV cache dtypes servers offer (vLLM's --kv-cache-dtype fp8)."""


LORA_OPTIONS = (
    "--gradient-checkpointing",
    "--flash-attention",
    "--activations",
    "--lora-rank",
    "--lora-targets",
    "--adapter-precision",
)
"""The training options --mode lora takes (qlora also takes --double-quant)."""


class SizeUsageError(ValueError):
    """Bad input to `gpuwatch size`: one line, exit 2."""


DESCRIPTION = (
    "Size a model: memory by component, then every catalog GPU with the cheapest shape "
    "that holds it (one GPU, tensor or pipeline parallel), its tokens/s, $/h and $ per "
    "1M tokens rented and owned, cheapest first."
)


def add_size_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``size`` subcommand."""
    add_command(subparsers, "size")


def run(args: argparse.Namespace) -> int:
    """Run ``gpuwatch size`` with the `--config` file's catalog and `[rent_vs_buy]`."""
    config = load_config(args.config)
    return run_size(
        args,
        gpu_overrides=config.sizing.gpus,
        extra_models=config.sizing.models,
        rent_vs_buy=config.rent_vs_buy,
    )


def add_arguments(size: argparse.ArgumentParser) -> None:
    """``gpuwatch size``'s arguments."""
    size.description = DESCRIPTION
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
        "--config-json",
        type=Path,
        metavar="PATH",
        help=(
            "a Hugging Face config.json instead of MODEL: the architecture, parameter count "
            "and any quantization_config are read from it"
        ),
    )
    size.add_argument(
        "--kv-cache-precision",
        choices=KV_CACHE_PRECISIONS,
        help="the KV cache's storage (default: the compute precision, 16-bit); fp8 halves it",
    )
    size.add_argument(
        "--precision",
        choices=PRECISION_CHOICES,
        help=(
            "weight precision (default: the checkpoint's as published: a config.json's "
            "quantization_config or a catalog model's published precision; else fp16 "
            "inference, bf16 train/lora, int4 qlora; given, it sizes the architecture at it); "
            "inference of a MODEL also takes a checkpoint layout: "
            f"{', '.join(SCHEMES)}; int4, int8 and fp8 with a MODEL mean awq-int4, int8 "
            "and fp8 W8A8 (embeddings and LM head 16-bit)"
        ),
    )
    size.add_argument(
        "--mode", choices=[m.value for m in Mode], default=Mode.INFERENCE.value, help="workload"
    )
    size.add_argument(
        "--context",
        type=int,
        default=DEFAULT_CONTEXT_TOKENS,
        metavar="N",
        help=(
            "tokens per sequence: the KV cache in inference, the sequence length in "
            f"training (default {DEFAULT_CONTEXT_TOKENS})"
        ),
    )
    size.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BATCH,
        metavar="N",
        help="concurrent sequences; in training the micro-batch per GPU (default 1)",
    )
    _add_training_options(size)
    _add_engine_options(size)
    size.add_argument(
        "--headroom",
        type=NON_NEGATIVE,
        default=DEFAULT_HEADROOM,
        metavar="F",
        help=f"spare memory a fit needs, a fraction (default {DEFAULT_HEADROOM})",
    )
    size.add_argument(
        "--overhead",
        type=NON_NEGATIVE,
        metavar="F",
        help=(
            "extra memory as a fraction of the weights, in inference on top of the "
            f"engine's (default {DEFAULT_ASSUMPTIONS.inference_overhead_ratio:g} inference, "
            f"{DEFAULT_ASSUMPTIONS.training_overhead_ratio:g} training; seed 001's rule: "
            "--engine none --overhead 0.2)"
        ),
    )
    size.add_argument(
        "--efficiency",
        type=number(gt=0, le=1),
        metavar="F",
        help=(
            f"fraction of peak reached (default {DEFAULT_BANDWIDTH_EFFICIENCY} of bandwidth "
            f"for inference, {DEFAULT_TRAINING_MFU} MFU for training)"
        ),
    )
    size.add_argument(
        "--utilization",
        metavar="U",
        help="busy fraction of an owned GPU, for owned $/1M tokens: 0.7 or 70%% (default 0.7)",
    )
    size.add_argument(
        "--rank-by",
        choices=RANK_BY,
        default=RANK_BY[0],
        help=(
            "what ranks the GPUs, each by its cheapest shape (one GPU, tensor or pipeline "
            "parallel): rented $ per 1M tokens (default) or rented $ per hour"
        ),
    )
    add_ownership_options(size)
    size.add_argument("--json", action="store_true", help="print JSON")


def _add_engine_options(size: argparse.ArgumentParser) -> None:
    engine = size.add_argument_group("serving engine (--mode inference)")
    engine.add_argument(
        "--engine",
        choices=("vllm", "none"),
        help=(
            "vllm (default): add what vLLM's memory profile holds beyond weights and KV "
            "cache (activation peak, CUDA context, CUDA graphs); none: nothing"
        ),
    )
    engine.add_argument(
        "--max-num-seqs",
        type=int,
        metavar="N",
        help=(
            f"vLLM's max_num_seqs, the sequences its sampler is profiled with (default "
            f"{DEFAULT_MAX_NUM_SEQS}, vLLM's below 70 GiB; 1024 on an H100)"
        ),
    )
    engine.add_argument(
        "--max-num-batched-tokens",
        type=int,
        metavar="N",
        help=(
            f"vLLM's max_num_batched_tokens, the tokens of its profiled forward pass "
            f"(default {DEFAULT_MAX_NUM_BATCHED_TOKENS}, vLLM's below 70 GiB; 8192 on an H100)"
        ),
    )


def _add_training_options(size: argparse.ArgumentParser) -> None:
    training = size.add_argument_group("training (--mode train, lora, qlora)")
    training.add_argument(
        "--gradient-checkpointing",
        action=argparse.BooleanOptionalAction,
        help="keep only layer inputs and recompute (default: on for lora/qlora, off for train)",
    )
    training.add_argument(
        "--flash-attention",
        action=argparse.BooleanOptionalAction,
        help="attention without the tokens x tokens score matrix (default: on)",
    )
    training.add_argument(
        "--activations",
        choices=("architecture", "seed-001"),
        help=(
            "activations from the architecture, context and batch (default), or seed 001's "
            "2 x 16-bit weights"
        ),
    )
    training.add_argument(
        "--lora-rank",
        type=int,
        metavar="R",
        help=f"LoRA rank (default {DEFAULT_LORA_RANK})",
    )
    training.add_argument(
        "--lora-targets",
        metavar="LIST",
        help=(
            f"adapted projections, comma-separated from {','.join(LORA_MODULES)} "
            f"(default {ALL_LINEAR}: all of them)"
        ),
    )
    training.add_argument(
        "--adapter-precision",
        choices=sorted(p.value for p in ADAPTER_PRECISIONS),
        help="LoRA adapter storage (default fp32, as PEFT; the QLoRA paper's code: bf16)",
    )
    training.add_argument(
        "--double-quant",
        action=argparse.BooleanOptionalAction,
        help="qlora: 8-bit quantization constants, 0.127 bit/param (default: on)",
    )


def _lora_targets(text: str) -> tuple[str, ...]:
    if text.strip() == ALL_LINEAR:
        return LORA_MODULES
    names = tuple(name.strip() for name in text.split(","))
    for name in names:
        if name not in LORA_MODULES:
            raise SizeUsageError(
                f"--lora-targets: unknown module {name!r}; known: {', '.join(LORA_MODULES)} "
                f"or {ALL_LINEAR}"
            )
    return names


def _check_options_fit_mode(args: argparse.Namespace, mode: Mode) -> None:
    """Reject options the mode would silently ignore."""
    given = {
        "--gradient-checkpointing": args.gradient_checkpointing,
        "--flash-attention": args.flash_attention,
        "--activations": args.activations,
        "--lora-rank": args.lora_rank,
        "--lora-targets": args.lora_targets,
        "--adapter-precision": args.adapter_precision,
        "--double-quant": args.double_quant,
        "--kv-cache-precision": getattr(args, "kv_cache_precision", None),
        "--engine": getattr(args, "engine", None),
        "--max-num-seqs": getattr(args, "max_num_seqs", None),
        "--max-num-batched-tokens": getattr(args, "max_num_batched_tokens", None),
    }
    allowed = {
        Mode.INFERENCE: (
            "--kv-cache-precision",
            "--engine",
            "--max-num-seqs",
            "--max-num-batched-tokens",
        ),
        Mode.TRAIN: ("--gradient-checkpointing", "--flash-attention", "--activations"),
        Mode.LORA: LORA_OPTIONS,
        Mode.QLORA: (*LORA_OPTIONS, "--double-quant"),
    }[mode]
    for flag, value in given.items():
        if value is not None and flag not in allowed:
            raise SizeUsageError(f"{flag} does not apply to --mode {mode}")


def _training_setup(args: argparse.Namespace) -> TrainingSetup:
    defaults = TrainingSetup()
    return TrainingSetup(
        gradient_checkpointing=args.gradient_checkpointing,
        flash_attention=(
            defaults.flash_attention if args.flash_attention is None else args.flash_attention
        ),
        lora_rank=defaults.lora_rank if args.lora_rank is None else args.lora_rank,
        lora_targets=(
            defaults.lora_targets if args.lora_targets is None else _lora_targets(args.lora_targets)
        ),
        adapter_precision=(
            defaults.adapter_precision
            if args.adapter_precision is None
            else Precision(args.adapter_precision)
        ),
        double_quantization=(
            defaults.double_quantization if args.double_quant is None else args.double_quant
        ),
    )


def _workload(args: argparse.Namespace, extra_models: Sequence[ModelCatalogEntry]) -> Workload:
    config_json: Path | None = getattr(args, "config_json", None)
    given = [args.model is not None, args.params is not None, config_json is not None]
    if sum(given) != 1:
        raise SizeUsageError("give a MODEL, --params N or --config-json PATH (one of them)")
    model: ModelSpec | int
    checkpoint: QuantizationScheme | None = None
    if config_json is not None:
        try:
            loaded = load_config_json(config_json)
        except ConfigJsonError as exc:
            raise SizeUsageError(f"--config-json {exc}") from None
        model, checkpoint = loaded.spec, loaded.quantization
        if loaded.notes:
            model = replace(model, source=f"{model.source} ({'; '.join(loaded.notes)})")
    elif args.params is not None:
        try:
            model = parse_param_count(args.params)
        except ValueError as exc:
            raise SizeUsageError(f"--params: {exc}") from None
        too_many = size_bound_error("parameters", model)
        if too_many is not None:
            raise SizeUsageError(f"--params: {too_many}")
    else:
        try:
            model = build_model_catalog(extra_models).get(args.model)
        except UnknownModelError as exc:
            raise SizeUsageError(f"{exc} (or give --params N)") from None
    mode = Mode(args.mode)
    _check_options_fit_mode(args, mode)
    precision, scheme = _precision(args.precision, mode, model)
    # --precision overrides a quantized config.json: this architecture at that precision
    published = False
    if checkpoint is not None and args.precision is None:
        published = True
        if mode is not Mode.INFERENCE:
            raise SizeUsageError(
                f"--config-json: a quantized checkpoint ({checkpoint.name}) is sized in "
                "--mode inference only (give --precision to size its architecture)"
            )
        scheme = checkpoint
    kv_precision = getattr(args, "kv_cache_precision", None)
    return Workload(
        model=model,
        mode=mode,
        precision=precision,
        quantization=scheme,
        quantization_published=published,
        context_tokens=args.context,
        batch=args.batch,
        kv_cache_precision=None if kv_precision is None else Precision(kv_precision),
        training=_training_setup(args),
    )


def _precision(
    name: str | None, mode: Mode, model: ModelSpec | int
) -> tuple[Precision | None, QuantizationScheme | None]:
    """(precision, quantization scheme) of --precision: a `Precision` name, or a
    checkpoint layout from `SCHEMES` (inference of a MODEL only)."""
    if name is None:
        return None, None
    if name in PRECISION_VALUES:
        return Precision(name), None
    if mode is not Mode.INFERENCE:
        raise SizeUsageError(
            f"--precision {name} is a served checkpoint's layout: --mode inference only"
        )
    if not isinstance(model, ModelSpec):
        raise SizeUsageError(
            f"--precision {name} needs a MODEL (its 16-bit embeddings and head depend on the "
            "vocabulary); with --params use int4, int8 or fp8"
        )
    return None, SCHEMES[name]


def _assumptions(args: argparse.Namespace, mode: Mode) -> MemoryAssumptions:
    defaults = DEFAULT_ASSUMPTIONS
    overhead = args.overhead  # finite and >= 0: checked by its argparse type
    inference = mode is Mode.INFERENCE
    return MemoryAssumptions(
        inference_overhead_ratio=(
            overhead if inference and overhead is not None else defaults.inference_overhead_ratio
        ),
        training_overhead_ratio=(
            overhead if not inference and overhead is not None else defaults.training_overhead_ratio
        ),
        activations=args.activations or defaults.activations,
        engine=getattr(args, "engine", None) or defaults.engine,
        engine_settings=_engine_settings(args, defaults.engine_settings),
    )


def _engine_settings(args: argparse.Namespace, defaults: EngineSettings) -> EngineSettings:
    """--max-num-seqs and --max-num-batched-tokens over the defaults (positive)."""
    given = {
        "--max-num-seqs": getattr(args, "max_num_seqs", None),
        "--max-num-batched-tokens": getattr(args, "max_num_batched_tokens", None),
    }
    for flag, value in given.items():
        if value is not None and value <= 0:
            raise SizeUsageError(f"{flag} must be positive, got {value}")
    seqs, tokens = given.values()
    return EngineSettings(
        max_num_seqs=defaults.max_num_seqs if seqs is None else seqs,
        max_num_batched_tokens=defaults.max_num_batched_tokens if tokens is None else tokens,
    )


def _ownership(args: argparse.Namespace, config: RentVsBuyConfig) -> Ownership:
    defaults = Ownership()
    utilization = (
        defaults.utilization if args.utilization is None else parse_utilization(args.utilization)
    )
    return Ownership(
        life_years=config.life_years,
        usd_per_kwh=config.usd_per_kwh,
        utilization=utilization,
        pue=config.pue,
    )


def _rank_by(args: argparse.Namespace) -> RankBy:
    value: RankBy = getattr(args, "rank_by", RANK_BY[0])  # argparse's choices: one of RANK_BY
    return value


def run_size(
    args: argparse.Namespace,
    *,
    gpu_overrides: Sequence[GpuCatalogEntry] = (),
    extra_models: Sequence[ModelCatalogEntry] = (),
    rent_vs_buy: RentVsBuyConfig | None = None,
) -> int:
    """Run ``gpuwatch size``; `gpu_overrides`, `extra_models` and `rent_vs_buy` (the owned
    column's base, under the owning options) come from the agent config."""
    try:
        workload = _workload(args, extra_models)
        assumptions = _assumptions(args, workload.mode)
        owning = ownership_config(args, RentVsBuyConfig() if rent_vs_buy is None else rent_vs_buy)
        ownership = _ownership(args, owning)
        run = SizeRun(
            workload=workload,
            assumptions=assumptions,
            breakdown=memory_requirement(workload, assumptions),
            ranked=rank_gpus(
                build_gpu_catalog(gpu_overrides),
                workload,
                headroom=args.headroom,
                efficiency=args.efficiency,
                ownership=ownership,
                assumptions=assumptions,
                rent_vs_buy=owning,
                rank_by=_rank_by(args),
            ),
            rank_by=_rank_by(args),
            headroom=args.headroom,
            efficiency=args.efficiency,
            ownership=ownership,
            rent_vs_buy=owning,
        )
    except ValueError as exc:  # SizeUsageError, TcoUsageError, bad numbers, a bad catalog entry
        print(f"gpuwatch size: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(size_report(run), indent=2))
    else:
        render_text(run)
    return EXIT_OK
