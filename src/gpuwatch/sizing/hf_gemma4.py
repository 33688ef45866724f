"""Gemma 4's global layers: their own attention shape, weights and cache.

Gemma 4 (``gemma4_text``, Transformers ``modeling_gemma4.py``, read not copied; the
shapes match published checkpoints' tensors: gemma-4-31B's global ``q_proj`` is
[16384, 5376], ``k_proj`` [2048, 5376], no ``v_proj``) interleaves sliding layers, shaped
by ``head_dim`` and ``num_key_value_heads``, with full-attention ("global") layers of
``global_head_dim`` and ``num_global_key_value_heads``. With ``attention_k_eq_v`` a
global layer has no ``v_proj``: its values come from the key projection (normed
without a scale), and K and V are both cached. Each layer keeps four norms, per-head
q/k norms of its head width and a one-weight ``layer_scalar``.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwatch.sizing.hf_keys import boolean, positive


def global_attention(
    text: Mapping[str, object], hidden: int, heads: int, kv_heads: int, head_dim: int
) -> tuple[int, int]:
    """(weights of one global layer's attention, values one token adds to its cache)."""
    width = positive(text, "global_head_dim", head_dim)
    global_kv = positive(text, "num_global_key_value_heads", kv_heads)
    shared_kv = boolean(text, "attention_k_eq_v", False)
    q_width, kv_width = heads * width, global_kv * width
    projections = 2 * hidden * q_width + hidden * kv_width * (1 if shared_kv else 2)
    return projections + 2 * width, 2 * kv_width
