"""The memory model: how many bytes of GPU memory a workload needs, by component.

`memory_requirement(Workload(...))` returns a `MemoryBreakdown` in bytes. Inference
holds the weights, the KV cache and the serving engine's overhead as vLLM profiles it
(`engine`: activation peak, CUDA context, CUDA graphs; not a fraction of the weights).
Full training with mixed-precision AdamW holds 18 B/param (16-bit weights 2 + fp32
master copy 4 + fp32 gradients 4 + Adam m 4 + v 4, seed 001) plus activations. LoRA and
QLoRA freeze the base weights (16-bit, or 4-bit NF4 plus constants) and train adapters
counted from the architecture (`adapters`), each parameter with its gradient and AdamW's
m and v. Activations come from the architecture, the context and the batch
(`activations`), or by seed 001's rule of thumb when `MemoryAssumptions.activations`
says so. A bare parameter count gets a typical architecture for training (`shapes`). How
a job is run (checkpointing, LoRA rank and targets) is a `TrainingSetup`; the estimating
rules are `MemoryAssumptions`. docs/sizing.md explains each choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwatch.sizing.activations import (
    activation_parts,
    logits_bytes_per_value,
)
from gpuwatch.sizing.adapters import (
    NF4_BITS,
    adapter_parameters,
    quantization_constant_bits,
    unquantized_parameters,
)
from gpuwatch.sizing.engine import EngineOverhead, engine_overhead
from gpuwatch.sizing.models import ModelSpec
from gpuwatch.sizing.moe import activation_factor as moe_activation_factor
from gpuwatch.sizing.quantization import (
    WeightBytes,
    kept_parameters,
    weight_bytes_by_component,
)
from gpuwatch.sizing.shapes import derive_architecture
from gpuwatch.sizing.workload import (
    DEFAULT_ASSUMPTIONS,
    MemoryAssumptions,
    Mode,
    Precision,
    Workload,
)

FP32_BYTES = 4
ADAM_MOMENTS_BYTES = 8
"""Adam's m and v, fp32."""


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Bytes of GPU memory by component; `total_bytes` is their sum.

    `parts` names sub-amounts of the components (bytes) so a reader can redo the sum;
    `architecture` is the shape the figures used (None when none was needed);
    `trainable_parameters` counts what the optimizer updates; `notes` say what the
    figures leave out, assume or estimate.
    """

    weights_bytes: int
    kv_cache_bytes: int = 0
    gradients_bytes: int = 0
    optimizer_bytes: int = 0
    activations_bytes: int = 0
    overhead_bytes: int = 0
    notes: tuple[str, ...] = ()
    parts: tuple[tuple[str, int], ...] = ()
    architecture: ModelSpec | None = None
    trainable_parameters: int = 0
    total_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        total = (
            self.weights_bytes
            + self.kv_cache_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.overhead_bytes
        )
        object.__setattr__(self, "total_bytes", total)


def weight_bytes(parameters: int, precision: Precision) -> int:
    """Bytes of `parameters` weights stored at `precision`."""
    return round(parameters * precision.bytes_per_value)


def workload_weight_parts(workload: Workload) -> WeightBytes | None:
    """An inference workload's weight bytes by component when its weights follow a
    quantization scheme (`Workload.weight_scheme`), else None."""
    scheme = workload.weight_scheme
    model = workload.architecture
    if scheme is None or model is None:
        return None
    return weight_bytes_by_component(model, scheme)


def workload_weight_bytes(workload: Workload) -> int:
    """Bytes of the workload's weights: by component for a quantized checkpoint
    (`workload_weight_parts`), else parameters x bytes per value."""
    parts = workload_weight_parts(workload)
    if parts is not None:
        return parts.total
    return weight_bytes(workload.parameters, workload.weight_precision)


def kv_cache_bytes(
    model: ModelSpec,
    context_tokens: int,
    batch: int,
    bytes_per_value: float = 2.0,
    state_bytes_per_value: float | None = None,
) -> int:
    """KV cache bytes: per layer 2 x kv_heads x head_dim (MLA: kv_lora_rank +
    qk_rope_head_dim) values x bytes x cached tokens, summed over layers, x batch.

    Grouped-query attention is counted through `model.kv_heads`; sliding-window layers
    cache at most the window; linear-attention and Mamba layers add their fixed state
    per sequence at `state_bytes_per_value` (None: `bytes_per_value`) instead
    (`ModelSpec.kv_cache_bytes_per_sequence`).
    """
    per_sequence = model.kv_cache_bytes_per_sequence(
        context_tokens, bytes_per_value, state_bytes_per_value
    )
    return round(per_sequence * batch)


def workload_kv_cache_bytes(workload: Workload) -> int:
    """The KV cache of an inference workload at its full context (0 in training), bytes.

    A bare parameter count is sized with a derived shape (`shapes.derive_architecture`).
    """
    if workload.mode is not Mode.INFERENCE:
        return 0
    return kv_cache_bytes(
        workload.training_architecture,
        workload.context_tokens,
        workload.batch,
        workload.kv_cache_bytes_per_value,
        workload.compute_bytes,  # vLLM keeps Mamba/linear state in the model's dtype
    )


def cache_kind_notes(model: ModelSpec, state_bytes_per_value: float) -> list[str]:
    """Notes for caches that are not a plain per-token KV cache (fixed state, indexer)."""
    notes = []
    if model.has_state or model.kv_layer_count < model.layers:
        state = model.state_bytes_per_sequence(state_bytes_per_value)
        rest = model.layers - model.kv_layer_count - model.state_layers
        text = f"KV cache: {model.kv_layer_count} of {model.layers} layers cache K and V per token"
        if model.has_state:
            text += (
                f"; {model.state_layers} (linear attention / Mamba) keep a fixed state of "
                f"{state / 1e6:.4g} MB per sequence instead (conv + recurrent state)"
            )
        if rest:
            text += f"; {rest} have no attention and cache nothing"
        notes.append(text)
    if model.indexer_bytes_per_token:
        notes.append(
            f"KV cache: plus the sparse-attention indexer's keys, "
            f"{model.indexer_bytes_per_token} B per token per layer (FP8 keys + FP32 scales)"
        )
    return notes


def _adamw_bytes(parameters: int, compute_bytes: float) -> tuple[int, int, int]:
    """(weights, gradients, optimizer) bytes of parameters trained with AdamW.

    16-bit: weights 2, fp32 gradients 4, fp32 master copy + m + v 12 (seed 001, 18 B).
    fp32: weights 4, gradients 4, m + v 8 (no separate master copy, 16 B).
    """
    weights = round(parameters * compute_bytes)
    gradients = parameters * FP32_BYTES
    optimizer = parameters * ADAM_MOMENTS_BYTES
    if compute_bytes < FP32_BYTES:
        optimizer += parameters * FP32_BYTES  # the fp32 master copy of the weights
    return weights, gradients, optimizer


def _scheme_note(workload: Workload) -> str:
    scheme = workload.weight_scheme
    model = workload.architecture
    assert scheme is not None
    assert model is not None
    covered = "routed experts" if scheme.covers == "experts" else "linear layers"
    origin = workload.precision_origin
    mapped = (
        f"plain {workload.weight_precision} with a model taken as {scheme.name}, "
        if origin == "precision" and workload.quantization is None
        else f"{scheme.name} as published, "
        if origin == "published"
        else ""
    )
    kept = round(kept_parameters(model, scheme) * scheme.unquantized_bits / 8)
    kept_what = "embeddings, LM head and norms" + (
        ", attention and the rest" if scheme.covers == "experts" else ""
    )
    if scheme.modules_to_not_convert:
        kept_what += f" and the modules its skip list names ({len(scheme.modules_to_not_convert)})"
    kv = (
        "; KV cache FP8 as the checkpoint declares"
        if scheme.kv_cache == "fp8" and workload.kv_cache_precision is None
        else ""
    )
    return (
        f"weights: {mapped}{scheme.description} on the {covered} "
        f"({scheme.bits_per_weight:.4g} bits each); {kept_what} stay "
        f"{scheme.unquantized_bits}-bit ({kept / 1e9:.3g} GB){kv}"
    )


def _inference(workload: Workload, assumptions: MemoryAssumptions) -> MemoryBreakdown:
    base = workload_weight_bytes(workload)
    weight_parts = workload_weight_parts(workload)
    model = workload.training_architecture
    notes: list[str] = []
    if workload.architecture is None:
        notes.append(
            f"architecture {model.source}: {model.layers} layers x {model.kv_heads} KV "
            f"heads x head dim {model.head_dim}, the KV cache sized from it (give a MODEL "
            "for the real one)"
        )
    elif model.kv_cache_tokens(workload.context_tokens) < workload.context_tokens:
        notes.append(
            f"KV cache: {model.kv_cache_tokens(workload.context_tokens)} of the "
            f"{workload.context_tokens} context tokens, the model's sliding window"
        )
    elif (model.sliding_window or workload.context_tokens) < workload.context_tokens:
        notes.append(
            f"KV cache: {model.sliding_layers} of {model.layers} layers slide and cache "
            f"at most {model.sliding_window} tokens, the rest the whole context"
        )
    if workload.architecture is not None:
        notes += cache_kind_notes(model, workload.compute_bytes)
    if weight_parts is not None:
        notes.append(_scheme_note(workload))
    parts = () if weight_parts is None else weight_parts.parts()
    overhead = round(base * assumptions.inference_overhead_ratio)
    if overhead:
        parts += (("overhead_weights_ratio_bytes", overhead),)
    if assumptions.engine == "vllm":
        engine = engine_overhead(
            model,
            assumptions.engine_settings,
            batch=workload.batch,
            compute_bytes=workload.compute_bytes,
        )
        overhead += engine.total_bytes
        parts += engine.parts()
        notes.append(_engine_note(engine, model))
    return MemoryBreakdown(
        weights_bytes=base,
        kv_cache_bytes=workload_kv_cache_bytes(workload),
        overhead_bytes=overhead,
        notes=tuple(notes),
        parts=parts,
        architecture=model,
    )


def _engine_note(engine: EngineOverhead, model: ModelSpec) -> str:
    """What the engine overhead is made of, in GB."""
    return (
        f"overhead: vLLM's profile run: activation peak {engine.activation_peak_bytes / 1e9:.3g}"
        f" GB, the larger of a forward pass of {engine.batched_tokens} batched tokens "
        f"({engine.forward_bytes / 1e9:.3g} GB) and sampling {engine.sequences} sequences "
        f"x vocabulary {model.vocabulary} ({engine.sampler_bytes / 1e9:.3g} GB) with the "
        f"hidden states kept ({engine.held_hidden_bytes / 1e9:.3g} GB); CUDA context "
        f"{engine.cuda_context_bytes / 1e9:.3g} GB, non-torch "
        f"{engine.non_torch_bytes / 1e9:.3g} GB, CUDA graphs "
        f"{engine.cuda_graphs_bytes / 1e9:.3g} GB"
    )


def _activations(
    workload: Workload, model: ModelSpec, assumptions: MemoryAssumptions
) -> tuple[int, tuple[tuple[str, int], ...], str]:
    """(activation bytes, parts, a note) by the assumptions' rule."""
    compute = workload.compute_bytes
    if assumptions.activations == "seed-001":
        total = round(assumptions.activation_multiplier * workload.parameters * compute)
        note = (
            f"activations: {assumptions.activation_multiplier:g} x the weights at "
            f"{compute * 8:.0f}-bit, whatever the context, batch and checkpointing (seed "
            "001's rule of thumb)"
        )
        return total, (), note
    checkpointing = workload.gradient_checkpointing
    flash = workload.training.flash_attention
    parts = activation_parts(
        model,
        workload.context_tokens,
        workload.batch,
        compute,
        checkpointing=checkpointing,
        flash_attention=flash,
        factor=moe_activation_factor(model, assumptions.activation_factor),
    )
    shape = (
        f"{model.layers} layers x hidden {model.hidden_size} x {workload.context_tokens} "
        f"tokens x batch {workload.batch}"
    )
    factor = f"{moe_activation_factor(model, assumptions.activation_factor):.3g}"
    if model.is_moe:
        factor += (
            f" (the MLP's 16 scaled to the {model.experts_per_token + model.shared_experts} "
            "experts a token runs)"
        )
    if not flash:
        factor += " + 5 x heads x tokens / hidden"
    kept = (
        f"each layer's 16-bit input (2 B) with gradient checkpointing, plus one layer's "
        f"{factor} B working set"
        if checkpointing
        else f"{factor} B per layer, no gradient checkpointing"
    )
    note = (
        f"activations: {shape}: {kept}, plus logits x vocabulary {model.vocabulary} as "
        f"Hugging Face keeps them ({logits_bytes_per_value(compute):g} B: 16-bit logits, "
        "fp32 copy, log-softmax and gradient, 16-bit gradient) (Korthikanti et al. 2022"
        + ("" if flash else "; no flash attention")
        + ")"
    )
    named = (
        ("activations_stored_bytes", parts.stored_bytes),
        ("activations_working_layer_bytes", parts.working_bytes),
        ("activations_logits_bytes", parts.logits_bytes),
    )
    return parts.total_bytes, named, note


