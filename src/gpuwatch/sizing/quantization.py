"""Quantized checkpoints: how many bytes a model's weights take, component by component.

A `QuantizationScheme` says how a checkpoint stores its weights: the bits per quantized
value, the block (group) each scale covers, the bits of that scale and of a zero point,
which weights it covers (every linear layer, or only the routed experts), and what stays
16-bit. Checkpoints keep the input embedding and the LM head 16-bit (AWQ, GPTQ, FP8,
bitsandbytes and gpt-oss's MXFP4 all do: they are not ``nn.Linear`` or are listed in
``modules_to_not_convert``/``ignore``), and norms are never quantized.

`weight_bytes_by_component(model, scheme)` splits a `ModelSpec`'s parameters into
embeddings, LM head, norms, routed experts and the other linear weights
(``parameters - embeddings - head - norms - experts``; router weights and biases ride with
the latter) and prices each in bytes. Bits per quantized weight:

- AWQ INT4 (group 128): 4 + (16-bit scale + 4-bit packed zero) / 128 = 4.156.
- GPTQ INT4 (group 128): the same 4.156, plus a 32-bit ``g_idx`` per input channel.
- FP8 W8A8 (e4m3): 8 + one fp32 scale per output channel (or per tensor: ~0).
- INT8 W8A8 (per channel): 8 + one fp32 scale per output channel.
- MXFP4 (OCP microscaling): 4 + one 8-bit E8M0 scale per 32 values = 4.25.
- NVFP4: 4 + one FP8 (E4M3) scale per 16 values = 4.5, plus one fp32 scale per tensor.
- bitsandbytes NF4 (block 64, double quantization): 4 + 8/64 + 32/(64 x 256) = 4.127.
- bitsandbytes int8 (LLM.int8()): 8 + one fp32 scale per row.

Per-row and per-column counts take the hidden size as each matrix's width (rows =
weights / hidden): exact for the attention and up/gate projections, and these lines are
0.05 % of the total or less, so the approximation does not move a figure.
`quantization_config.scheme_from_quantization_config` reads a Hugging Face
``quantization_config``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from gpuwatch.sizing.checkpoint_layout import linear_modules, skipped_flags
from gpuwatch.sizing.models import ModelSpec

Covers = Literal["linear", "experts", "experts-if-moe"]
"""Which weights a scheme quantizes: every linear layer but the head, routed experts only,
or routed experts on a mixture of experts and every linear layer on a dense model
(`QuantizationScheme.for_model` resolves the last to one of the first two)."""

ComputeFormat = Literal["bf16", "fp8", "fp4", "fp4-fp8"]
"""The math a scheme runs in (`throughput.math_peak_flops_per_second` picks the peak):

- "bf16": weight-only formats, dequantized in the kernel to 16-bit math (AWQ, GPTQ,
  bitsandbytes, INT8 here, since the GPU catalog lists no INT8 peak).
- "fp8": W8A8 FP8, the FP8 peak where the GPU has one, else bf16.
- "fp4": W4A4 (NVFP4 from ModelOpt or llm-compressor quantizes activations to NVFP4 too):
  the FP4 peak on a GPU with FP4 tensor cores (Blackwell, `fp4_tflops` set; CUTLASS's
  ``kind::mxf4nvf4`` MMA), else bf16 (vLLM runs NVFP4 weight-only through its FP4 Marlin
  kernel on GPUs without them).
