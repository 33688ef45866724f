"""Which layers of a config.json's model do what: attention kinds and MoE layers.

`layer_types` reads which layers slide (``layer_types``, ``sliding_window_pattern``,
Llama 4's chunked attention and ``no_rope_layers``) and how far; `moe_layer_count` how
many layers are mixtures of experts under a family's rule (`hf_families.MoeLayers`).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwatch.sizing.hf_families import Family
from gpuwatch.sizing.hf_keys import ConfigJsonError, integer, optional, positive
from gpuwatch.sizing.models import FULL_ATTENTION, SLIDING_ATTENTION


def layer_types(
    text: Mapping[str, object], model_type: str, layers: int
) -> tuple[tuple[str, ...] | None, int | None]:
    """(layer_types, sliding_window): which layers slide and how far (None: none)."""
    use = text.get("use_sliding_window", True)
    window_key = "sliding_window"
    window = None if use is False else optional(text, window_key)
    if model_type == "llama4_text" and text.get("attention_chunk_size") is not None:
        # Chunked local attention caches at most one chunk: sized as a window of it.
        window = positive(text, "attention_chunk_size")
        no_rope = text.get("no_rope_layers")
        if isinstance(no_rope, list) and no_rope:
            if len(no_rope) != layers:
                raise ConfigJsonError(
                    f"config.json: no_rope_layers has {len(no_rope)} entries for {layers} layers"
                )
            kinds = tuple(SLIDING_ATTENTION if flag else FULL_ATTENTION for flag in no_rope)
        else:
            every = positive(text, "no_rope_layer_interval")
            kinds = tuple(
                FULL_ATTENTION if (i + 1) % every == 0 else SLIDING_ATTENTION for i in range(layers)
            )
        return kinds, window
    raw = text.get("layer_types")
    if raw is not None:
        if not isinstance(raw, list) or len(raw) != layers:
            raise ConfigJsonError(
                f"config.json: layer_types must list one type per layer ({layers})"
            )
        for kind in raw:
            if kind not in (FULL_ATTENTION, SLIDING_ATTENTION):
                raise ConfigJsonError(
                    f"config.json: layer_types entry {kind!r} is not modelled "
                    f"({FULL_ATTENTION!r} or {SLIDING_ATTENTION!r} only)"
                )
        kinds = tuple(str(kind) for kind in raw)
        if SLIDING_ATTENTION not in kinds:
            return kinds, None
        if window is None:
            raise ConfigJsonError(
                "config.json: layer_types has sliding layers but no sliding_window"
            )
        return kinds, window
    if window is None:
        return None, None
    pattern = text.get("sliding_window_pattern")
    if pattern is None:
        return None, window  # every layer slides (Mistral 7B)
    every = positive(text, "sliding_window_pattern")
    kinds = tuple(
        FULL_ATTENTION if (i + 1) % every == 0 else SLIDING_ATTENTION for i in range(layers)
    )
    return kinds, window


def moe_layer_count(text: Mapping[str, object], family: Family, layers: int) -> int:
    """Layers whose MLP is a mixture of experts, under `family`'s `moe_layers` rule.

    "first_k_dense": all but ``first_k_dense_replace``; "interleave": those
    ``moe_layers`` lists, else every ``interleave_moe_layer_step``-th (Transformers'
    Llama4TextConfig: layers step-1, 2 step-1, ...); "sparse_step": every
    ``decoder_sparse_step``-th layer not in ``mlp_only_layers`` (Qwen2MoeDecoderLayer).
    """
    if family.moe_layers == "all":
        return layers
    if family.moe_layers == "first_k_dense":
        dense = integer(text, "first_k_dense_replace", 0)
        if dense >= layers:
            raise ConfigJsonError(
                f"config.json: first_k_dense_replace ({dense}) must be below "
                f"num_hidden_layers ({layers})"
            )
        return layers - dense
    if family.moe_layers == "interleave":
        listed = text.get("moe_layers")
        if isinstance(listed, list) and listed:
            if not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in listed
            ):
                raise ConfigJsonError(f"config.json: moe_layers must list layers 0 to {layers - 1}")
            return len(set(listed))
        step = positive(text, "interleave_moe_layer_step", 1)
        return len(range(step - 1, layers, step))
    step = positive(text, "decoder_sparse_step", 1)
    only = text.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) for i in only):
        raise ConfigJsonError("config.json: mlp_only_layers must be a list of layer indices")
    return sum(1 for i in range(layers) if i not in only and (i + 1) % step == 0)