def _frozen_base(
    workload: Workload, model: ModelSpec
) -> tuple[int, tuple[tuple[str, int], ...], str | None]:
    """(bytes, parts, a note) of the frozen base weights of LoRA or QLoRA."""
    params = workload.parameters
    precision = workload.weight_precision
    if workload.mode is Mode.LORA:
        return weight_bytes(params, precision), (), None
    kept = unquantized_parameters(model)
    quantized = params - kept
    if precision is Precision.INT4:
        bits = quantization_constant_bits(double_quantization=workload.training.double_quantization)
        packed = round(quantized * NF4_BITS / 8)
        constants = round(quantized * bits / 8)
        scheme = f"4-bit NF4 + {bits:.3g} bit/param of constants (blocks of 64" + (
            ", double quantization)" if workload.training.double_quantization else ", fp32)"
        )
    else:  # int8: LLM.int8() keeps one scale per row, negligible
        packed = quantized
        constants = 0
        scheme = "int8 (LLM.int8(), one scale per row, not counted)"
    sixteen = round(kept * workload.compute_bytes)
    note = (
        f"base: {quantized / 1e9:.3g}B linear weights in {scheme}; {kept / 1e6:.4g}M "
        "embedding, head and norm weights stay 16-bit"
    )
    parts = (
        ("base_quantized_weights_bytes", packed),
        ("base_quantization_constants_bytes", constants),
        ("base_unquantized_weights_bytes", sixteen),
    )
    return packed + constants + sixteen, parts, note


