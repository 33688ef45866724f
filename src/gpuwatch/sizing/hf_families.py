"""The weight layouts of the model types a config.json may name, one `Family` each.

A ``config.json`` names its model type (``model_type``) and the Transformers class that
builds it (``architectures``). `FAMILIES` says, per model type, what the parameter count
in `gpuwatch.sizing.hf_config` must know beyond the common keys: biases, query/key norms,
norms per layer, the keys giving the expert and shared-expert widths, which layers are
mixtures of experts, a vision tower, and the defaults of the Transformers config class
for keys its config.json may leave out. `resolve_family` picks the family: by
``model_type``, else (a type Transformers does not know, such as Moonshot's ``kimi_k2``)
by the class ``architectures`` names, whose layout the checkpoint is loaded with; the
type keeps its own name and the notes say which layout was read. Sources: each model
type's ``configuration_*.py`` and ``modeling_*.py`` in huggingface/transformers (read,
not copied), cited per entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

QkNorm = Literal["none", "head", "layer"]
"""Query/key RMSNorms: none; one per head (head_dim weights each for q and k: Qwen3,
Gemma 3, GLM-4.5); or one over the whole projection (heads x head_dim for q, KV heads x
head_dim for k: MiniMax-M2's ``qk_norm_type`` "per_layer")."""

SharedExpert = Literal["none", "count", "llama4", "qwen2_moe", "granite", "dense"]
"""How a family's always-run (shared) expert is sized:

- "none": no shared expert;
- "count": ``n_shared_experts`` experts as wide as the routed ones (DeepSeek, GLM);
- "llama4": one, ``intermediate_size`` wide (Llama 4);
- "qwen2_moe": one, ``shared_expert_intermediate_size`` wide, behind a sigmoid gate of
  hidden x 1 weights (Qwen2-MoE; 0 or absent: none);
- "granite": one, ``shared_intermediate_size`` wide, no gate (Granite MoE shared; 0: none);
- "dense": the layer's dense MLP, ``intermediate_size`` wide, runs beside the experts
  (Gemma 4's ``enable_moe_block``).
"""

MoeLayers = Literal["all", "first_k_dense", "interleave", "sparse_step"]
"""Which layers are mixtures of experts (the rest have a dense MLP):

- "all": every layer (Mixtral, Qwen3-MoE's published configs, MiniMax-M2);
- "first_k_dense": all but the first ``first_k_dense_replace`` (DeepSeek, GLM-4.5);
- "interleave": every ``interleave_moe_layer_step``-th layer, or those ``moe_layers``
  lists, the others dense ``intermediate_size_mlp`` wide (Llama 4 Maverick);
- "sparse_step": every ``decoder_sparse_step``-th layer not in ``mlp_only_layers``
  (Qwen2-MoE, Qwen3-MoE).
"""

Vision = Literal["none", "qwen2_5_vl", "qwen3_vl"]
"""A vision tower `gpuwatch.sizing.hf_vision` counts from ``vision_config``."""


@dataclass(frozen=True, slots=True)
class Family:
    """One model type's weight layout (see the module docstring).

    `qkv_bias`: biases on q, k and v whatever the config says (Qwen2). `bias_key`: the
    config key that turns on attention biases ("": none), on q, k, v and, if
    `o_bias`, o. `qk_norm` with `qk_norm_key` ("": always as `qk_norm`; else only when
    that key is true). `norms_per_layer`: RMSNorms of hidden weights per layer.
    `expert_width_key`: the key giving one routed expert's width. `mla`: multi-head
    latent attention's keys are read. `gpt_oss`: attention sinks and expert and router
    biases. `defaults`: keys the config class fills in when config.json omits them.
    """

    model_type: str
    qkv_bias: bool = False
    bias_key: str = "attention_bias"
    o_bias: bool = True
    qk_norm: QkNorm = "none"
    qk_norm_key: str = ""
    norms_per_layer: int = 2
    expert_width_key: str = "moe_intermediate_size"
    shared: SharedExpert = "count"
    moe_layers: MoeLayers = "first_k_dense"
    mla: bool = False
    gpt_oss: bool = False
    vision: Vision = "none"
    mtp_key: str = ""
    defaults: Mapping[str, object] = field(default_factory=dict)


def _families(*families: Family) -> dict[str, Family]:
    return {family.model_type: family for family in families}


FAMILIES: dict[str, Family] = _families(
    # transformers LlamaConfig / MistralConfig / MixtralConfig: attention_bias on q, k, v, o.
    Family("llama"),
    Family("mistral"),
    Family("mixtral", expert_width_key="intermediate_size", moe_layers="all"),
    # SmolLM3Config: Llama's layout; no_rope_layers only drops RoPE (the cache is the
    # same); tied embeddings by default.
    Family("smollm3", defaults={"tie_word_embeddings": True}),
    # Phi3Config (Phi-3, Phi-3.5-mini, Phi-4, Phi-4-mini): fused qkv_proj and
    # gate_up_proj without biases, the same weights as Llama's separate projections.
    Family("phi3", bias_key=""),
    # Qwen2Config: q, k, v biases whatever attention_bias says.
    Family("qwen2", qkv_bias=True, bias_key=""),
    Family("qwen2_5_vl", qkv_bias=True, bias_key="", vision="qwen2_5_vl"),
    Family("qwen2_5_vl_text", qkv_bias=True, bias_key="", vision="qwen2_5_vl"),
    # Qwen2MoeConfig: a shared expert shared_expert_intermediate_size wide with a gate.
    Family("qwen2_moe", qkv_bias=True, bias_key="", shared="qwen2_moe", moe_layers="sparse_step"),
    # Qwen3Config / Qwen3MoeConfig: per-head q/k norms, attention_bias on q, k, v, o.
    Family("qwen3", qk_norm="head"),
    Family("qwen3_vl_text", qk_norm="head", vision="qwen3_vl"),
    Family("qwen3_moe", qk_norm="head", shared="none", moe_layers="sparse_step"),
    Family(
        "qwen3_vl_moe_text",
        qk_norm="head",
        shared="none",
        vision="qwen3_vl",
        moe_layers="sparse_step",
    ),
    # Gemma2Config / Gemma3TextConfig: four norms per layer, tied embeddings.
    Family(
        "gemma2",
        norms_per_layer=4,
        defaults={"tie_word_embeddings": True, "sliding_window_pattern": 2},
    ),
    Family(
        "gemma3_text",
        qk_norm="head",
        norms_per_layer=4,
        defaults={
            "vocab_size": 262_208,
            "tie_word_embeddings": True,
            "sliding_window_pattern": 6,
            "sliding_window": 4096,
        },
    ),
    # Gemma4TextConfig: sliding and global layers of different shapes (hf_gemma4), four
    # norms, per-head q/k norms, tied embeddings; with enable_moe_block the dense MLP
    # runs beside top_k_experts of num_experts.
    Family(
        "gemma4_text",
        qk_norm="head",
        norms_per_layer=4,
        shared="dense",
        moe_layers="all",
        defaults={"tie_word_embeddings": True},
    ),
    # Llama4TextConfig: a NoPE (global) layer every 4th, the rest chunked; one shared
    # expert; MoE on every interleave_moe_layer_step-th layer.
    Family(
        "llama4_text",
        expert_width_key="intermediate_size",
        shared="llama4",
        moe_layers="interleave",
        defaults={"no_rope_layer_interval": 4, "tie_word_embeddings": False},
    ),
    # DeepseekV2Config / DeepseekV3Config: MLA, first_k_dense_replace dense layers.
    Family("deepseek_v2", mla=True, mtp_key="num_nextn_predict_layers"),
    Family("deepseek_v3", mla=True, mtp_key="num_nextn_predict_layers"),
    # Glm4MoeConfig (GLM-4.5, 4.6, 4.7): biases on q, k, v only (attention_bias), per-head
    # q/k norms when use_qk_norm, first_k_dense_replace dense layers, shared experts.
    Family(
        "glm4_moe",
        o_bias=False,
        qk_norm="head",
        qk_norm_key="use_qk_norm",
        mtp_key="num_nextn_predict_layers",
    ),
    # Glm4MoeLiteConfig (GLM-4.7-Flash): DeepSeek-V3's MLA and MoE layout.
    Family("glm4_moe_lite", mla=True, mtp_key="num_nextn_predict_layers"),
    # MiniMaxM2Config: q/k norms over the whole projection, experts intermediate_size
    # wide on every layer, no shared expert.
    Family(
        "minimax_m2",
        bias_key="",
        qk_norm="layer",
        qk_norm_key="use_qk_norm",
        expert_width_key="intermediate_size",
        shared="none",
        moe_layers="all",
    ),
    # GraniteMoeConfig / GraniteMoeSharedConfig: fused input_linear experts, no biases,
    # tied embeddings by default; the shared variant adds one shared MLP.
    Family(
        "granitemoe",
        expert_width_key="intermediate_size",
        shared="none",
        moe_layers="all",
        defaults={"tie_word_embeddings": True},
    ),
    Family(
        "granitemoeshared",
        expert_width_key="intermediate_size",
        shared="granite",
        moe_layers="all",
        defaults={"tie_word_embeddings": True},
    ),
    # GptOssConfig: attention sinks, biases on attention, experts and router.
    Family(
        "gpt_oss",
        expert_width_key="intermediate_size",
        shared="none",
        moe_layers="all",
        gpt_oss=True,
    ),
)
"""Model types whose weight layout the parameter count follows, by ``model_type``."""

ARCHITECTURE_FAMILIES: dict[str, str] = {
    "DeepseekV3ForCausalLM": "deepseek_v3",
}
"""The layout a Transformers class loads (the class ``architectures`` names)."""

ALIASES: dict[str, frozenset[str]] = {
    # moonshotai/Kimi-K2-Instruct: model_type kimi_k2, architectures
    # DeepseekV3ForCausalLM (its remote code is DeepSeek-V3's, vLLM loads it with
    # DeepseekV3ForCausalLM).
    "kimi_k2": frozenset({"DeepseekV3ForCausalLM"}),
}
"""Model types Transformers does not define, read by the layout of the class their
``architectures`` names (only these classes: a type is not guessed from any class)."""


class UnknownFamilyError(ValueError):
    """Neither ``model_type`` nor ``architectures`` names a modelled layout."""


def resolve_family(model_type: object, architectures: object) -> tuple[Family, str | None]:
    """The `Family` of a config and a note when it was read from ``architectures``.

    A known ``model_type`` is its own family. A type in `ALIASES` whose first
    ``architectures`` class is one listed there takes that class's layout under its own
    name, without that family's defaults (they belong to the other type's config class:
    the config must state its keys).
    """
    if isinstance(model_type, str) and model_type in FAMILIES:
        return FAMILIES[model_type], None
    names = architectures if isinstance(architectures, list) else []
    first = names[0] if names and isinstance(names[0], str) else None
    if isinstance(model_type, str) and first is not None and first in ALIASES.get(model_type, ()):
        base = FAMILIES[ARCHITECTURE_FAMILIES[first]]
        note = (
            f"model_type {model_type!r} sized with the weight layout of its architectures "
            f"entry {first} ({base.model_type})"
        )
        return replace(base, model_type=model_type, defaults={}), note
    aliases = ", ".join(f"{t} ({'/'.join(sorted(a))})" for t, a in sorted(ALIASES.items()))
    raise UnknownFamilyError(
        f"config.json: model_type {model_type!r} is not one gpuwatch knows the weights of "
        f"({', '.join(sorted(FAMILIES))}; aliases: {aliases})"
    )
