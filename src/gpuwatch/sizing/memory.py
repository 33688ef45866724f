"""The memory model: how many bytes of GPU memory a workload needs, by component.

`memory_requirement(Workload(...))` returns a `MemoryBreakdown` in bytes. Inference holds
the weights, the KV cache and an overhead (seed 001). Full training with mixed-precision
AdamW holds 18 B/param (16-bit weights 2 + fp32 master copy 4 + fp32 gradients 4 + Adam
m 4 + v 4, seed 001) plus activations. LoRA and QLoRA freeze the base weights (16-bit,
or 4-bit NF4 plus constants) and train adapters counted from the architecture
(`adapters`), each parameter with its gradient and AdamW's m and v. Activations come from
the architecture, the context and the batch (`activations`), or by seed 001's rule of
thumb when `MemoryAssumptions.activations` says so. A bare parameter count gets a
typical architecture for training (`shapes`). How a job is run (checkpointing, LoRA rank
and targets) is a `TrainingSetup`; the estimating rules are `MemoryAssumptions`.
docs/sizing.md explains each choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from gpuwatch.sizing.activations import (
    KORTHIKANTI_FACTOR,
    activation_parts,
    logits_bytes_per_value,
)
from gpuwatch.sizing.adapters import (
    DEFAULT_LORA_RANK,
    LORA_MODULES,
    NF4_BITS,
    adapter_parameters,
    quantization_constant_bits,
    unquantized_parameters,
)
from gpuwatch.sizing.models import ModelSpec
from gpuwatch.sizing.moe import activation_factor as moe_activation_factor
from gpuwatch.sizing.quantization import (
    PRECISION_SCHEMES,
    QuantizationScheme,
    WeightBytes,
    weight_bytes_by_component,
)
from gpuwatch.sizing.shapes import derive_architecture


class Precision(StrEnum):
    """Storage precision of weights (or of the KV cache)."""

    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"

    @property
    def bytes_per_value(self) -> float:
        """Bytes per stored value: 4, 2, 2, 1, 1, 0.5."""
        return _BYTES_PER_VALUE[self]


_BYTES_PER_VALUE = {
    Precision.FP32: 4.0,
    Precision.FP16: 2.0,
    Precision.BF16: 2.0,
    Precision.FP8: 1.0,
    Precision.INT8: 1.0,
    Precision.INT4: 0.5,
}


class Mode(StrEnum):
    """What the GPU does with the model."""

    INFERENCE = "inference"
    TRAIN = "train"
    LORA = "lora"
    QLORA = "qlora"


DEFAULT_PRECISION = {
    Mode.INFERENCE: Precision.FP16,
    Mode.TRAIN: Precision.BF16,
    Mode.LORA: Precision.BF16,
    Mode.QLORA: Precision.INT4,
}
"""The weight precision a `Workload` gets when it names none."""

ALLOWED_PRECISIONS = {
    Mode.INFERENCE: frozenset(Precision),
    Mode.TRAIN: frozenset({Precision.FP32, Precision.FP16, Precision.BF16}),
    Mode.LORA: frozenset({Precision.FP32, Precision.FP16, Precision.BF16}),
    Mode.QLORA: frozenset({Precision.INT4, Precision.INT8}),
}

DEFAULT_CONTEXT_TOKENS = 4096
DEFAULT_BATCH = 1

FP32_BYTES = 4
ADAM_MOMENTS_BYTES = 8
"""Adam's m and v, fp32."""

ADAPTER_PRECISIONS = frozenset({Precision.FP32, Precision.BF16, Precision.FP16})

ActivationRule = Literal["architecture", "seed-001"]


