"""DeepSeek sparse attention (DeepSeek-V3.2): DeepSeek-V3's layout plus a lightning indexer.

The model is DeepSeek-V3's (multi-head latent attention, routed and shared experts, dense
first layers; read by the plain reader as ``deepseek_v3``) with, in every layer, an
indexer that picks the ``index_topk`` cached tokens each query attends to. The indexer
adds weights (``wq_b``: q_lora_rank x index heads x index head dim; ``wk``: hidden x
index head dim; a LayerNorm over the key, weight and bias; ``weights_proj``: hidden x
index heads; DeepSeek-V3.2-Exp ``inference/model.py`` ``Indexer``) and its own cache:
one key of ``index_head_dim`` values per token per layer, stored as FP8 with one FP32
scale per 128 values, whatever the latent cache's dtype (128 + 4 = 132 B for V3.2;
vLLM ``DeepseekV32IndexerCache``, ``head_dim + head_dim // quant_block_size * 4`` bytes).
The latent cache itself is V3's: kv_lora_rank + qk_rope_head_dim values per token per
layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from gpuwatch.sizing.state_config import (
    BaseReader,
    FamilyModel,
    StateConfigError,
    positive,
)

INDEXER_QUANT_BLOCK = 128
"""Index-key values per FP32 scale (vLLM's and DeepSeek's ``quant_block_size``)."""

FP32_SCALE_BYTES = 4


def indexer_bytes_per_token(index_head_dim: int) -> int:
    """Bytes of one token's indexer key in one layer: FP8 values + FP32 scales."""
    return index_head_dim + index_head_dim // INDEXER_QUANT_BLOCK * FP32_SCALE_BYTES


def read_deepseek_v32(
    config: Mapping[str, object], name: str, source: str, base: BaseReader
) -> FamilyModel:
    """The `FamilyModel` of a ``deepseek_v32`` config.json."""
    index_dim = positive(config, "index_head_dim")
    index_heads = positive(config, "index_n_heads")
    positive(config, "index_topk")
    if config.get("q_lora_rank") is None:
        raise StateConfigError("config.json: q_lora_rank is missing (the indexer's queries)")
    q_rank = positive(config, "q_lora_rank")
    v3 = base({**config, "model_type": "deepseek_v3"})
    spec = v3.spec
    hidden = spec.hidden_size
    indexer = (
        q_rank * index_heads * index_dim  # wq_b
        + hidden * index_dim  # wk
        + 2 * index_dim  # k_norm (LayerNorm: weight and bias)
        + hidden * index_heads  # weights_proj
    )
    spec = dataclasses.replace(
        spec,
        name=name,
        source=source,
        parameters=spec.parameters + spec.layers * indexer,
        indexer_bytes_per_token=indexer_bytes_per_token(index_dim),
    )
    note = (
        f"DeepSeek sparse attention: each layer's lightning indexer ({indexer / 1e6:.4g}M "
        f"parameters) caches {indexer_bytes_per_token(index_dim)} B per token beside the "
        "latent KV cache"
    )
    return FamilyModel(spec, v3.quantization, (*v3.notes, note))
