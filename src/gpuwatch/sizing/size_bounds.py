"""Bounds on a model's sizes, so an absurd or hostile config is refused by name, and
validation errors as one line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pydantic import ValidationError


@dataclass(frozen=True, slots=True)
class SizeBound:
    """The largest value a size field may take, and the largest published one behind it."""

    maximum: int
    largest_published: str


SIZE_BOUNDS: Mapping[str, SizeBound] = MappingProxyType(
    {
        "parameters": SizeBound(10**13, "1.6T, Switch-C (Fedus et al. 2021); Kimi-K2 1.04T"),
        "layers": SizeBound(1024, "126, Llama-3.1-405B (config.json num_hidden_layers)"),
        "hidden_size": SizeBound(2**17, "20,480, MT-NLG 530B (Smith et al. 2022)"),
        "attention_heads": SizeBound(2048, "128, Llama-3.1-405B, DeepSeek-V3, MT-NLG"),
        "kv_heads": SizeBound(2048, "128, DeepSeek-V3 (as many as its heads)"),
        "head_dim": SizeBound(4096, "256, Gemma 2 and 3"),
        "intermediate_size": SizeBound(2**20, "73,728, PaLM 540B (Chowdhery et al. 2022)"),
        "moe_intermediate_size": SizeBound(2**20, "73,728, PaLM 540B's dense MLP"),
        "vocab_size": SizeBound(2**22, "262,208, Gemma 3"),
        "experts": SizeBound(16384, "2,048, Switch-C (Fedus et al. 2021)"),
        "shared_experts": SizeBound(256, "2, DeepSeek-V2"),
        "sliding_window": SizeBound(2**27, "131,072, Qwen2.5's; Llama 4 Scout's context: 10M"),
        "kv_lora_rank": SizeBound(2**17, "512, DeepSeek-V3"),
        "qk_rope_head_dim": SizeBound(4096, "64, DeepSeek-V3"),
    }
)
"""Upper bounds on `ModelCatalogEntry`'s sizes: 6 to 100 times the largest published
model's (named beside each), so that no real model is refused and a typo or a hostile
config (``hidden_size`` 1e30, ``num_hidden_layers`` 1e18) is refused by name rather
than sized into a 1e59-parameter answer."""


def size_bound_error(field: str, value: object, *, key: str | None = None) -> str | None:
    """Why `value` is too large for `field` (named `key` where it was read), else None."""
    bound = SIZE_BOUNDS[field]
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= bound.maximum:
        return None
    named = field if key is None or key == field else f"{key} ({field})"
    return (
        f"{named} {value:,} is above {bound.maximum:,}, the most gpuwatch accepts "
        f"(largest published: {bound.largest_published})"
    )


def check_size_bounds(sizes: Mapping[str, object]) -> None:
    """Raise ValueError naming the first field of `sizes` over its `SIZE_BOUNDS` bound."""
    for field in SIZE_BOUNDS:
        error = size_bound_error(field, sizes.get(field))
        if error is not None:
            raise ValueError(error)


def one_line(exc: ValueError) -> str:
    """A validation error as one line: each pydantic error's field and message."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    return "; ".join(
        ".".join(str(part) for part in err["loc"])
        + (": " if err["loc"] else "")
        + err["msg"].removeprefix("Value error, ")
        for err in exc.errors(include_url=False)
    )
