"""What `gpuwatch size` prints: the JSON object and the 80-column text.

`SizeRun` holds one run's inputs and results; `size_report` is the JSON (bytes, tokens/s,
USD, with the architecture and every assumption so a reader can redo the sum);
`render_text` prints the tables with rich.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from gpuwatch.cli.console import stdout_console
from gpuwatch.sizing.engine import (
    CUDA_CONTEXT_BYTES,
    CUDA_GRAPHS_BYTES,
    NON_TORCH_BYTES,
    SAMPLER_BYTES_PER_LOGIT,
)
from gpuwatch.sizing.memory import MemoryBreakdown
from gpuwatch.sizing.models import ModelSpec
from gpuwatch.sizing.moe import expected_distinct_experts
from gpuwatch.sizing.quantization import PRECISION_SCHEMES
from gpuwatch.sizing.throughput import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_TRAINING_MFU,
    decode_weight_bytes,
)
from gpuwatch.sizing.units import to_gb, to_gib
from gpuwatch.sizing.workload import MemoryAssumptions, Mode, Workload
from gpuwatch.tco.config import RentVsBuyConfig
from gpuwatch.tco.per_token import Ownership, PricedShape, RankBy, RankedGpu

BREAKDOWN_KEYS = (
    "weights_bytes",
    "kv_cache_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "overhead_bytes",
    "total_bytes",
)


@dataclass(frozen=True, slots=True)
class SizeRun:
    """One ``gpuwatch size``: the workload, the rules, the results, the options used.

    `efficiency` None means the mode's default. `rent_vs_buy`: what priced the owned
    column (`gpuwatch tco`'s model); None: seed 001's method with `ownership`.
    `rank_by`: the cost `ranked` is sorted by.
    """

    workload: Workload
    assumptions: MemoryAssumptions
    breakdown: MemoryBreakdown
    ranked: Sequence[RankedGpu]
    headroom: float
    efficiency: float | None
    ownership: Ownership
    rent_vs_buy: RentVsBuyConfig | None = None
    rank_by: RankBy = "usd-per-million-tokens"

    @property
    def training(self) -> bool:
        """True for the train, lora and qlora modes."""
        return self.workload.mode is not Mode.INFERENCE

    @property
    def lora(self) -> bool:
        """True for the lora and qlora modes."""
        return self.workload.mode in (Mode.LORA, Mode.QLORA)

    @property
    def resolved_efficiency(self) -> float:
        """The efficiency used: the option, else the mode's default."""
        if self.efficiency is not None:
            return self.efficiency
        return DEFAULT_TRAINING_MFU if self.training else DEFAULT_BANDWIDTH_EFFICIENCY

    @property
    def overhead_ratio(self) -> float:
        """The overhead fraction of the weights this mode used."""
        if self.training:
            return self.assumptions.training_overhead_ratio
        return self.assumptions.inference_overhead_ratio

    @property
    def engine(self) -> bool:
        """True when inference adds the serving engine's overhead (`--engine vllm`)."""
        return not self.training and self.assumptions.engine == "vllm"


def _engine(run: SizeRun) -> dict[str, Any]:
    """The engine-overhead assumptions for JSON: null where no engine is modelled."""
    settings = run.assumptions.engine_settings
    on = run.engine
    return {
        "engine": None if run.training else run.assumptions.engine,
        "max_num_seqs": settings.max_num_seqs if on else None,
        "max_num_batched_tokens": settings.max_num_batched_tokens if on else None,
        "sampler_bytes_per_logit": SAMPLER_BYTES_PER_LOGIT if on else None,
        "cuda_context_bytes": CUDA_CONTEXT_BYTES if on else None,
        "non_torch_bytes": NON_TORCH_BYTES if on else None,
        "cuda_graphs_bytes": CUDA_GRAPHS_BYTES if on else None,
    }


def _quantization(workload: Workload) -> dict[str, Any] | None:
    """The weights' checkpoint layout (`Workload.weight_scheme`) for JSON, None when flat."""
    scheme = workload.weight_scheme
    if scheme is None:
        return None
    return {
        "scheme": scheme.name,
        "method": scheme.method,
        "bits": scheme.bits,
        "group_size": scheme.group_size,
        "bits_per_weight": scheme.bits_per_weight,
        "covers": scheme.covers,
        "compute": scheme.compute,
        "from_precision": workload.quantization is None
        and (workload.published is None or workload.published in PRECISION_SCHEMES),
        "modules_not_converted": len(scheme.modules_to_not_convert),
        "kv_cache": scheme.kv_cache,
    }


PRECISION_WHY = {
    "precision": "--precision",
    "published": "as published",
    "default": "the mode's default",
}
"""`Workload.precision_origin` in words, for the heading and JSON's ``precision_why``."""


def _precision_text(workload: Workload) -> str:
    """The precision for the heading: the scheme's name when the weights follow one."""
    scheme = workload.weight_scheme
    return workload.weight_precision.value if scheme is None else scheme.name


def _architecture(model: ModelSpec | None) -> dict[str, Any] | None:
    if model is None:
        return None
    return {
        "name": model.name,
        "source": model.source,
        "parameters": model.parameters,
        "layers": model.layers,
        "hidden_size": model.hidden_size,
        "attention_heads": model.attention_heads,
        "kv_heads": model.kv_heads,
        "head_dim": model.head_dim,
        "intermediate_size": model.mlp_size,
        "gated_mlp": model.gated_mlp,
        "vocab_size": model.vocabulary,
        "tied_embeddings": model.tied_embeddings,
        "sliding_window": model.sliding_window,
        "sliding_layers": model.sliding_layers,
        "kv_lora_rank": model.kv_lora_rank,
        "qk_rope_head_dim": model.qk_rope_head_dim,
        "kv_values_per_layer_per_token": model.kv_values_per_layer,
        "full_layer_kv_values_per_token": model.full_layer_kv_values,
        "assumed": list(model.assumed),
        "kv_layers": model.kv_layer_count,
        "state_layers": model.state_layers,
        "conv_state_values_per_layer": model.conv_state_values,
        "recurrent_state_values_per_layer": model.recurrent_state_values,
        "recurrent_state_bytes_per_value": model.recurrent_state_bytes,
        "indexer_bytes_per_layer_per_token": model.indexer_bytes_per_token,
        "vision_parameters": model.vision_parameters,
    }


def _assumptions(run: SizeRun) -> dict[str, Any]:
    workload, setup = run.workload, run.workload.training
    architecture_rule = run.assumptions.activations == "architecture"
    training: dict[str, Any] = {
        "activations": run.assumptions.activations if run.training else None,
        "activation_factor": (
            run.assumptions.activation_factor if run.training and architecture_rule else None
        ),
        "activation_multiplier": (
            run.assumptions.activation_multiplier
            if run.training and not architecture_rule
            else None
        ),
        "gradient_checkpointing": workload.gradient_checkpointing if run.training else None,
        "flash_attention": setup.flash_attention if run.training else None,
        "optimizer": "adamw" if run.training else None,
        "lora_rank": setup.lora_rank if run.lora else None,
        "lora_targets": list(setup.lora_targets) if run.lora else None,
        "adapter_precision": setup.adapter_precision.value if run.lora else None,
        "double_quantization": (setup.double_quantization if workload.mode is Mode.QLORA else None),
        "paged_optimizer_note": workload.mode is Mode.QLORA,
    }
    return {
        "headroom": run.headroom,
        "overhead_ratio": run.overhead_ratio,
        **_engine(run),
        **training,
        "efficiency": run.resolved_efficiency,
        "utilization": run.ownership.utilization,
        "life_years": run.ownership.life_years,
        "usd_per_kwh": run.ownership.usd_per_kwh,
        "pue": run.ownership.pue,
        **_owning(run.rent_vs_buy),
    }


def _owning(config: RentVsBuyConfig | None) -> dict[str, Any]:
    """The rent-vs-buy inputs behind the owned column (None: seed 001's method)."""
    if config is None:
        return {"owned_model": "seed-001"}
    return {
        "owned_model": "rent-vs-buy",
        "cost_of_capital": config.cost_of_capital,
        "ops_usd_per_year_per_gpu": config.ops_usd_per_year_per_gpu,
        "facility": config.facility,
        "hosting_usd_per_kw_month": config.hosting_usd_per_kw_month,
        "host_share": config.host_share,
    }


def _gpu_to_dict(row: RankedGpu, run: SizeRun) -> dict[str, Any]:
    config = run.rent_vs_buy
    owned: dict[str, Any] = {}
    if config is not None:
        inputs = config.inputs_for(row.gpu, run.ownership.utilization)
        owned = {
            "owned_usd_per_gpu_year": config.owned_usd_per_gpu_year(row.gpu),
            "facility": inputs.facility,
            "pue_applied": inputs.applied_pue,
            "hosting_usd_per_kw_month": inputs.hosting_usd_per_kw_month,
            "host_capex_usd": inputs.host_capex_usd,
            "host_power_watts": inputs.host_power_watts,
        }
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
        "nvlink_domain_gpus": row.gpu.nvlink_domain_gpus,
        "gpus_per_node": row.gpu.gpus_per_node,
        "deployment": _deployment(row.deployment),
        **owned,
    }


