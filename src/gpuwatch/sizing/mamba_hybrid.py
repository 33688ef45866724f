"""Mamba hybrids (Nemotron-H): Mamba-2, attention, MLP and MoE layers in any order.

``hybrid_override_pattern`` names each layer: ``M`` a Mamba-2 mixer, ``*`` attention
(with a KV cache), ``-`` a plain MLP (squared-ReLU, up and down projections), ``E`` a
mixture of squared-ReLU experts with a shared expert (Nemotron 3). A Mamba-2 layer of
``mamba_num_heads`` heads x ``mamba_head_dim`` (I wide) with ``n_groups`` groups of
``ssm_state_size`` (N) keeps per sequence an SSM state of heads x head dim x N and a
convolution state of (``conv_kernel`` - 1) x (I + 2 x groups x N) inputs (vLLM
``MambaStateShapeCalculator.mamba2_state_shape``), in the model's dtype, the SSM state in
``mamba_ssm_cache_dtype`` when the config names float32. Weights, as transformers'
``NemotronHMamba2Mixer``: in_proj hidden x (2I + 2 x groups x N + heads), a depthwise
convolution over I + 2 x groups x N channels, dt_bias, A_log and D per head, a gated
RMSNorm over I, out_proj I x hidden; one norm per layer.
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

KINDS = frozenset("M*-E")
SSM_CACHE_BYTES = {"float32": 4.0, "fp32": 4.0, "bfloat16": None, "float16": None, "auto": None}
"""``mamba_ssm_cache_dtype`` -> bytes per SSM state value (None: the model's dtype)."""


def _pattern(config: Mapping[str, object], layers: int) -> str:
    pattern = config.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != layers:
        raise StateConfigError(
            f"config.json: hybrid_override_pattern must name each of the {layers} layers"
        )
    unknown = sorted(set(pattern) - KINDS)
    if unknown:
        raise StateConfigError(
            f"config.json: hybrid_override_pattern layer kind {unknown[0]!r} is not modelled "
            "(M, *, - or E)"
        )
    return pattern


def _ssm_cache_bytes(config: Mapping[str, object]) -> float | None:
    dtype = config.get("mamba_ssm_cache_dtype")
    if dtype is None:
        return None
    if not isinstance(dtype, str) or dtype.casefold() not in SSM_CACHE_BYTES:
        raise StateConfigError(f"config.json: mamba_ssm_cache_dtype {dtype!r} is not modelled")
    return SSM_CACHE_BYTES[dtype.casefold()]


def read_nemotron_h(
    config: Mapping[str, object], name: str, source: str, base: BaseReader
) -> FamilyModel:
    """The `FamilyModel` of a ``nemotron_h`` config.json."""
    del base  # its own layout throughout
    layers = positive(config, "num_hidden_layers")
    pattern = _pattern(config, layers)
    hidden = positive(config, "hidden_size")
    heads = positive(config, "num_attention_heads")
    kv_heads = positive(config, "num_key_value_heads", heads)
    head_key = "head_dim" if config.get("head_dim") is not None else "attention_head_dim"
    head_dim = positive(config, head_key, hidden // heads)
    vocab = positive(config, "vocab_size")
    tied = flag(config, "tie_word_embeddings", False)
    mamba_heads = positive(config, "mamba_num_heads")
    mamba_dim = positive(config, "mamba_head_dim")
    groups = positive(config, "n_groups")
    state = positive(config, "ssm_state_size")
    kernel = positive(config, "conv_kernel")
    counts = {kind: pattern.count(kind) for kind in KINDS}
    intermediate = positive(config, "intermediate_size") if counts["-"] else None
    experts = positive(config, "n_routed_experts") if counts["E"] else 0
    per_token = positive(config, "num_experts_per_tok") if experts else 0
    moe_width = positive(config, "moe_intermediate_size") if experts else 0
    shared_key = "moe_shared_expert_intermediate_size"
    shared_width = integer(config, shared_key, 0) if experts else 0

    inner = mamba_heads * mamba_dim
    conv_dim = inner + 2 * groups * state
    proj_bias = flag(config, "use_bias", False)
    mamba = (
        hidden * (2 * inner + 2 * groups * state + mamba_heads)  # in_proj
        + conv_dim * kernel
        + (conv_dim if flag(config, "use_conv_bias", True) else 0)
        + 3 * mamba_heads  # dt_bias, A_log, D
        + inner  # gated RMSNorm
        + inner * hidden  # out_proj
        + ((2 * inner + 2 * groups * state + mamba_heads) + hidden if proj_bias else 0)
    )
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    if flag(config, "attention_bias", False):
        attention += (heads + 2 * kv_heads) * head_dim + hidden
    mlp = 0 if intermediate is None else 2 * hidden * intermediate
    if intermediate is not None and flag(config, "mlp_bias", False):
        mlp += intermediate + hidden
    moe = experts * 2 * hidden * moe_width + hidden * experts + 2 * hidden * shared_width
    if experts:
        moe += experts  # the router's score-correction bias
    parameters = (
        vocab * hidden * (1 if tied else 2)
        + counts["M"] * mamba
        + counts["*"] * attention
        + counts["-"] * mlp
        + counts["E"] * moe
        + (layers + 1) * hidden  # one norm per layer and the final one
    )
    notes = [
        f"Mamba hybrid: {counts['*']} attention layers cache K and V per token, "
        f"{counts['M']} Mamba-2 layers a fixed SSM and convolution state per sequence"
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
            "intermediate_size": intermediate or moe_width or None,
            "vocab_size": vocab,
            "tied_embeddings": tied,
            "gated_mlp": False,
            "experts": experts,
            "experts_per_token": per_token,
            "moe_intermediate_size": moe_width or None,
            "shared_experts": round(shared_width / moe_width) if shared_width else 0,
            "dense_layers": layers - counts["E"] if experts else 0,
            "source": source,
            "kv_layers": counts["*"],
            "state_layers": counts["M"],
            "conv_state_values": (kernel - 1) * conv_dim if counts["M"] else 0,
            "recurrent_state_values": mamba_heads * mamba_dim * state if counts["M"] else 0,
            "recurrent_state_bytes": _ssm_cache_bytes(config),
        },
        notes,
    )
