"""Heterogeneous blocks (Llama-Nemotron Super/Ultra: ``nemotron-nas``, DeciLM).

A Llama whose every layer is configured apart (``block_configs``): its attention has
``num_attention_heads`` / ``n_heads_in_group`` KV heads or is a no-op (no weights, no
norm, no KV cache), its MLP is a SwiGLU ``ffn_mult`` wide, as DeciLM rounds it
(int(2 x ffn_mult x hidden / 3) up to a multiple of 256), or a no-op (vLLM
``nemotron_nas.py``, ``DeciLMDecoderLayer`` and ``_ffn_mult_to_intermediate_size``). The
KV cache is then the attention layers' only. A block replaced by a linear layer, a
windowed or sink attention, or KV heads that differ from layer to layer are refused,
the key named.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from gpuwatch.sizing.state_config import (
    BaseReader,
    FamilyModel,
    StateConfigError,
    build,
    flag,
    positive,
)

DECI_MLP_MULTIPLE = 256
REFUSED = ("replace_with_linear", "window_length", "num_sink_tokens", "sparsify")
"""Block keys whose non-default values change the layout in a way not modelled."""


def deci_intermediate_size(ffn_mult: float, hidden: int) -> int:
    """DeciLM's MLP width: int(2 x ffn_mult x hidden / 3), up to a multiple of 256."""
    width = int(2 * ffn_mult * hidden / 3)
    return -(-width // DECI_MLP_MULTIPLE) * DECI_MLP_MULTIPLE


def _part(block: object, index: int, part: str) -> Mapping[str, object]:
    value = block.get(part) if isinstance(block, Mapping) else None
    if not isinstance(value, Mapping):
        raise StateConfigError(f"config.json: block_configs[{index}].{part} must be an object")
    for key in REFUSED:
        if value.get(key) not in (None, False):
            raise StateConfigError(
                f"config.json: block_configs[{index}].{part}.{key} = {value.get(key)!r} "
                "is not modelled"
            )
    return value


def _ffn_width(ffn: Mapping[str, object], index: int, hidden: int) -> int:
    mult = ffn.get("ffn_mult")
    if mult is None:
        return positive(ffn, "intermediate_size")
    if isinstance(mult, bool) or not isinstance(mult, int | float) or not 0 < mult <= 1000:
        raise StateConfigError(
            f"config.json: block_configs[{index}].ffn.ffn_mult must be a positive number"
        )
    return deci_intermediate_size(float(mult), hidden)


def read_nemotron_nas(
    config: Mapping[str, object], name: str, source: str, base: BaseReader
) -> FamilyModel:
    """The `FamilyModel` of a ``nemotron-nas`` config.json."""
    del base  # its own layout throughout
    layers = positive(config, "num_hidden_layers")
    hidden = positive(config, "hidden_size")
    heads = positive(config, "num_attention_heads")
    head_dim = positive(config, "head_dim", hidden // heads)
    vocab = positive(config, "vocab_size")
    tied = flag(config, "tie_word_embeddings", False)
    blocks = config.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) != layers:
        raise StateConfigError(
            f"config.json: block_configs must configure each of the {layers} layers"
        )
    bias = flag(config, "attention_bias", False)
    mlp_bias = flag(config, "mlp_bias", False)
    kv_heads: set[int] = set()
    attention_layers = 0
    widths: Counter[int] = Counter()
    parameters = vocab * hidden * (1 if tied else 2) + hidden  # embeddings, final norm
    for index, block in enumerate(blocks):
        attention = _part(block, index, "attention")
        ffn = _part(block, index, "ffn")
        if not flag(attention, "no_op", False):
            group = positive(attention, "n_heads_in_group")
            if heads % group:
                raise StateConfigError(
                    f"config.json: block_configs[{index}].attention.n_heads_in_group "
                    f"({group}) must divide num_attention_heads ({heads})"
                )
            kv = heads // group
            kv_heads.add(kv)
            attention_layers += 1
            parameters += 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim + hidden
            if bias:
                parameters += (heads + 2 * kv) * head_dim + hidden
        if not flag(ffn, "no_op", False):
            width = _ffn_width(ffn, index, hidden)
            widths[width] += 1
            parameters += 3 * hidden * width + hidden + (2 * width + hidden if mlp_bias else 0)
    if len(kv_heads) > 1:
        raise StateConfigError(
            "config.json: block_configs' attention.n_heads_in_group differs from layer to "
            f"layer ({sorted(heads // kv for kv in kv_heads)}): not modelled"
        )
    notes = [
        f"heterogeneous blocks: {attention_layers} of {layers} layers have attention "
        f"(and a KV cache); MLP widths {', '.join(f'{w} x {n}' for w, n in widths.items())}"
    ]
    return build(
        config,
        {
            "name": name,
            "parameters": parameters,
            "layers": layers,
            "hidden_size": hidden,
            "attention_heads": heads,
            "kv_heads": next(iter(kv_heads), heads),
            "head_dim": head_dim,
            "intermediate_size": widths.most_common(1)[0][0] if widths else None,
            "vocab_size": vocab,
            "tied_embeddings": tied,
            "source": source,
            "kv_layers": attention_layers,
        },
        notes,
    )