def _deployment(priced: PricedShape | None) -> dict[str, Any] | None:
    """The GPU's cheapest shape for JSON (None: no shape holds the workload)."""
    if priced is None:
        return None
    shape = priced.shape
    return {
        "shape": shape.label,
        "strategy": shape.strategy,
        "gpus": shape.gpus,
        "tensor_parallel": shape.tensor_parallel,
        "pipeline_parallel": shape.pipeline_parallel,
        "nodes": shape.nodes,
        "interconnect": shape.interconnect,
        "memory_per_gpu_bytes": shape.memory_per_gpu_bytes,
        "tokens_per_second": shape.tokens_per_second,
        "usd_per_hour_rented": priced.usd_per_hour_rented,
        "usd_per_million_tokens_rented": priced.usd_per_million_tokens_rented,
        "usd_per_million_tokens_owned": priced.usd_per_million_tokens_owned,
    }


def size_report(run: SizeRun) -> dict[str, Any]:
    """The JSON object `gpuwatch size --json` prints (bytes, tokens/s, USD)."""
    workload, breakdown = run.workload, run.breakdown
    model = workload.architecture
    shape = breakdown.architecture  # a bare count's derived shape too
    kv_tokens = (
        shape.kv_cache_tokens(workload.context_tokens)
        if shape is not None and workload.mode is Mode.INFERENCE
        else None
    )
    return {
        "model": None if model is None else model.name,
        "parameters": workload.parameters,
        "mode": workload.mode.value,
        "precision": workload.weight_precision.value,
        "precision_origin": workload.precision_origin,
        "precision_why": PRECISION_WHY[workload.precision_origin],
        "quantization": _quantization(workload),
        "context_tokens": workload.context_tokens,
        "batch": workload.batch,
        "kv_cache_tokens": kv_tokens,
        "headroom": run.headroom,
        **{key: getattr(breakdown, key) for key in BREAKDOWN_KEYS},
        "trainable_parameters": breakdown.trainable_parameters,
        "parts": dict(breakdown.parts),
        "architecture": _architecture(breakdown.architecture),
        "moe": _moe(workload),
        "assumptions": _assumptions(run),
        "notes": list(breakdown.notes),
        "rank_by": run.rank_by,
        "gpus": [_gpu_to_dict(row, run) for row in run.ranked],
    }