@dataclass(frozen=True, slots=True)
class MemoryAssumptions:
    """The estimating rules of the memory model.

    - `inference_overhead_ratio`: activations, CUDA context and framework buffers during
      inference, as a fraction of weight bytes. Seed 001's estimator adds 0.2 x weights,
      seed 003 says inference needs ~1.2 x model size, seed 000 says 20-40 %: 0.2.
      For a bare parameter count it also stands in for a short context's KV cache.
    - `training_overhead_ratio`: extra bytes in training as a fraction of weight bytes;
      seed 001 counts none (0.0). Fit headroom covers the CUDA context instead.
    - `activations`: "architecture" counts training activations from layers, hidden
      size, context and batch (`activations.activation_parts`, factor
      `activation_factor`); "seed-001" is seed 001's rule of thumb, `activation_multiplier`
      x the weights at the compute precision whatever the context, batch or checkpointing
      (it reproduces the seed's 143.4 GiB 7B example).
    """

    inference_overhead_ratio: float = 0.2
    training_overhead_ratio: float = 0.0
    activations: ActivationRule = "architecture"
    activation_factor: float = KORTHIKANTI_FACTOR
    activation_multiplier: float = 2.0

    def __post_init__(self) -> None:
        for name in (
            "inference_overhead_ratio",
            "training_overhead_ratio",
            "activation_factor",
            "activation_multiplier",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.activations not in ("architecture", "seed-001"):
            raise ValueError(
                f"activations must be architecture or seed-001, not {self.activations}"
            )


DEFAULT_ASSUMPTIONS = MemoryAssumptions()

SEED_001 = MemoryAssumptions(activations="seed-001")
"""Seed 001's estimator: activations 2 x the 16-bit weights (its 143.4 GiB 7B example)."""


@dataclass(frozen=True, slots=True)
class TrainingSetup:
    """How a training job runs (ignored for inference).

    `gradient_checkpointing`: None takes the mode's default, on for LoRA/QLoRA (as
    Hugging Face's PEFT and TRL recipes, axolotl and the QLoRA paper set it), off for
    full training (Trainer's default). `flash_attention`: attention without the s x s
    score matrix (flash attention or PyTorch SDPA, Transformers' default since 4.36).
    `lora_rank` and `lora_targets` (names from `LORA_MODULES`) size the adapters;
    `adapter_precision` is their storage (PEFT upcasts adapters to fp32 by default; the
    QLoRA paper's code keeps them bf16). `double_quantization`: QLoRA's 8-bit constants.
    """

    gradient_checkpointing: bool | None = None
    flash_attention: bool = True
    lora_rank: int = DEFAULT_LORA_RANK
    lora_targets: tuple[str, ...] = LORA_MODULES
    adapter_precision: Precision = Precision.FP32
    double_quantization: bool = True

    def __post_init__(self) -> None:
        if self.lora_rank <= 0:
            raise ValueError(f"LoRA rank must be positive, got {self.lora_rank}")
        if not self.lora_targets:
            raise ValueError("LoRA needs at least one target module")
        unknown = [name for name in self.lora_targets if name not in LORA_MODULES]
        if unknown:
            raise ValueError(
                f"unknown LoRA target {unknown[0]!r}; known: {', '.join(LORA_MODULES)}"
            )
        if len(set(self.lora_targets)) != len(self.lora_targets):
            raise ValueError("LoRA targets repeat a module")
        if self.adapter_precision not in ADAPTER_PRECISIONS:
            raise ValueError(
                f"adapter precision must be fp32, bf16 or fp16, not {self.adapter_precision}"
            )

    def checkpointing(self, mode: Mode) -> bool:
        """Whether activations are checkpointed in `mode` (None: LoRA/QLoRA yes, else no)."""
        if self.gradient_checkpointing is not None:
            return self.gradient_checkpointing
        return mode in (Mode.LORA, Mode.QLORA)


DEFAULT_TRAINING = TrainingSetup()


@dataclass(frozen=True, slots=True)
class Workload:
    """A model and what is done with it.

    `model` is a `ModelSpec` or a bare parameter count. A bare count gets a typical
    architecture (`shapes.derive_architecture`) for the KV cache in inference and the
    activations and adapters in training, and the output says so. `precision`
    is the weights' storage precision; None takes the mode's default
    (`DEFAULT_PRECISION`). `kv_cache_precision` None means the compute precision: the
    weights' if they are 16 or 32-bit, else 16-bit. `context_tokens` and `batch` size the
    KV cache (inference) and the activations (training: sequence length and micro-batch
    per GPU). `training` says how a training job runs.
    """

    model: ModelSpec | int
    mode: Mode = Mode.INFERENCE
    precision: Precision | None = None
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    batch: int = DEFAULT_BATCH
    kv_cache_precision: Precision | None = None
    training: TrainingSetup = DEFAULT_TRAINING
    quantization: QuantizationScheme | None = None

    def __post_init__(self) -> None:
        if self.parameters <= 0:
            raise ValueError("the parameter count must be positive")
        if self.quantization is not None and self.mode is not Mode.INFERENCE:
            raise ValueError(
                f"quantization ({self.quantization.name}) is a served checkpoint's layout: "
                "inference mode only (qlora sizes its NF4 base itself)"
            )
        if self.context_tokens <= 0:
            raise ValueError("context tokens must be positive")
        if self.batch <= 0:
            raise ValueError("batch must be positive")
        allowed = ALLOWED_PRECISIONS[self.mode]
        if self.weight_precision not in allowed:
            names = ", ".join(sorted(allowed))
            raise ValueError(
                f"{self.mode} mode takes precision {names}, not {self.weight_precision}"
                + ("" if self.mode is Mode.QLORA else " (quantized base weights are qlora mode)")
            )
        if self.mode in (Mode.LORA, Mode.QLORA):
            setup = self.training
            count = adapter_parameters(
                self.training_architecture, setup.lora_rank, setup.lora_targets
            )
            if count >= self.parameters:
                raise ValueError(
                    f"LoRA adapters of {count:,} parameters would outnumber the model's "
                    f"{self.parameters:,}: give a MODEL, or a smaller rank"
                )

    @property
    def parameters(self) -> int:
        """The model's parameter count."""
        return self.model.parameters if isinstance(self.model, ModelSpec) else self.model

    @property
    def architecture(self) -> ModelSpec | None:
        """The model's architecture, None for a bare parameter count."""
        return self.model if isinstance(self.model, ModelSpec) else None

    @property
    def training_architecture(self) -> ModelSpec:
        """The architecture the KV cache and training are sized with: the model's, else a
        derived one (`shapes.derive_architecture`)."""
        return self.architecture or derive_architecture(self.parameters)

    @property
    def weight_precision(self) -> Precision:
        """`precision`, else the `quantization` scheme's storage, else the mode's default."""
        if self.precision is not None:
            return self.precision
        if self.quantization is not None:
            return scheme_precision(self.quantization)
        return DEFAULT_PRECISION[self.mode]

    @property
    def weight_scheme(self) -> QuantizationScheme | None:
        """How the served weights are laid out, None for plain 16/32-bit or a bare count.

        `quantization` when given; else, for inference of a model with an architecture,
        the scheme a plain int4, int8 or fp8 precision stands for (`PRECISION_SCHEMES`:
        AWQ INT4 group 128, INT8 and FP8 W8A8 per channel; embeddings and LM head 16-bit).
        A bare parameter count keeps the flat bytes per parameter of seed 001's tables.
        Laid out on the model (`QuantizationScheme.for_model`): MXFP4 and NVFP4 by name
        cover the routed experts of a mixture of experts, every linear layer of a dense one.
        """
        model = self.architecture
        if self.quantization is not None:
            return self.quantization if model is None else self.quantization.for_model(model)
        if self.mode is not Mode.INFERENCE or model is None:
            return None
        scheme = PRECISION_SCHEMES.get(self.weight_precision.value)
        return None if scheme is None else scheme.for_model(model)

    @property
    def compute_bytes(self) -> float:
        """Bytes per value of activations and (by default) the KV cache: 16-bit at least."""
        return max(self.weight_precision.bytes_per_value, 2.0)

    @property
    def kv_cache_bytes_per_value(self) -> float:
        """Bytes per cached K or V value."""
        if self.kv_cache_precision is not None:
            return self.kv_cache_precision.bytes_per_value
        return self.compute_bytes

    @property
    def gradient_checkpointing(self) -> bool:
        """Whether this (training) workload checkpoints activations."""
        return self.training.checkpointing(self.mode)


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


def scheme_precision(scheme: QuantizationScheme) -> Precision:
    """The `Precision` bucket a scheme's quantized values fall in: INT4 for 4-bit and
    below, FP8 for 8-bit FP8 math, else INT8."""
    if scheme.bits <= 4:
        return Precision.INT4
    return Precision.FP8 if scheme.compute == "fp8" else Precision.INT8


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
    model: ModelSpec, context_tokens: int, batch: int, bytes_per_value: float = 2.0
) -> int:
    """KV cache bytes: per layer 2 x kv_heads x head_dim (MLA: kv_lora_rank +
    qk_rope_head_dim) values x bytes x cached tokens, summed over layers, x batch.

    Grouped-query attention is counted through `model.kv_heads`; sliding-window layers
    cache at most the window (`ModelSpec.kv_cache_bytes_per_sequence`).
    """
    return round(model.kv_cache_bytes_per_sequence(context_tokens, bytes_per_value) * batch)


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
    )


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