- "fp4-fp8": FP4 weights with FP8 activations (gpt-oss's MXFP4 experts in vLLM on
  Blackwell: FlashInfer's MoE runs "MXFP8 activations and packed MXFP4 weights"), the FP8
  peak on a GPU with FP4 tensor cores (CUTLASS: ``kind::mxf8f6f4`` runs at the FP8 rate);
  else bf16 (Hopper: Triton's ``matmul_ogs`` unpacks the FP4 weights to 16-bit math).
"""

SIXTEEN_BITS = 16


class QuantizationConfigError(ValueError):
    """A ``quantization_config`` gpuwatch cannot size; the message names the field."""


@dataclass(frozen=True, slots=True)
class QuantizationScheme:
    """How a checkpoint stores its weights.

    `bits`: bits per quantized value. `group_size`: values sharing one scale (None: one
    scale per output channel, `per_tensor` True: one per tensor). `scale_bits` and
    `zero_bits`: bits of each group's scale and zero point. `second_level_bits`: bits per
    group of constants that scale the scales (bitsandbytes' double quantization).
    `column_bits`: bits per input channel (GPTQ's ``g_idx``). `tensor_scale_bits`: bits
    per tensor (NVFP4's fp32 global scale; counted per layer matrix, negligible).
    `covers`: "linear" (every linear layer except the LM head), "experts" (routed
    experts only; gpt-oss's MXFP4) or "experts-if-moe" (the one or the other by the
    model: what MXFP4 and NVFP4 by name mean, `for_model`). `unquantized_bits`: storage
    of everything else (16: bf16/fp16). `compute`: the format of the matrix math
    (`ComputeFormat`). `modules_to_not_convert`: the checkpoint's skip list, applied
    module by module (`checkpoint_layout`): a named module stays `unquantized_bits`.
    `kv_cache`: the KV cache precision the checkpoint declares ("fp8": ModelOpt's
    ``kv_cache_quant_algo`` FP8, compressed-tensors' 8-bit float ``kv_cache_scheme``;
    None: the compute precision). `description`: one line for notes.
    """

    name: str
    method: str
    bits: int
    group_size: int | None
    scale_bits: int
    description: str
    zero_bits: int = 0
    per_tensor: bool = False
    second_level_bits: float = 0.0
    column_bits: int = 0
    tensor_scale_bits: int = 0
    covers: Covers = "linear"
    unquantized_bits: int = SIXTEEN_BITS
    compute: ComputeFormat = "bf16"
    modules_to_not_convert: tuple[str, ...] = ()
    kv_cache: str | None = None

    def __post_init__(self) -> None:
        if self.bits not in (2, 3, 4, 8):
            raise QuantizationConfigError(f"bits must be 2, 3, 4 or 8, not {self.bits}")
        if self.group_size is not None and self.group_size <= 0:
            raise QuantizationConfigError(f"group_size must be positive, not {self.group_size}")
        if min(self.scale_bits, self.zero_bits, self.column_bits, self.tensor_scale_bits) < 0:
            raise QuantizationConfigError("scale, zero, column and tensor bits must be >= 0")

    def for_model(self, model: ModelSpec) -> QuantizationScheme:
        """This scheme as laid out on `model`: "experts-if-moe" becomes "experts" on a
        mixture of experts and "linear" on a dense model; any other `covers` stays."""
        if self.covers != "experts-if-moe":
            return self
        return replace(self, covers="experts" if model.is_moe else "linear")

    @property
    def bits_per_weight(self) -> float:
        """Bits per quantized weight, group constants included (per-row scales excluded)."""
        if self.group_size is None:
            return float(self.bits)
        return self.bits + (self.scale_bits + self.zero_bits + self.second_level_bits) / (
            self.group_size
        )

    def quantized_bytes(self, weights: int, width: int) -> int:
        """Bytes of `weights` quantized weights in matrices `width` inputs wide.

        Groups run along the input dimension; per-channel scales and ``g_idx`` take
        rows = columns = weights / width.
        """
        if weights <= 0:
            return 0
        bits = weights * self.bits_per_weight
        rows = weights / width
        if self.group_size is None and not self.per_tensor:
            bits += rows * self.scale_bits
        bits += rows * self.column_bits
        return round(bits / 8)


@dataclass(frozen=True, slots=True)
class WeightBytes:
    """A model's weight bytes by component; `total` is their sum.

    `embeddings` the input embedding, `lm_head` an untied output head (0 when tied),
    `norms` the norm weights, `experts` all routed experts (0 for a dense model), `linear`
    every other weight (attention, dense and shared-expert MLPs, routers, biases).
    """

    embeddings: int
    lm_head: int
    norms: int
    linear: int
    experts: int
    vision: int = 0

    @property
    def total(self) -> int:
        """All weight bytes."""
        return (
            self.embeddings + self.lm_head + self.norms + self.linear + self.experts + self.vision
        )

    def parts(self) -> tuple[tuple[str, int], ...]:
        """(name, bytes) for a breakdown's `parts` (the vision tower's only if any)."""
        vision = (("weights_vision_bytes", self.vision),) if self.vision else ()
        return (
            ("weights_embeddings_bytes", self.embeddings),
            ("weights_lm_head_bytes", self.lm_head),
            ("weights_norms_bytes", self.norms),
            ("weights_linear_bytes", self.linear),
            ("weights_experts_bytes", self.experts),
            *vision,
        )


@dataclass(frozen=True, slots=True)
class ParameterSplit:
    """A model's parameters by component (counts, not bytes)."""

    embeddings: int
    lm_head: int
    norms: int
    linear: int
    experts: int
    vision: int = 0


def parameter_split(model: ModelSpec) -> ParameterSplit:
    """`model.parameters` split into embeddings, head, norms, routed experts, a vision
    tower (kept 16-bit: an assumption; quantized with the rest it would be at most half
    as many bytes)
    and the rest.

    The rest (linear) is ``parameters - embeddings - head - norms - experts``, floored at 0
    (a catalog count smaller than its own embeddings would be a bad entry, not weights).
    """
    embed = model.vocabulary * model.hidden_size
    head = 0 if model.tied_embeddings else embed
    norms = model.norm_parameters
    experts = model.expert_parameters
    vision = model.vision_parameters
    linear = max(model.parameters - embed - head - norms - experts - vision, 0)
    return ParameterSplit(embed, head, norms, linear, experts, vision)


def weight_bytes_by_component(model: ModelSpec, scheme: QuantizationScheme | None) -> WeightBytes:
    """Bytes of `model`'s weights stored by `scheme` (None: all 16-bit), by component.

    The scheme is laid out on the model first (`QuantizationScheme.for_model`)."""
    if scheme is not None:
        scheme = scheme.for_model(model)
    split = parameter_split(model)
    sixteen = (scheme.unquantized_bits if scheme else SIXTEEN_BITS) / 8
    width = model.hidden_size

    def stored(count: int, quantized: bool) -> int:
        if scheme is None or not quantized:
            return round(count * sixteen)
        return scheme.quantized_bytes(count, width)

    linear_quantized = scheme is not None and scheme.covers == "linear"
    if scheme is not None and scheme.modules_to_not_convert:
        linear, experts = _bytes_with_skip_list(model, scheme, split.linear)
    else:
        linear = stored(split.linear, linear_quantized)
        experts = stored(split.experts, scheme is not None)
    return WeightBytes(
        embeddings=round(split.embeddings * sixteen),
        lm_head=round(split.lm_head * sixteen),
        norms=round(split.norms * sixteen),
        linear=linear,
        experts=experts,
        vision=round(split.vision * sixteen),
    )


def _bytes_with_skip_list(
    model: ModelSpec, scheme: QuantizationScheme, linear_parameters: int
) -> tuple[int, int]:
    """(linear, experts) bytes with the checkpoint's skip list applied module by module:
    a module the scheme covers takes it unless a skip-list entry names it; a skipped or
    uncovered one stays `unquantized_bits` (`checkpoint_layout` matches the names)."""
    sixteen = scheme.unquantized_bits / 8
    quantized = {True: 0, False: 0}
    kept = {True: 0, False: 0}
    flags = skipped_flags(model, linear_parameters, scheme.modules_to_not_convert)
    for module, skip in zip(linear_modules(model, linear_parameters), flags, strict=True):
        covered = module.expert or scheme.covers == "linear"
        if covered and not skip:
            quantized[module.expert] += module.parameters
        else:
            kept[module.expert] += module.parameters
    width = model.hidden_size
    linear = scheme.quantized_bytes(quantized[False], width) + round(kept[False] * sixteen)
    experts = scheme.quantized_bytes(quantized[True], width) + round(kept[True] * sixteen)
    return linear, experts


def kept_parameters(model: ModelSpec, scheme: QuantizationScheme) -> int:
    """Parameters `scheme` leaves at `unquantized_bits` on `model`: embeddings, head,
    norms, and the linear modules it does not cover or its skip list names."""
    scheme = scheme.for_model(model)
    split = parameter_split(model)
    kept = split.embeddings + split.lm_head + split.norms
    if not scheme.modules_to_not_convert:
        return kept + (split.linear if scheme.covers != "linear" else 0)
    flags = skipped_flags(model, split.linear, scheme.modules_to_not_convert)
    for module, skip in zip(linear_modules(model, split.linear), flags, strict=True):
        covered = module.expert or scheme.covers == "linear"
        if not covered or skip:
            kept += module.parameters
    return kept


AWQ_INT4 = QuantizationScheme(
    name="awq-int4",
    method="awq",
    bits=4,
    group_size=128,
    scale_bits=16,
    zero_bits=4,
    description="AWQ INT4 (GEMM): 4-bit weights, a 16-bit scale and a 4-bit zero per 128",
)
GPTQ_INT4 = QuantizationScheme(
    name="gptq-int4",
    method="gptq",
    bits=4,
    group_size=128,
    scale_bits=16,
    zero_bits=4,
    column_bits=32,
    description=(
        "GPTQ INT4: 4-bit weights, a 16-bit scale and a 4-bit zero per 128, a 32-bit g_idx "
        "per input channel"
    ),
)
FP8 = QuantizationScheme(
    name="fp8",
    method="fp8",
    bits=8,
    group_size=None,
    scale_bits=32,
    compute="fp8",
    description="FP8 W8A8 (e4m3): 8-bit weights, one fp32 scale per output channel",
)
INT8 = QuantizationScheme(
    name="int8",
    method="int8",
    bits=8,
    group_size=None,
    scale_bits=32,
    description="INT8 W8A8: 8-bit weights, one fp32 scale per output channel",
)
MXFP4 = QuantizationScheme(
    name="mxfp4",
    method="mxfp4",
    bits=4,
    group_size=32,
    scale_bits=8,
    compute="fp4-fp8",
    covers="experts-if-moe",
    description="MXFP4: 4-bit E2M1 values, one 8-bit E8M0 scale per 32 (4.25 bits)",
)
"""MXFP4 by name. On a mixture of experts it covers the routed experts only, as the
published MXFP4 MoE checkpoints do: openai/gpt-oss-20b and -120b (config.json
``modules_to_not_convert``: self_attn, router, embed_tokens, lm_head; model card
arXiv:2508.10925: "quantization of the MoE weights to MXFP4"); DeepSeek-V4-Flash too
(MXFP4 experts, vLLM's DeepseekV4FP8Config). On a dense model, every linear layer. A
checkpoint that quantizes attention too (amd/DeepSeek-R1-MXFP4, made with AMD Quark,
excludes lm_head only) is not what the name means."""
NVFP4 = QuantizationScheme(
    name="nvfp4",
    method="nvfp4",
    bits=4,
    group_size=16,
    scale_bits=8,
    tensor_scale_bits=32,
    compute="fp4",
    covers="experts-if-moe",
    description="NVFP4: 4-bit E2M1 values, one FP8 E4M3 scale per 16 (4.5 bits), fp32 per tensor",
)
"""NVFP4 by name. On a mixture of experts it covers the routed experts, as NVIDIA's
ModelOpt NVFP4 MoE checkpoints leave attention 16-bit (nvidia/DeepSeek-R1-0528-NVFP4
and nvidia/GLM-4.7-NVFP4 hf_quant_config.json ``exclude_modules``: lm_head and every
layer's ``self_attn*``); their shared experts and dense MLPs, NVFP4 there, count 16-bit
here (DeepSeek-V3: 3.7B of 671B parameters). On a dense model, every linear layer
(nvidia/Llama-3.1-405B-Instruct-FP4: "only the weights and activations of the linear
operators within transformers blocks are quantized")."""
NF4 = QuantizationScheme(
    name="nf4",
    method="bitsandbytes",
    bits=4,
    group_size=64,
    scale_bits=8,
    second_level_bits=32 / 256,
    description=(
        "bitsandbytes NF4 with double quantization: 4-bit, an 8-bit absmax per 64, an fp32 "
        "constant per 256 absmax (4.127 bits)"
    ),
)
BNB_INT8 = QuantizationScheme(
    name="bnb-int8",
    method="bitsandbytes",
    bits=8,
    group_size=None,
    scale_bits=32,
    description="bitsandbytes LLM.int8(): 8-bit weights, one fp32 scale per row",
)

SCHEMES: dict[str, QuantizationScheme] = {
    scheme.name: scheme for scheme in (AWQ_INT4, GPTQ_INT4, FP8, INT8, MXFP4, NVFP4, NF4, BNB_INT8)
}
"""The named schemes `gpuwatch size --precision` accepts, by name."""

PRECISION_SCHEMES: dict[str, QuantizationScheme] = {"int4": AWQ_INT4, "int8": INT8, "fp8": FP8}
"""The scheme a plain int4/int8/fp8 precision means for a model with an architecture."""
