"""A `ModelSpec` from a Hugging Face ``config.json``.

`model_from_config` reads the schema Transformers writes (``num_hidden_layers``,
``hidden_size``, ``intermediate_size``, ``num_attention_heads``,
``num_key_value_heads``, ``head_dim``, ``vocab_size``, ``tie_word_embeddings``,
``sliding_window``, ``layer_types``, the mixture-of-experts keys
``num_local_experts``/``num_experts``/``n_routed_experts``, ``num_experts_per_tok``,
``moe_intermediate_size``, ``n_shared_experts``, ``first_k_dense_replace``, and
multi-head latent attention's ``kv_lora_rank``, ``q_lora_rank``, ``qk_rope_head_dim``,
``qk_nope_head_dim``, ``v_head_dim``), looking inside ``text_config`` for multimodal
configs (Llama 4, Gemma 3, Mistral Small 3.1). The parameter count is computed from the
config, weight matrix by weight matrix (embeddings, attention with MLA's projections,
MLP or experts and router, norms, the biases the architecture has), since a config does
not state it.

Keys a model type leaves out take the defaults of its Transformers config class (a short
table, `MODEL_TYPE_DEFAULTS`). Keys irrelevant to memory (RoPE, token ids, dropout,
initialisation) are ignored; a key that changes the memory in a way not modelled here
(interleaved MoE layers, cross-attention layers, linear attention, a differently sized
shared expert) is a `ConfigJsonError` naming it, as are missing, non-integer, negative
or contradictory sizes. A ``quantization_config`` is handed to
`gpuwatch.sizing.quantization_config.scheme_from_quantization_config`.

Multimodal configs are sized as their text model: the ``vision_config`` encoder (about
0.4B parameters in Gemma 3 and Mistral Small 3.1) is not counted, and the result's
`notes` say so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import get_args

from gpuwatch.sizing.models import (
    FULL_ATTENTION,
    SLIDING_ATTENTION,
    ModelCatalogEntry,
    ModelSpec,
    PublishedPrecision,
)
from gpuwatch.sizing.quantization import QuantizationScheme
from gpuwatch.sizing.quantization_config import (
    quantization_config_from_hf_quant_config,
    scheme_from_quantization_config,
)


class ConfigJsonError(ValueError):
    """A config.json gpuwatch cannot size; the message names the field."""


MODEL_TYPE_DEFAULTS: dict[str, dict[str, object]] = {
    # transformers Gemma3TextConfig: the 27B config.json's text_config leaves these out.
    "gemma3_text": {
        "vocab_size": 262_208,
        "tie_word_embeddings": True,
        "sliding_window_pattern": 6,
        "sliding_window": 4096,
    },
    # transformers Gemma2Config: every other layer slides (even layers local).
    "gemma2": {"tie_word_embeddings": True, "sliding_window_pattern": 2},
    # transformers Llama4TextConfig: a NoPE (global) layer every 4th, the rest chunked.
    "llama4_text": {"no_rope_layer_interval": 4, "tie_word_embeddings": False},
}
"""Defaults of the Transformers config classes for keys their config.json may omit."""

MODEL_TYPES = frozenset(
    {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen3",
        "qwen3_moe",
        "gemma2",
        "gemma3_text",
        "llama4_text",
        "deepseek_v3",
        "deepseek_v2",
        "gpt_oss",
    }
)
"""Model types whose weight layout the parameter count below follows."""

QKV_BIAS_TYPES = frozenset({"qwen2"})
"""Model types with biases on the q, k and v projections (not o) whatever the config says."""

QK_NORM_TYPES = frozenset({"qwen3", "qwen3_moe", "gemma3_text"})
"""Model types with an RMSNorm over each head's queries and keys (head_dim weights each)."""

FOUR_NORM_TYPES = frozenset({"gemma2", "gemma3_text"})
"""Model types with four norms per layer (before and after attention and MLP)."""

UNMODELLED: dict[str, object] = {
    "cross_attention_layers": None,
    "shared_expert_intermediate_size": None,
    "linear_attn_config": None,
}
"""Keys that change the memory in a way not modelled: present (and not null) is an error."""

MUST_BE: dict[str, tuple[object, ...]] = {
    "interleave_moe_layer_step": (1,),
    "decoder_sparse_step": (1,),
    "moe_layer_freq": (1,),
    "mlp_only_layers": ((),),
    "mlp_bias": (False,),
}
"""Keys whose only modelled values are these (e.g. every layer an MoE layer)."""


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """What a config.json says: the model, its quantization (None: 16-bit), notes."""

    spec: ModelSpec
    quantization: QuantizationScheme | None
    notes: tuple[str, ...]