def _moe(workload: Workload) -> dict[str, Any] | None:
    """The mixture-of-experts figures behind the sum and the speed; None for a dense model.

    `distinct_experts_per_step`: routed experts one MoE layer is expected to read per
    decode step at the workload's batch, ``E x (1 - (1 - k/E)^b)`` (uniform routing);
    `decode_weight_bytes_per_step`: the weight bytes that step streams.
    """
    model = workload.architecture
    if model is None or not model.is_moe:
        return None
    return {
        "experts": model.experts,
        "experts_per_token": model.experts_per_token,
        "shared_experts": model.shared_experts,
        "moe_layers": model.moe_layers,
        "expert_intermediate_size": model.expert_size,
        "dense_layers": model.layers - model.moe_layers,
        "shared_expert_intermediate_size": model.shared_expert_size
        if model.shared_experts
        else None,
        "expert_parameters": model.expert_parameters,
        "active_parameters": model.active_parameters,
        "distinct_experts_per_step": expected_distinct_experts(
            model.experts, model.experts_per_token, workload.batch
        ),
        "decode_weight_bytes_per_step": decode_weight_bytes(workload),
        "routing": "uniform, independent tokens (an upper bound on experts read)",
    }


def moe_line(workload: Workload) -> str | None:
    """One line of a mixture of experts' counts and decode reads; None for a dense model."""
    moe = _moe(workload)
    if moe is None:
        return None
    shared = f" + {moe['shared_experts']} shared" if moe["shared_experts"] else ""
    line = (
        f"mixture of experts: {moe['experts']} experts{shared}, {moe['experts_per_token']} "
        f"per token, on {moe['moe_layers']} layers; {_count_text(moe['active_parameters'])} "
        f"of {_count_text(workload.parameters)} parameters active per token (all resident)"
    )
    if workload.mode is not Mode.INFERENCE:
        return line
    return (
        f"{line}; a decode step at batch {workload.batch} reads "
        f"{moe['distinct_experts_per_step']:.3g} experts per layer (uniform routing)"
    )