def _scheme_note(workload: Workload, parts: WeightBytes) -> str:
    scheme = workload.weight_scheme
    assert scheme is not None
    covered = "routed experts" if scheme.covers == "experts" else "linear layers"
    mapped = (
        f"plain {workload.weight_precision} with a model taken as {scheme.name}, "
        if workload.quantization is None
        else ""
    )
    kept = (
        parts.total
        - (parts.experts if scheme.covers == "experts" else 0)
        - (parts.linear if scheme.covers == "linear" else 0)
    )
    kept_what = "embeddings, LM head and norms" + (
        ", attention and the rest" if scheme.covers == "experts" else ""
    )
    return (
        f"weights: {mapped}{scheme.description} on the {covered} "
        f"({scheme.bits_per_weight:.4g} bits each); {kept_what} stay "
        f"{scheme.unquantized_bits}-bit ({kept / 1e9:.3g} GB)"
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
    return MemoryBreakdown(
        weights_bytes=base,
        kv_cache_bytes=workload_kv_cache_bytes(workload),
        overhead_bytes=round(base * assumptions.inference_overhead_ratio),
        notes=tuple(notes)
        + (() if weight_parts is None else (_scheme_note(workload, weight_parts),)),
        parts=() if weight_parts is None else weight_parts.parts(),
        architecture=model,
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
