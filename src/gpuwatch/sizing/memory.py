"""The memory model: how many bytes of GPU memory a workload needs, by component.

`memory_requirement(Workload(...))` returns a `MemoryBreakdown` in bytes. The accounting
is seed 001's: inference holds the weights, the KV cache and an overhead; full training
with mixed-precision AdamW holds 18 B/param (16-bit weights 2 + fp32 master copy 4 +
fp32 gradients 4 + Adam m 4 + v 4) plus activations; LoRA and QLoRA freeze the base
weights and train a small adapter with the same 18 B per adapter parameter. The
rule-of-thumb figures (overhead, activations, adapter size) are `MemoryAssumptions`,
whose defaults are seed 001's; docs/sizing.md explains each choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gpuwatch.sizing.models import ModelSpec


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


@dataclass(frozen=True, slots=True)
class MemoryAssumptions:
    """The rule-of-thumb inputs of the memory model; the defaults are seed 001's.

    - `inference_overhead_ratio`: activations, CUDA context and framework buffers during
      inference, as a fraction of weight bytes. Seed 001's estimator adds 0.2 x weights,
      seed 003 says inference needs ~1.2 x model size, seed 000 says 20-40 %: 0.2.
      For a bare parameter count it also stands in for a short context's KV cache.
    - `activation_multiplier`: saved activations in training, as a multiple of the
      weights' bytes at the compute precision (16-bit unless training in fp32); seed
      001 uses 2.0. It ignores context and batch, as the seed does.
    - `adapter_fraction`: LoRA/QLoRA trainable parameters as a fraction of the base
      model's; seed 001 uses 0.01.
    - `training_overhead_ratio`: extra bytes in training as a fraction of weight bytes;
      seed 001 counts none (0.0). Fit headroom covers the CUDA context instead.
    """

    inference_overhead_ratio: float = 0.2
    activation_multiplier: float = 2.0
    adapter_fraction: float = 0.01
    training_overhead_ratio: float = 0.0

    def __post_init__(self) -> None:
        for name in (
            "inference_overhead_ratio",
            "activation_multiplier",
            "training_overhead_ratio",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if not 0 < self.adapter_fraction <= 1:
            raise ValueError("adapter_fraction must be in (0, 1]")


SEED_001 = MemoryAssumptions()
"""Seed 001's assumptions (the defaults), named for the tests that reproduce it."""

DEFAULT_ASSUMPTIONS = SEED_001


@dataclass(frozen=True, slots=True)
class Workload:
    """A model and what is done with it.

    `model` is a `ModelSpec` (the KV cache is then computed from its architecture) or a
    bare parameter count (no KV cache line: the inference overhead stands in for a
    short context). `precision` is the weights' storage precision; None takes the
    mode's default (`DEFAULT_PRECISION`). `kv_cache_precision` None means the compute
    precision: the weights' if they are 16 or 32-bit, else 16-bit.
    `context_tokens` and `batch` size the KV cache (inference only).
    """

    model: ModelSpec | int
    mode: Mode = Mode.INFERENCE
    precision: Precision | None = None
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    batch: int = DEFAULT_BATCH
    kv_cache_precision: Precision | None = None

    def __post_init__(self) -> None:
        if self.parameters <= 0:
            raise ValueError("the parameter count must be positive")
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

    @property
    def parameters(self) -> int:
        """The model's parameter count."""
        return self.model.parameters if isinstance(self.model, ModelSpec) else self.model

    @property
    def architecture(self) -> ModelSpec | None:
        """The model's architecture, None for a bare parameter count."""
        return self.model if isinstance(self.model, ModelSpec) else None

    @property
    def weight_precision(self) -> Precision:
        """`precision`, or the mode's default."""
        return self.precision or DEFAULT_PRECISION[self.mode]

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


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Bytes of GPU memory by component; `total_bytes` is their sum.

    `notes` say what the figures leave out or estimate.
    """

    weights_bytes: int
    kv_cache_bytes: int = 0
    gradients_bytes: int = 0
    optimizer_bytes: int = 0
    activations_bytes: int = 0
    overhead_bytes: int = 0
    notes: tuple[str, ...] = ()
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


def kv_cache_bytes(
    model: ModelSpec, context_tokens: int, batch: int, bytes_per_value: float = 2.0
) -> int:
    """KV cache bytes: 2 x layers x kv_heads x head_dim x bytes x context x batch.

    Grouped-query attention is counted through `model.kv_heads`.
    """
    return round(model.kv_cache_bytes_per_token(bytes_per_value) * context_tokens * batch)


def workload_kv_cache_bytes(workload: Workload) -> int:
    """The KV cache of an inference workload at its full context; 0 without architecture."""
    model = workload.architecture
    if model is None or workload.mode is not Mode.INFERENCE:
        return 0
    return kv_cache_bytes(
        model, workload.context_tokens, workload.batch, workload.kv_cache_bytes_per_value
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


def memory_requirement(
    workload: Workload, assumptions: MemoryAssumptions = DEFAULT_ASSUMPTIONS
) -> MemoryBreakdown:
    """GPU memory the workload needs on one GPU, by component, in bytes."""
    params = workload.parameters
    base = weight_bytes(params, workload.weight_precision)
    if workload.mode is Mode.INFERENCE:
        notes: tuple[str, ...] = ()
        if workload.architecture is None:
            notes = (
                "KV cache not computed: a bare parameter count has no layers, KV heads or "
                "head dim; the overhead stands in for a short context (seed 001)",
            )
        return MemoryBreakdown(
            weights_bytes=base,
            kv_cache_bytes=workload_kv_cache_bytes(workload),
            overhead_bytes=round(base * assumptions.inference_overhead_ratio),
            notes=notes,
        )
    compute = workload.compute_bytes
    activations = round(assumptions.activation_multiplier * params * compute)
    activation_note = (
        f"activations: {assumptions.activation_multiplier:g} x the weights at "
        f"{compute * 8:.0f}-bit, whatever the context and batch (seed 001's rule of thumb)"
    )
    if workload.mode is Mode.TRAIN:
        weights, gradients, optimizer = _adamw_bytes(params, compute)
        notes = (activation_note,)
    else:
        adapter = round(params * assumptions.adapter_fraction)
        adapter_weights, gradients, optimizer = _adamw_bytes(adapter, compute)
        weights = base + adapter_weights
        notes = (
            f"adapter: {assumptions.adapter_fraction * 100:g} % of the parameters, trained with "
            "AdamW; the base weights are frozen",
            activation_note,
        )
    return MemoryBreakdown(
        weights_bytes=weights,
        gradients_bytes=gradients,
        optimizer_bytes=optimizer,
        activations_bytes=activations,
        overhead_bytes=round(weights * assumptions.training_overhead_ratio),
        notes=notes,
    )