def _size_text(n_bytes: int) -> str:
    return f"{to_gb(n_bytes):,.1f} GB ({to_gib(n_bytes):,.1f} GiB)"


def _count_text(parameters: int) -> str:
    for factor, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if parameters >= factor:
            return f"{parameters / factor:.3g}{suffix}"
    return str(parameters)


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def architecture_line(model: ModelSpec) -> str:
    """One line naming the shape used: layers, hidden, heads, MLP, vocabulary."""
    heads = f"{model.attention_heads} heads ({model.kv_heads} KV) x {model.head_dim}"
    if model.is_mla:
        heads = (
            f"{model.attention_heads} heads, latent attention caching "
            f"{model.kv_lora_rank} + {model.qk_rope_head_dim} per layer"
        )
    window = "" if model.sliding_window is None else f", window {model.sliding_window}"
    if model.sliding_window is not None and model.full_layers:
        window += f" on {model.sliding_layers} of {model.layers} layers"
    if model.kv_layer_count < model.layers:
        window += f", KV cache on {model.kv_layer_count} of {model.layers} layers"
    if model.has_state:
        window += f", fixed state on {model.state_layers}"
    if model.indexer_bytes_per_token:
        window += f", indexer keys {model.indexer_bytes_per_token} B/token/layer"
    if model.full_layer_kv_values != model.kv_values_per_layer and model.full_layers:
        window += f"; full layers cache {model.full_layer_kv_values} values per token"
    if model.vision_parameters:
        window += f"; vision tower {_count_text(model.vision_parameters)} (counted, 16-bit)"
    return (
        f"architecture: {model.name}: {model.layers} layers, hidden {model.hidden_size}, "
        f"{heads}, MLP {model.mlp_size}, vocabulary {model.vocabulary}{window}"
    )


def assumptions_line(run: SizeRun) -> str:
    """One line of the assumptions behind the sum."""
    items = [f"headroom {run.headroom:.0%}"]
    if run.engine:
        settings = run.assumptions.engine_settings
        items.append(
            f"engine vLLM ({settings.max_num_seqs} sequences, "
            f"{settings.max_num_batched_tokens} batched tokens)"
        )
    elif not run.training:
        items.append("no engine overhead")
    if run.training or run.overhead_ratio or not run.engine:
        items.append(f"overhead {run.overhead_ratio:g} x weights")
    why = PRECISION_WHY[run.workload.precision_origin]
    items.append(f"weights {_precision_text(run.workload)} ({why})")
    if run.training:
        setup = run.workload.training
        items += [
            f"gradient checkpointing {_on(run.workload.gradient_checkpointing)}",
            f"flash attention {_on(setup.flash_attention)}",
            f"activations: {run.assumptions.activations}",
        ]
        if run.lora:
            items.append(
                f"LoRA rank {setup.lora_rank} on {','.join(setup.lora_targets)} "
                f"({setup.adapter_precision})"
            )
        if run.workload.mode is Mode.QLORA:
            items.append(f"double quantization {_on(setup.double_quantization)}")
    return "assumptions: " + ", ".join(items)


def render_text(run: SizeRun) -> None:
    """Print the breakdown, the architecture and assumptions, notes and the GPU table."""
    console = stdout_console()
    workload, breakdown = run.workload, run.breakdown
    name = "model" if workload.architecture is None else workload.architecture.name
    memory = Table(
        title=(
            f"{name}: {_count_text(workload.parameters)} parameters, {workload.mode.value}, "
            f"{_precision_text(workload)}, context {workload.context_tokens} x batch "
            f"{workload.batch}"
        )
    )
    memory.add_column("component")
    memory.add_column("memory (1 GB = 10^9 bytes)", justify="right")
    for key in BREAKDOWN_KEYS:
        value = getattr(breakdown, key)
        if value or key in ("weights_bytes", "total_bytes"):
            memory.add_row(key.removesuffix("_bytes").replace("_", " "), _size_text(value))
    console.print(memory)
    lines = [] if breakdown.architecture is None else [architecture_line(breakdown.architecture)]
    moe_text = moe_line(run.workload)
    if moe_text is not None:
        lines.append(moe_text)
    lines.append(assumptions_line(run))
    lines += [f"note: {note}" for note in breakdown.notes]
    for line in lines:
        console.print(line, highlight=False)
    _render_gpus(console, run)


