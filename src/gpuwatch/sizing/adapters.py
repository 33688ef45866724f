"""LoRA adapters and QLoRA's quantized base, counted from the architecture.

LoRA (Hu et al. 2021) adds to a frozen projection W (in x out) two trainable matrices,
A (in x r) and B (r x out): r x (in + out) parameters per adapted projection per layer.
The projections of a Llama block are q, k, v, o (attention; k and v are kv_heads x
head_dim wide under grouped-query attention) and gate, up, down (a SwiGLU MLP; a plain
GPT MLP has up and down only). The default targets every linear projection, as the
QLoRA paper found necessary to match full fine-tuning and as PEFT's ``all-linear`` does.

QLoRA (Dettmers et al. 2023) stores the frozen linear weights in 4-bit NormalFloat (NF4)
in blocks of 64, each with an fp32 absmax constant: 32/64 = 0.5 bit per parameter. Double
quantization stores those constants in 8 bits with one fp32 constant per 256 blocks:
8/64 + 32/(64 x 256) = 0.127 bit per parameter. Embeddings, the LM head and norms are
not quantized (bitsandbytes replaces linear layers only) and stay 16-bit.
"""

from __future__ import annotations

from gpuwatch.sizing.models import ModelSpec
from gpuwatch.sizing.moe import MLP_MODULES, mlp_adapter_parameters

LORA_MODULES = ("q", "k", "v", "o", "gate", "up", "down")
"""The linear projections of a Llama block, in PEFT's order (q_proj ... down_proj)."""

DEFAULT_LORA_RANK = 16
"""A common LoRA rank (axolotl and Hugging Face examples use 8-64; the QLoRA paper 64)."""

NF4_BITS = 4
QUANT_BLOCK_SIZE = 64
"""Parameters per NF4 block (bitsandbytes' and the QLoRA paper's default)."""
DOUBLE_QUANT_BLOCK_SIZE = 256
"""First-level constants per second-level block under double quantization."""
FP32_BITS = 32
FP8_BITS = 8


def quantization_constant_bits(*, double_quantization: bool) -> float:
    """Bits of quantization constants per NF4 parameter: 0.5, or 0.127 with double."""
    if not double_quantization:
        return FP32_BITS / QUANT_BLOCK_SIZE
    return FP8_BITS / QUANT_BLOCK_SIZE + FP32_BITS / (QUANT_BLOCK_SIZE * DOUBLE_QUANT_BLOCK_SIZE)


def projection_shape(model: ModelSpec, module: str) -> tuple[int, int] | None:
    """(in, out) features of one projection of a layer; None where the block lacks it."""
    h = model.hidden_size
    q_width = model.attention_heads * model.head_dim
    kv_width = model.kv_heads * model.head_dim
    shapes: dict[str, tuple[int, int] | None] = {
        "q": (h, q_width),
        "k": (h, kv_width),
        "v": (h, kv_width),
        "o": (q_width, h),
        "gate": (h, model.mlp_size) if model.gated_mlp else None,
        "up": (h, model.mlp_size),
        "down": (model.mlp_size, h),
    }
    if module not in shapes:
        raise ValueError(f"unknown LoRA target {module!r}; known: {', '.join(LORA_MODULES)}")
    return shapes[module]


def adapter_parameters(model: ModelSpec, rank: int, targets: tuple[str, ...]) -> int:
    """Trainable LoRA parameters: layers x sum over targets of rank x (in + out).

    In a mixture of experts an MLP target (gate, up, down) is adapted in every expert,
    routed and shared, at the expert's shape (`moe.mlp_adapter_parameters`).
    """
    if rank <= 0:
        raise ValueError(f"LoRA rank must be positive, got {rank}")
    per_layer = 0
    moe_mlp = 0
    for module in targets:
        if model.is_moe and module in MLP_MODULES:
            moe_mlp += mlp_adapter_parameters(model, rank, module)
            continue
        shape = projection_shape(model, module)
        if shape is not None:
            per_layer += rank * (shape[0] + shape[1])
    return model.layers * per_layer + moe_mlp


def unquantized_parameters(model: ModelSpec) -> int:
    """Parameters bitsandbytes leaves in 16-bit: embeddings, an untied head, norms.

    At most the model's parameter count (a derived shape may claim more).
    """
    return min(model.parameters, model.embedding_parameters + model.norm_parameters)
