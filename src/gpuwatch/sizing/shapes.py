"""A typical architecture for a bare parameter count, from published model shapes.

Training activations, LoRA adapters and the inference KV cache need layers, hidden size
and KV heads, which a parameter count alone does not give. `derive_architecture(P)` takes
the shape (layers, hidden size, attention heads, KV heads, and MLP width and vocabulary
where the reference gives them) of the published model in `REFERENCE_SHAPES` whose
parameter count is nearest to P on a log scale, with a Llama-style block: a SwiGLU MLP of
Llama's width rule and Llama 2's 32,000-token vocabulary where the reference has none.
The references include current grouped-query-attention models (Llama 3.x, Qwen2.5), so
a bare 8B, 14B, 32B or 70B gets the KV cache of the models served at that size now
rather than the multi-head cache of LLaMA 1. The parameter count stays P;
the returned `ModelSpec.source` names the reference, so the output can say which shape
was assumed. Give a catalog model (or add one in the config) for the real architecture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwatch.sizing.models import ModelSpec


@dataclass(frozen=True, slots=True)
class ReferenceShape:
    """A published model's shape: parameters, layers, hidden size, heads, KV heads, and
    the MLP width and vocabulary where given (None: `ModelSpec`'s defaults)."""

    name: str
    parameters: int
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    source: str
    intermediate_size: int | None = None
    vocab_size: int | None = None


_OPT = "OPT paper (Zhang et al. 2022) Table 1"
_LLAMA = "LLaMA paper (Touvron et al. 2023) Table 2"
_LLAMA31_8B = "meta-llama/Llama-3.1-8B config.json and model card (8.03B)"
_QWEN25_14B = "Qwen/Qwen2.5-14B config.json and model card (14.7B, 40 Q / 8 KV heads)"
_QWEN25_32B = "Qwen/Qwen2.5-32B config.json and model card (32.5B, 40 Q / 8 KV heads)"
_LLAMA31_70B = "meta-llama/Llama-3.1-70B config.json and model card (70.6B)"

REFERENCE_SHAPES: tuple[ReferenceShape, ...] = (
    ReferenceShape("OPT-125M", 125_000_000, 12, 768, 12, 12, _OPT),
    ReferenceShape("OPT-350M", 350_000_000, 24, 1024, 16, 16, _OPT),
    ReferenceShape("OPT-1.3B", 1_300_000_000, 24, 2048, 32, 32, _OPT),
    ReferenceShape("OPT-2.7B", 2_700_000_000, 32, 2560, 32, 32, _OPT),
    ReferenceShape("LLaMA-7B", 6_700_000_000, 32, 4096, 32, 32, _LLAMA),
    ReferenceShape("Llama-3.1-8B", 8_030_261_248, 32, 4096, 32, 8, _LLAMA31_8B, 14336, 128256),
    ReferenceShape("LLaMA-13B", 13_000_000_000, 40, 5120, 40, 40, _LLAMA),
    ReferenceShape("Qwen2.5-14B", 14_700_000_000, 48, 5120, 40, 8, _QWEN25_14B, 13824, 152064),
    ReferenceShape("Qwen2.5-32B", 32_500_000_000, 64, 5120, 40, 8, _QWEN25_32B, 27648, 152064),
    ReferenceShape("LLaMA-33B", 32_500_000_000, 60, 6656, 52, 52, _LLAMA),
    ReferenceShape("LLaMA-65B", 65_200_000_000, 80, 8192, 64, 64, _LLAMA),
    ReferenceShape("Llama-3.1-70B", 70_553_706_496, 80, 8192, 64, 8, _LLAMA31_70B, 28672, 128256),
    ReferenceShape("OPT-175B", 175_000_000_000, 96, 12288, 96, 96, _OPT),
    ReferenceShape(
        "Llama-3.1-405B", 405_000_000_000, 126, 16384, 128, 8, "Llama 3 paper (2024) Table 3"
    ),
)
"""Published shapes, smallest first; the reference for a bare count is the nearest (the
first listed on a tie: Qwen2.5-32B before LLaMA-33B, both 32.5B)."""


def nearest_shape(parameters: int) -> ReferenceShape:
    """The reference whose parameter count is nearest to `parameters` (log scale)."""
    if parameters <= 0:
        raise ValueError("the parameter count must be positive")
    target = math.log(parameters)
    return min(REFERENCE_SHAPES, key=lambda ref: abs(math.log(ref.parameters) - target))


def derive_architecture(parameters: int) -> ModelSpec:
    """A `ModelSpec` of `parameters` with the nearest reference's shape (Llama-style block)."""
    ref = nearest_shape(parameters)
    return ModelSpec(
        name=f"shape of {ref.name}",
        parameters=parameters,
        layers=ref.layers,
        hidden_size=ref.hidden_size,
        attention_heads=ref.attention_heads,
        kv_heads=ref.kv_heads,
        head_dim=ref.hidden_size // ref.attention_heads,
        intermediate_size=ref.intermediate_size,
        vocab_size=ref.vocab_size,
        source=f"assumed: that of {ref.name} ({ref.source}), nearest in parameter count",
    )
