"""What is sized: a workload (a model, a precision, a mode, a context and a batch), how a
training job is run (`TrainingSetup`) and the estimating rules (`MemoryAssumptions`).

The inputs of the memory model (`memory.memory_requirement`) and of the throughput
(`throughput.tokens_per_second`); no arithmetic of bytes beyond a precision's width and
the scheme a precision stands for. (`gpuwatch.workloads` is another thing: the agent
config's declarations of what runs on a GPU, which it turns into a `Workload`.)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from gpuwatch.sizing.activations import (
    KORTHIKANTI_FACTOR,
)
from gpuwatch.sizing.adapters import (
    DEFAULT_LORA_RANK,
    LORA_MODULES,
    adapter_parameters,
)
from gpuwatch.sizing.engine import DEFAULT_ENGINE_SETTINGS, EngineSettings
from gpuwatch.sizing.models import ModelSpec
from gpuwatch.sizing.quantization import (
    PRECISION_SCHEMES,
    SCHEMES,
    QuantizationScheme,
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

ADAPTER_PRECISIONS = frozenset({Precision.FP32, Precision.BF16, Precision.FP16})

ActivationRule = Literal["architecture", "seed-001"]
EngineRule = Literal["vllm", "none"]

PrecisionOrigin = Literal["precision", "published", "default"]
"""Why a workload's weights have their precision: given (``--precision``, a workload's
``precision``), as the checkpoint is published (a catalog model's
`ModelSpec.published_precision`, a config.json's ``quantization_config`` or
``hf_quant_config.json``), or the mode's default."""


@dataclass(frozen=True, slots=True)
class MemoryAssumptions:
    """The estimating rules of the memory model.

    - `engine`: "vllm" adds the serving engine's memory as vLLM profiles it (`engine`
      module: activation peak of `engine_settings`' batched tokens and sequences, CUDA
      context, non-torch allocations, CUDA graphs), which does not grow with the
      weights; "none" adds nothing (weights + KV cache, plus the ratio below).
    - `inference_overhead_ratio`: extra inference memory as a fraction of weight bytes,
      on top of the engine's: 0. Seed 001's estimator added 0.2 x weights (`engine`
      "none" with 0.2 reproduces it), which said a 70B model needs 28 GB beyond its
      weights where vLLM's profile finds a few.
    - `training_overhead_ratio`: extra bytes in training as a fraction of weight bytes;
      seed 001 counts none (0.0). Fit headroom covers the CUDA context instead.
    - `activations`: "architecture" counts training activations from layers, hidden
      size, context and batch (`activations.activation_parts`, factor
      `activation_factor`); "seed-001" is seed 001's rule of thumb, `activation_multiplier`
      x the weights at the compute precision whatever the context, batch or checkpointing
      (it reproduces the seed's 143.4 GiB 7B example).
    """

    inference_overhead_ratio: float = 0.0
    training_overhead_ratio: float = 0.0
    activations: ActivationRule = "architecture"
    activation_factor: float = KORTHIKANTI_FACTOR
    activation_multiplier: float = 2.0
    engine: EngineRule = "vllm"
    engine_settings: EngineSettings = DEFAULT_ENGINE_SETTINGS

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
        if self.engine not in ("vllm", "none"):
            raise ValueError(f"engine must be vllm or none, not {self.engine}")


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
    per GPU). `training` says how a training job runs. `quantization` is a checkpoint
    layout: a named one (``--precision awq-int4``) or, with `quantization_published`, the
    checkpoint's own declaration (a config.json's ``quantization_config``). With neither
    `precision` nor `quantization`, inference of a model whose checkpoint is published
    quantized (`ModelSpec.published_precision`) sizes it as published.
    """

    model: ModelSpec | int
    mode: Mode = Mode.INFERENCE
    precision: Precision | None = None
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    batch: int = DEFAULT_BATCH
    kv_cache_precision: Precision | None = None
    training: TrainingSetup = DEFAULT_TRAINING
    quantization: QuantizationScheme | None = None
    quantization_published: bool = False

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
    def published(self) -> str | None:
        """The published precision this workload is sized at (`ModelSpec.published_precision`)
        when nothing else says one: inference, no `precision`, no `quantization`."""
        model = self.architecture
        if (
            model is None
            or model.published_precision is None
            or self.mode is not Mode.INFERENCE
            or self.precision is not None
            or self.quantization is not None
        ):
            return None
        return model.published_precision

    @property
    def precision_origin(self) -> PrecisionOrigin:
        """Why the weights have their precision (`PrecisionOrigin`)."""
        if self.precision is not None:
            return "precision"
        if self.quantization is not None:
            return "published" if self.quantization_published else "precision"
        return "published" if self.published is not None else "default"

    @property
    def weight_precision(self) -> Precision:
        """`precision`, else the `quantization` scheme's storage, else the published
        checkpoint's (`published`), else the mode's default."""
        if self.precision is not None:
            return self.precision
        if self.quantization is not None:
            return scheme_precision(self.quantization)
        published = self.published
        if published is not None:
            if published in SCHEMES and published not in PRECISION_SCHEMES:
                return scheme_precision(SCHEMES[published])
            return Precision(published)
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
        published = self.published
        if published in SCHEMES and published not in PRECISION_SCHEMES:
            return SCHEMES[published].for_model(model)
        scheme = PRECISION_SCHEMES.get(self.weight_precision.value)
        return None if scheme is None else scheme.for_model(model)

    @property
    def compute_bytes(self) -> float:
        """Bytes per value of activations and (by default) the KV cache: 16-bit at least."""
        return max(self.weight_precision.bytes_per_value, 2.0)

    @property
    def kv_cache_bytes_per_value(self) -> float:
        """Bytes per cached K or V value: `kv_cache_precision`, else the FP8 cache the
        checkpoint declares (`QuantizationScheme.kv_cache`), else `compute_bytes`."""
        if self.kv_cache_precision is not None:
            return self.kv_cache_precision.bytes_per_value
        if self.quantization is not None and self.quantization.kv_cache == "fp8":
            return Precision.FP8.bytes_per_value
        return self.compute_bytes

    @property
    def gradient_checkpointing(self) -> bool:
        """Whether this (training) workload checkpoints activations."""
        return self.training.checkpointing(self.mode)


def scheme_precision(scheme: QuantizationScheme) -> Precision:
    """The `Precision` bucket a scheme's quantized values fall in: INT4 for 4-bit and
    below, FP8 for 8-bit FP8 math, else INT8."""
    if scheme.bits <= 4:
        return Precision.INT4
    return Precision.FP8 if scheme.compute == "fp8" else Precision.INT8
