"""A typical architecture for a bare parameter count, from published model shapes.

Training activations and LoRA adapters need layers and hidden size, which a parameter
count alone does not give. `derive_architecture(P)` takes the shape (layers, hidden
size, attention heads, KV heads) of the published model in `REFERENCE_SHAPES` whose
parameter count is nearest to P on a log scale, with a Llama-style block: a SwiGLU MLP of
Llama's width rule and Llama 2's 32,000-token vocabulary. The parameter count stays P;
the returned `ModelSpec.source` names the reference, so the output can say which shape
was assumed. Give a catalog model (or add one in the config) for the real architecture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwatch.sizing.models import ModelSpec


@dataclass(frozen=True, slots=True)
class ReferenceShape:
    """A published model's shape: parameters, layers, hidden size, heads, KV heads."""

    name: str
    parameters: int
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    source: str


_OPT = "OPT paper (Zhang et al. 2022) Table 1"
_LLAMA = "LLaMA paper (Touvron et al. 2023) Table 2"

REFERENCE_SHAPES: tuple[ReferenceShape, ...] = (
    ReferenceShape("OPT-125M", 125_000_000, 12, 768, 12, 12, _OPT),
    ReferenceShape("OPT-350M", 350_000_000, 24, 1024, 16, 16, _OPT),
    ReferenceShape("OPT-1.3B", 1_300_000_000, 24, 2048, 32, 32, _OPT),
    ReferenceShape("OPT-2.7B", 2_700_000_000, 32, 2560, 32, 32, _OPT),
    ReferenceShape("LLaMA-7B", 6_700_000_000, 32, 4096, 32, 32, _LLAMA),
    ReferenceShape("LLaMA-13B", 13_000_000_000, 40, 5120, 40, 40, _LLAMA),
    ReferenceShape("LLaMA-33B", 32_500_000_000, 60, 6656, 52, 52, _LLAMA),
    ReferenceShape("LLaMA-65B", 65_200_000_000, 80, 8192, 64, 64, _LLAMA),
    ReferenceShape("OPT-175B", 175_000_000_000, 96, 12288, 96, 96, _OPT),
    ReferenceShape(
        "Llama-3.1-405B", 405_000_000_000, 126, 16384, 128, 8, "Llama 3 paper (2024) Table 3"
    ),
)
"""Published shapes, smallest first; the reference for a bare count is the nearest."""


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
        source=f"assumed: that of {ref.name} ({ref.source}), nearest in parameter count",
    )