def _adapters(
    workload: Workload, model: ModelSpec
) -> tuple[int, int, int, int, tuple[tuple[str, int], ...], str]:
    """(adapter parameters, weights, gradients, optimizer bytes, parts, a note)."""
    setup = workload.training
    count = adapter_parameters(model, setup.lora_rank, setup.lora_targets)
    each = setup.adapter_precision.bytes_per_value
    weights = round(count * each)
    gradients = round(count * each)
    optimizer = count * ADAM_MOMENTS_BYTES
    note = (
        f"adapters: {count / 1e6:.4g}M parameters ({count / workload.parameters:.2%}) in "
        f"{setup.adapter_precision}, each with a gradient and AdamW's fp32 m and v "
        f"({2 * each + ADAM_MOMENTS_BYTES:g} B); the base weights are frozen"
    )
    return count, weights, gradients, optimizer, (("adapter_weights_bytes", weights),), note


def _training(workload: Workload, assumptions: MemoryAssumptions) -> MemoryBreakdown:
    uses_shape = assumptions.activations == "architecture" or workload.mode is not Mode.TRAIN
    model = workload.architecture
    if model is None and uses_shape:
        model = workload.training_architecture
    shape = model or derive_architecture(workload.parameters)
    notes: list[str] = []
    if workload.architecture is None and uses_shape:
        notes.append(
            f"architecture {shape.source}: {shape.layers} layers, hidden {shape.hidden_size},"
            " a Llama-style block (give a MODEL for the real one)"
        )
    elif uses_shape and shape.assumed:
        notes.append(f"assumed for {shape.name}: " + ", ".join(shape.assumed))
    activations, parts, activation_note = _activations(workload, shape, assumptions)
    if workload.mode is Mode.TRAIN:
        weights, gradients, optimizer = _adamw_bytes(workload.parameters, workload.compute_bytes)
        trainable = workload.parameters
        optimizer_note = None
    else:
        base, base_parts, base_note = _frozen_base(workload, shape)
        trainable, adapter_w, gradients, optimizer, adapter_parts, adapter_note = _adapters(
            workload, shape
        )
        weights = base + adapter_w
        parts = base_parts + adapter_parts + parts
        notes += [note for note in (base_note, adapter_note) if note is not None]
        optimizer_note = (
            "optimizer: QLoRA's paged AdamW can move these states to CPU memory under "
            "pressure; counted here as held on the GPU"
            if workload.mode is Mode.QLORA
            else None
        )
    notes.append(activation_note)
    if optimizer_note is not None:
        notes.append(optimizer_note)
    return MemoryBreakdown(
        weights_bytes=weights,
        gradients_bytes=gradients,
        optimizer_bytes=optimizer,
        activations_bytes=activations,
        overhead_bytes=round(weights * assumptions.training_overhead_ratio),
        notes=tuple(notes),
        parts=parts,
        architecture=model,
        trainable_parameters=trainable,
    )


def memory_requirement(
    workload: Workload, assumptions: MemoryAssumptions = DEFAULT_ASSUMPTIONS
) -> MemoryBreakdown:
    """GPU memory the workload needs on one GPU, by component, in bytes."""
    if workload.mode is Mode.INFERENCE:
        return _inference(workload, assumptions)
    return _training(workload, assumptions)
