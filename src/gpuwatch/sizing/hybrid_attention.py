"""Hybrid linear attention (Qwen3-Next): Gated DeltaNet layers beside gated attention.

Every ``full_attention_interval``-th layer (or those ``layer_types`` names
"full_attention") is gated full attention with a KV cache (its query projection is
twice as wide: queries and an output gate); the others are Gated DeltaNet linear
attention, which keeps per sequence a recurrent state of value heads x value head dim x
key head dim and a short-convolution state of (kernel - 1) x (2 x key heads x key dim +
value heads x value dim) inputs, whatever the context (vLLM
``MambaStateShapeCalculator.gated_delta_net_state_shape``). Every layer's MLP is a
mixture of experts with a shared expert ``shared_expert_intermediate_size`` wide behind a
one-output gate (transformers ``Qwen3NextSparseMoeBlock``), except ``mlp_only_layers``
and layers off ``decoder_sparse_step``, which have a dense MLP. Qwen3.5's MoE models
(``qwen3_5_moe``) have the same text model in ``text_config`` (its projections split
differently, ``in_proj_qkv``/``z``/``b``/``a``, with the same widths) beside a vision
encoder, which is not counted (the notes say so).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwatch.sizing.state_config import (
    BaseReader,
    FamilyModel,
    StateConfigError,
    build,
    flag,
    integer,
    positive,
)

LINEAR = "linear_attention"
FULL = "full_attention"


def _layer_kinds(config: Mapping[str, object], layers: int) -> list[str]:
    raw = config.get("layer_types")
    if raw is None:
        every = positive(config, "full_attention_interval", 4)
        return [FULL if (i + 1) % every == 0 else LINEAR for i in range(layers)]
    if not isinstance(raw, list) or len(raw) != layers:
        raise StateConfigError(f"config.json: layer_types must list one type per layer ({layers})")
    for kind in raw:
        if kind not in (LINEAR, FULL):
            raise StateConfigError(
                f"config.json: layer_types entry {kind!r} is not modelled ({LINEAR!r} or {FULL!r})"
            )
    return [str(kind) for kind in raw]


def _moe_layers(config: Mapping[str, object], layers: int, experts: int) -> int:
    if not experts:
        return 0
    step = positive(config, "decoder_sparse_step", 1)
    dense = config.get("mlp_only_layers") or []
    if not isinstance(dense, list) or not all(isinstance(i, int) for i in dense):
        raise StateConfigError("config.json: mlp_only_layers must be a list of layer indices")
    return sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)


def read_qwen3_next(
    config: Mapping[str, object], name: str, source: str, base: BaseReader
) -> FamilyModel:
    """The `FamilyModel` of a ``qwen3_next`` config.json."""
    del base  # its own layout throughout
    layers = positive(config, "num_hidden_layers")
    hidden = positive(config, "hidden_size")
    heads = positive(config, "num_attention_heads")
    kv_heads = positive(config, "num_key_value_heads", heads)
    head_dim = positive(config, "head_dim", hidden // heads)
    vocab = positive(config, "vocab_size")
    tied = flag(config, "tie_word_embeddings", False)
    k_heads = positive(config, "linear_num_key_heads")
    v_heads = positive(config, "linear_num_value_heads")
    k_dim = positive(config, "linear_key_head_dim")
    v_dim = positive(config, "linear_value_head_dim")
    kernel = positive(config, "linear_conv_kernel_dim")
    experts = integer(config, "num_experts", 0)
    per_token = integer(config, "num_experts_per_tok", 0) if experts else 0
    moe_width = positive(config, "moe_intermediate_size") if experts else 0
    shared_width = integer(config, "shared_expert_intermediate_size", 0) if experts else 0
    kinds = _layer_kinds(config, layers)
    full = kinds.count(FULL)
    moe_layers = _moe_layers(config, layers, experts)
    dense_mlp = moe_layers < layers or config.get("intermediate_size") is not None
    intermediate = positive(config, "intermediate_size") if dense_mlp else 0

    key_dim, value_dim = k_heads * k_dim, v_heads * v_dim
    conv_dim = 2 * key_dim + value_dim
    bias = flag(config, "attention_bias", False)
    gated_attention = (
        2 * hidden * heads * head_dim  # q_proj: queries and the output gate
        + 2 * hidden * kv_heads * head_dim
        + heads * head_dim * hidden
        + 2 * head_dim  # q_norm, k_norm
        + ((2 * heads + 2 * kv_heads) * head_dim + hidden if bias else 0)
    )
    delta_net = (
        hidden * (2 * key_dim + 2 * value_dim)  # in_proj_qkvz
        + hidden * 2 * v_heads  # in_proj_ba
        + conv_dim * kernel  # depthwise conv1d, no bias
        + 2 * v_heads  # dt_bias, A_log
        + v_dim  # the gated RMSNorm over each value head
        + value_dim * hidden  # out_proj
    )
    moe = (
        experts * 3 * hidden * moe_width
        + hidden * experts  # router
        + (3 * hidden * shared_width + hidden if shared_width else 0)  # shared expert + gate
    )
    parameters = (
        vocab * hidden * (1 if tied else 2)
        + full * gated_attention
        + (layers - full) * delta_net
        + moe_layers * moe
        + (layers - moe_layers) * 3 * hidden * intermediate
        + (2 * layers + 1) * hidden
    )
    notes = [
        f"hybrid linear attention: {full} gated-attention layers cache K and V per token, "
        f"{layers - full} Gated DeltaNet layers a fixed state per sequence",
        "multi-token-prediction weights the checkpoint may carry are not counted "
        "(loaded only for speculative decoding)",
    ]
    return build(
        config,
        {
            "name": name,
            "parameters": parameters,
            "layers": layers,
            "hidden_size": hidden,
            "attention_heads": heads,
            "kv_heads": kv_heads,
            "head_dim": head_dim,
            "intermediate_size": intermediate or None,
            "vocab_size": vocab,
            "tied_embeddings": tied,
            "experts": experts,
            "experts_per_token": per_token,
            "moe_intermediate_size": moe_width or None,
            "shared_experts": round(shared_width / moe_width) if shared_width else 0,
            "dense_layers": layers - moe_layers if experts else 0,
            "source": source,
            "kv_layers": full,
            "state_layers": layers - full,
            "conv_state_values": (kernel - 1) * conv_dim,
            "recurrent_state_values": v_heads * v_dim * k_dim,
        },
        notes,
    )


def read_qwen3_5_moe(
    config: Mapping[str, object], name: str, source: str, base: BaseReader
) -> FamilyModel:
    """The `FamilyModel` of a ``qwen3_5_moe`` config.json: its ``text_config``'s text
    model, read as Qwen3-Next's; the vision encoder is not counted."""
    text = config.get("text_config")
    if not isinstance(text, Mapping):
        raise StateConfigError("config.json: text_config must be an object")
    merged = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")}
    merged.update(text)
    model = read_qwen3_next(merged, name, source, base)
    notes = model.notes
    if config.get("vision_config") is not None:
        notes += ("text model only: the vision_config encoder's weights are not counted",)
    return FamilyModel(model.spec, model.quantization, notes)