def _int(config: Mapping[str, object], key: str, default: int | None = None) -> int:
    value = config.get(key)
    if value is None:  # absent or null: the default, if any
        value = default
    if value is None:
        raise ConfigJsonError(f"config.json: {key} is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigJsonError(f"config.json: {key} must be an integer, not {value!r}")
    if value < 0:
        raise ConfigJsonError(f"config.json: {key} must not be negative, got {value}")
    return value


def _positive(config: Mapping[str, object], key: str, default: int | None = None) -> int:
    value = _int(config, key, default)
    if value == 0:
        raise ConfigJsonError(f"config.json: {key} must be positive, got 0")
    return value


def _optional(config: Mapping[str, object], key: str) -> int | None:
    return None if config.get(key) is None else _positive(config, key)


def _bool(config: Mapping[str, object], key: str, default: bool) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise ConfigJsonError(f"config.json: {key} must be true or false, not {value!r}")
    return value


def _first(config: Mapping[str, object], *keys: str) -> tuple[str, int]:
    """The first of `keys` present and not null, as (key, value); ("", 0) if none."""
    for key in keys:
        if config.get(key) is not None:
            return key, _int(config, key)
    return "", 0


def _text_config(config: Mapping[str, object]) -> tuple[dict[str, object], list[str]]:
    """The text model's keys (``text_config`` merged over the top level) and notes."""
    notes: list[str] = []
    text = config.get("text_config")
    if text is None:
        merged = dict(config)
    elif isinstance(text, Mapping):
        merged = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")}
        merged.update(text)
        if config.get("vision_config") is not None:
            notes.append("text model only: the vision_config encoder's weights are not counted")
    else:
        raise ConfigJsonError("config.json: text_config must be an object")
    model_type = merged.get("model_type")
    if isinstance(model_type, str):
        for key, value in MODEL_TYPE_DEFAULTS.get(model_type, {}).items():
            if merged.get(key) is None:
                merged[key] = value
    return merged, notes


def _check_unmodelled(text: Mapping[str, object]) -> None:
    for key in UNMODELLED:
        if text.get(key) is not None:
            raise ConfigJsonError(f"config.json: {key} changes the memory and is not modelled")
    for key, allowed in MUST_BE.items():
        value = text.get(key)
        if isinstance(value, list):
            value = tuple(value)
        if value is not None and value not in allowed:
            raise ConfigJsonError(
                f"config.json: {key} = {text.get(key)!r} is not modelled "
                f"(only {', '.join(repr(a) for a in allowed)})"
            )


def _layer_types(
    text: Mapping[str, object], model_type: str, layers: int
) -> tuple[tuple[str, ...] | None, int | None]:
    """(layer_types, sliding_window): which layers slide and how far (None: none)."""
    use = text.get("use_sliding_window", True)
    window_key = "sliding_window"
    window = None if use is False else _optional(text, window_key)
    if model_type == "llama4_text" and text.get("attention_chunk_size") is not None:
        # Chunked local attention caches at most one chunk: sized as a window of it.
        window = _positive(text, "attention_chunk_size")
        no_rope = text.get("no_rope_layers")
        if isinstance(no_rope, list) and no_rope:
            if len(no_rope) != layers:
                raise ConfigJsonError(
                    f"config.json: no_rope_layers has {len(no_rope)} entries for {layers} layers"
                )
            kinds = tuple(SLIDING_ATTENTION if flag else FULL_ATTENTION for flag in no_rope)
        else:
            every = _positive(text, "no_rope_layer_interval")
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
    every = _positive(text, "sliding_window_pattern")
    kinds = tuple(
        FULL_ATTENTION if (i + 1) % every == 0 else SLIDING_ATTENTION for i in range(layers)
    )
    return kinds, window


def published_precision(scheme: QuantizationScheme | None) -> str | None:
    """The `ModelSpec.published_precision` a checkpoint's scheme stands for: its name when
    `gpuwatch size --precision` knows it (fp8, mxfp4, nvfp4, awq-int4...), else None."""
    if scheme is None or scheme.name not in get_args(PublishedPrecision):
        return None
    return scheme.name


def model_from_config(
    config: Mapping[str, object], *, name: str, source: str = "config.json"
) -> LoadedConfig:
    """The `ModelSpec` (parameter count computed) and quantization of a config.json."""
    text, notes = _text_config(config)
    model_type = text.get("model_type")
    if not isinstance(model_type, str) or model_type not in MODEL_TYPES:
        raise ConfigJsonError(
            f"config.json: model_type {model_type!r} is not one gpuwatch knows the weights "
            f"of ({', '.join(sorted(MODEL_TYPES))})"
        )
    _check_unmodelled(text)
    layers = _positive(text, "num_hidden_layers")
    hidden = _positive(text, "hidden_size")
    heads = _positive(text, "num_attention_heads")
    kv_heads = _positive(text, "num_key_value_heads", heads)
    if heads % kv_heads:
        raise ConfigJsonError(
            f"config.json: num_key_value_heads ({kv_heads}) must divide "
            f"num_attention_heads ({heads})"
        )
    if text.get("head_dim") is not None:
        head_dim = _positive(text, "head_dim")
    elif hidden % heads:
        raise ConfigJsonError(
            f"config.json: head_dim is missing and hidden_size ({hidden}) is not a "
            f"multiple of num_attention_heads ({heads})"
        )
    else:
        head_dim = hidden // heads
    vocab = _positive(text, "vocab_size")
    tied = _bool(text, "tie_word_embeddings", False)
    intermediate = _positive(text, "intermediate_size")

    experts_key, experts = _first(text, "num_local_experts", "num_experts", "n_routed_experts")
    per_token = _int(text, "num_experts_per_tok", 0) if experts else 0
    if experts and not 0 < per_token <= experts:
        raise ConfigJsonError(
            f"config.json: num_experts_per_tok ({per_token}) must be 1 to {experts_key} ({experts})"
        )
    dense_layers = _int(text, "first_k_dense_replace", 0) if experts else 0
    if dense_layers >= layers:
        raise ConfigJsonError(
            f"config.json: first_k_dense_replace ({dense_layers}) must be below "
            f"num_hidden_layers ({layers})"
        )
    moe_width = _optional(text, "moe_intermediate_size") if experts else None
    shared = _int(text, "n_shared_experts", 0) if experts else 0
    if model_type == "llama4_text" and experts:
        shared = 1  # Llama 4's shared expert, intermediate_size wide like the routed ones
    expert_width = moe_width or intermediate

    kv_lora = _optional(text, "kv_lora_rank")
    rope_dim = _optional(text, "qk_rope_head_dim") if kv_lora else None
    if kv_lora is not None and rope_dim is None:
        raise ConfigJsonError("config.json: kv_lora_rank (MLA) needs qk_rope_head_dim")
    layer_types, window = _layer_types(text, model_type, layers)

    # Parameters, matrix by matrix.
    embeddings = vocab * hidden * (1 if tied else 2)
    if kv_lora is not None and rope_dim is not None:
        nope = _positive(text, "qk_nope_head_dim")
        v_dim = _positive(text, "v_head_dim")
        head_dim = v_dim  # the attention output is heads x v_head_dim wide
        q_rank = _optional(text, "q_lora_rank")
        q_head = nope + rope_dim
        query = (
            hidden * heads * q_head
            if q_rank is None
            else hidden * q_rank + q_rank + q_rank * heads * q_head
        )
        attention = (
            query
            + hidden * (kv_lora + rope_dim)
            + kv_lora  # kv_a_layernorm
            + kv_lora * heads * (nope + v_dim)
            + heads * v_dim * hidden
        )
    else:
        q_width, kv_width = heads * head_dim, kv_heads * head_dim
        attention = 2 * hidden * q_width + 2 * hidden * kv_width
        if model_type in QKV_BIAS_TYPES:
            attention += q_width + 2 * kv_width
        elif _bool(text, "attention_bias", False):
            attention += q_width + 2 * kv_width + hidden
        if model_type in QK_NORM_TYPES:
            attention += 2 * head_dim
        if model_type == "gpt_oss":
            attention += heads  # attention sinks, one per head
    expert = 3 * hidden * expert_width
    if model_type == "gpt_oss":
        expert += 2 * expert_width + hidden  # gate_up and down biases
    dense_mlp = 3 * hidden * intermediate
    moe_layers = layers - dense_layers if experts else 0
    router = hidden * experts + (experts if model_type == "gpt_oss" else 0)
    moe_mlp = experts * expert + shared * 3 * hidden * expert_width + router
    norms_per_layer = (4 if model_type in FOUR_NORM_TYPES else 2) * hidden
    parameters = (
        embeddings
        + layers * (attention + norms_per_layer)
        + (layers - moe_layers) * dense_mlp
        + moe_layers * moe_mlp
        + hidden  # the final norm
    )
    if model_type.startswith("deepseek") and text.get("num_nextn_predict_layers"):
        notes.append(
            "the multi-token-prediction layer (num_nextn_predict_layers) is not counted: "
            "it is loaded only for speculative decoding"
        )

    quantization = None
    raw_quantization = config.get("quantization_config", text.get("quantization_config"))
    if raw_quantization is not None:
        if not isinstance(raw_quantization, Mapping):
            raise ConfigJsonError("config.json: quantization_config must be an object")
        quantization = scheme_from_quantization_config(raw_quantization)

    try:
        entry = ModelCatalogEntry.model_validate(
            {
                "name": name,
                "parameters": parameters,
                "layers": layers,
                "hidden_size": hidden,
                "attention_heads": heads,
                "kv_heads": kv_heads,
                "head_dim": head_dim,
                "intermediate_size": intermediate,
                "vocab_size": vocab,
                "tied_embeddings": tied,
                "sliding_window": window,
                "experts": experts,
                "experts_per_token": per_token,
                "moe_intermediate_size": moe_width if experts else None,
                "shared_experts": shared,
                "dense_layers": dense_layers,
                "kv_lora_rank": kv_lora,
                "qk_rope_head_dim": rope_dim,
                "layer_types": layer_types,
                "published_precision": published_precision(quantization),
                "source": source,
            }
        )
    except ValueError as exc:
        raise ConfigJsonError(f"config.json: {exc}") from None
    return LoadedConfig(entry.to_spec(), quantization, tuple(notes))


def model_name_for(path: Path) -> str:
    """A model name for a config file: its folder's name for ``config.json``, else its stem."""
    base = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return "".join(c if not c.isspace() else "-" for c in base)[:64] or "config"


def load_config_json(path: Path, *, name: str | None = None) -> LoadedConfig:
    """`model_from_config` of the config.json at `path`; errors name the file."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise ConfigJsonError(f"{path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigJsonError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigJsonError(f"{path}: a config.json is a JSON object")
    data = _with_hf_quant_config(path, data)
    try:
        return model_from_config(
            data, name=name or model_name_for(path), source=f"config.json {path}"
        )
    except ValueError as exc:
        raise ConfigJsonError(f"{path}: {exc}") from None


HF_QUANT_CONFIG = "hf_quant_config.json"
"""ModelOpt's quantization file beside config.json (vLLM's ModelOpt configs read it:
``get_config_filenames``); it declares the scheme when config.json has none."""


def _with_hf_quant_config(path: Path, data: dict[str, object]) -> dict[str, object]:
    """`data` with the ``quantization_config`` a sibling ``hf_quant_config.json``
    declares, when config.json declares none itself."""
    text = data.get("text_config")
    if data.get("quantization_config") is not None or (
        isinstance(text, Mapping) and text.get("quantization_config") is not None
    ):
        return data
    sibling = path.parent / HF_QUANT_CONFIG
    if not sibling.is_file():
        return data
    try:
        raw = json.loads(sibling.read_text("utf-8"))
    except OSError as exc:
        raise ConfigJsonError(f"{sibling}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigJsonError(f"{sibling}: not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigJsonError(f"{sibling}: an hf_quant_config.json is a JSON object")
    try:
        declared = quantization_config_from_hf_quant_config(raw)
    except ValueError as exc:
        raise ConfigJsonError(f"{sibling}: {exc}") from None
    return {**data, "quantization_config": declared}


def catalog_entry_data(data: object) -> object:
    """A ``[[sizing.models]]`` table with ``config_json``, expanded into a full
    `ModelCatalogEntry`'s keys read from that file; other tables unchanged.

    Only ``name`` and ``source`` may stand beside ``config_json``; a config with a
    ``quantization_config`` is refused (a catalog model is an architecture: declare the
    checkpoint in ``[[workloads]]``).
    """
    if not isinstance(data, Mapping) or data.get("config_json") is None:
        return data
    given = sorted(set(data) - {"name", "config_json", "source"})
    if given:
        raise ConfigJsonError(f"config_json gives the architecture: leave out {', '.join(given)}")
    path = Path(str(data["config_json"])).expanduser()
    loaded = load_config_json(path, name=str(data.get("name") or model_name_for(path)))
    if loaded.quantization is not None:
        raise ConfigJsonError(
            f"config_json {path}: its quantization_config ({loaded.quantization.name}) "
            "describes a checkpoint, not the model: give the config.json in [[workloads]] "
            "(config_json) or to gpuwatch size --config-json"
        )
    spec = loaded.spec
    keys = {f.name: getattr(spec, f.name) for f in dataclass_fields(spec)}
    notes = f" ({'; '.join(loaded.notes)})" if loaded.notes else ""
    return keys | {
        "config_json": data["config_json"],
        "source": data.get("source", f"{spec.source}{notes}"),
    }