_RANK_TITLE = {"usd-per-million-tokens": "$ per 1M tokens", "usd-per-hour": "$ per hour"}


def _render_gpus(console: Console, run: SizeRun) -> None:
    speed = "training" if run.training else "decode"
    gpus = Table(
        title=(
            f"GPUs, each in its cheapest shape, by rented {_RANK_TITLE[run.rank_by]}: "
            f"fit with {run.headroom:.0%} headroom, {speed} tokens/s and $ of the whole shape"
        )
    )
    gpus.add_column("GPU", overflow="fold")
    gpus.add_column("shape", no_wrap=True)
    gpus.add_column("tokens/s", justify="right")
    gpus.add_column("$/h", justify="right")
    gpus.add_column("$/1M rented", justify="right")
    gpus.add_column("$/1M owned", justify="right")
    for row in run.ranked:
        deployment = row.deployment
        if deployment is None:
            gpus.add_row(row.name, "no", "-", "-", "-", "-")
            continue
        gpus.add_row(
            row.name,
            deployment.shape.label,
            f"{deployment.shape.tokens_per_second:,.1f}",
            f"{deployment.usd_per_hour_rented:,.2f}",
            f"{deployment.usd_per_million_tokens_rented:,.3f}",
            f"{deployment.usd_per_million_tokens_owned:,.3f}",
        )
    console.print(gpus)
    for line in _interconnect_lines(run):
        console.print(line, highlight=False)
    console.print(_owned_note(run), highlight=False)


def _interconnect_lines(run: SizeRun, rows: int = 5) -> list[str]:
    """What links the first `rows` multi-GPU shapes assume, and the shape rules."""
    lines = []
    for row in run.ranked[:rows]:
        deployment = row.deployment
        if deployment is not None and deployment.shape.gpus > 1:
            shape = deployment.shape
            lines.append(f"{row.name} {shape.label}: {shape.interconnect}")
    if not lines:
        return []
    rules = (
        "shapes: FSDP shards the total over the GPUs, each training its own micro-batch"
        if run.training
        else "shapes: a TP degree divides the attention and KV heads, within one NVLink "
        "domain; PP stages split the layers and add memory, not speed"
    ) + "; GeForce cards stay in one server; $ is the whole shape's (docs/sizing.md)"
    return [*lines, rules]


def _owned_note(run: SizeRun) -> str:
    """What the rented and owned columns are, with every owned input."""
    ownership, config = run.ownership, run.rent_vs_buy
    if config is None:
        return (
            f"rented: the catalog's on-demand $/GPU-hour; owned: purchase over "
            f"{ownership.life_years:g} years + TDP x PUE {ownership.pue:g} at "
            f"${ownership.usd_per_kwh}/kWh, busy {ownership.utilization:.0%} of the time. "
            "Prices: docs/sizing.md."
        )
    host = "GPU and host share" if config.host_share else "bare card"
    facility = (
        "colocation for datacenter parts (PUE not applied), else owned room"
        if config.facility is None
        else f"facility {config.facility}"
    )
    hosting = (
        ""
        if config.hosting_usd_per_kw_month is None
        else f", hosting ${config.hosting_usd_per_kw_month:,.2f}/kW-month"
    )
    return (
        f"rented: the catalog's on-demand $/GPU-hour; owned: gpuwatch tco's owned "
        f"$/GPU-year / 8760 h, busy {ownership.utilization:.0%} of the time ({host}, "
        f"{config.life_years:g} years at {config.cost_of_capital * 100:.4g}%/year, ops "
        f"${config.ops_usd_per_year_per_gpu:,.2f}/GPU-year, ${config.usd_per_kwh:g}/kWh, "
        f"PUE {config.pue:g} in an owned room, {facility}{hosting}). Prices: "
        "docs/sizing.md, docs/tco.md."
    )
