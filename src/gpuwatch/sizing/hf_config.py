"""A `ModelSpec` from a Hugging Face ``config.json``.

`model_from_config` reads the schema Transformers writes (``num_hidden_layers``,
``hidden_size``, ``intermediate_size``, ``num_attention_heads``,
``num_key_value_heads``, ``head_dim``, ``vocab_size``, ``tie_word_embeddings``,
``sliding_window``, ``layer_types``, the mixture-of-experts keys
``num_local_experts``/``num_experts``/``n_routed_experts``, ``num_experts_per_tok``,
``moe_intermediate_size``, ``n_shared_experts``, ``first_k_dense_replace``, and
multi-head latent attention's ``kv_lora_rank``, ``q_lora_rank``, ``qk_rope_head_dim``,
``qk_nope_head_dim``, ``v_head_dim``), looking inside ``text_config`` for multimodal
configs (Llama 4, Gemma 3, Mistral Small 3.1, Qwen3-VL). The parameter count is computed
from the config, weight matrix by weight matrix (embeddings, attention with MLA's
projections, MLP or experts, shared experts and router, norms, the biases and q/k norms
the family has, a vision tower where `gpuwatch.sizing.hf_vision` counts one), since a
config does not state it.

What differs between model types (biases, norms, which layers are MoE, the shared
expert's width, defaults for keys a config.json omits) is the family table in
`gpuwatch.sizing.hf_families`; a type it lacks is read by the class its
``architectures`` names (Kimi-K2's ``kimi_k2``: ``DeepseekV3ForCausalLM``). Keys
irrelevant to memory (RoPE, token ids, dropout, initialisation) are ignored; a key that
changes the memory in a way not modelled (cross-attention layers, linear attention, a
shared expert the family lacks) is a `ConfigJsonError` naming it, as are missing,
non-integer, negative or contradictory sizes. A ``quantization_config`` is handed to
`gpuwatch.sizing.quantization_config.scheme_from_quantization_config`.

Multimodal configs without a modelled vision tower (Llama 4, Gemma 3, Mistral Small 3.1)
are sized as their text model, and the result's `notes` say so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path

from gpuwatch.sizing.bounded_json import BoundedJsonError, read_json
from gpuwatch.sizing.config_bounds import check_config_sizes
from gpuwatch.sizing.hf_families import Family, UnknownFamilyError, resolve_family
from gpuwatch.sizing.hf_gemma4 import global_attention
from gpuwatch.sizing.hf_keys import (
    ConfigJsonError,
    boolean,
    first_of,
    integer,
    optional,
    positive,
)
from gpuwatch.sizing.hf_layers import layer_types, moe_layer_count
from gpuwatch.sizing.hf_quant import published_precision, with_hf_quant_config
from gpuwatch.sizing.hf_vision import vision_parameters
from gpuwatch.sizing.models import FULL_ATTENTION, ModelCatalogEntry, ModelSpec
from gpuwatch.sizing.quantization import QuantizationScheme
from gpuwatch.sizing.quantization_config import scheme_from_quantization_config
from gpuwatch.sizing.size_bounds import one_line
from gpuwatch.sizing.state_config import FamilyModel
from gpuwatch.sizing.state_families import read_state_family

__all__ = [
    "ConfigJsonError",
    "LoadedConfig",
    "catalog_entry_data",
    "load_config_json",
    "model_from_config",
    "model_name_for",
]

UNMODELLED: dict[str, object] = {
    "cross_attention_layers": None,
    "linear_attn_config": None,
}
"""Keys that change the memory in a way not modelled: present (and not null) is an error."""

MUST_BE: dict[str, tuple[object, ...]] = {
    "moe_layer_freq": (1,),
    "mlp_bias": (False,),
    # Gemma 4 E2B/E4B: per-layer embeddings, KV shared across layers, a double-wide MLP
    "hidden_size_per_layer_input": (0,),
    "num_kv_shared_layers": (0,),
    "use_double_wide_mlp": (False,),
}
"""Keys whose only modelled values are these (e.g. every layer an MoE layer)."""

LAYER_RULE_KEYS: dict[str, tuple[str, tuple[object, ...]]] = {
    "interleave_moe_layer_step": ("interleave", (1,)),
    "decoder_sparse_step": ("sparse_step", (1,)),
    "mlp_only_layers": ("sparse_step", ((),)),
}
"""Keys a family reads only under its MoE-layer rule; other families accept only these
values (the key's rule, the values)."""

SHARED_WIDTH_KEYS: dict[str, str] = {
    "shared_expert_intermediate_size": "qwen2_moe",
    "shared_intermediate_size": "granite",
}
"""Shared-expert widths only the family with that `SharedExpert` rule reads: elsewhere
only 0 (no shared expert: Qwen3-Coder-480B, MiniMax-M2) is accepted."""

REFUSED: dict[str, str] = {}
"""Model types with a published layout not modelled yet, and why."""


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """What a config.json says: the model, its quantization (None: 16-bit), notes."""

    spec: ModelSpec
    quantization: QuantizationScheme | None
    notes: tuple[str, ...]


def _text_config(config: Mapping[str, object]) -> tuple[dict[str, object], list[str]]:
    """The text model's keys (``text_config`` merged over the top level) and notes."""
    text = config.get("text_config")
    if text is None:
        return dict(config), []
    if not isinstance(text, Mapping):
        raise ConfigJsonError("config.json: text_config must be an object")
    merged = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")}
    merged.update(text)
    return merged, []


def _family(config: Mapping[str, object], text: dict[str, object]) -> tuple[Family, list[str]]:
    """The text model's family, its defaults filled into `text`, and notes."""
    model_type = text.get("model_type")
    if isinstance(model_type, str) and model_type in REFUSED:
        raise ConfigJsonError(
            f"config.json: model_type {model_type!r} is not modelled: {REFUSED[model_type]}"
        )
    try:
        family, note = resolve_family(model_type, config.get("architectures"))
    except UnknownFamilyError as exc:
        raise ConfigJsonError(str(exc)) from None
    for key, value in family.defaults.items():
        if text.get(key) is None:
            text[key] = value
    notes = [] if note is None else [note]
    if family.vision == "none" and config.get("vision_config") is not None:
        notes.append("text model only: the vision_config encoder's weights are not counted")
    return family, notes


def _check_unmodelled(text: Mapping[str, object], family: Family) -> None:
    for key in UNMODELLED:
        if text.get(key) is not None:
            raise ConfigJsonError(f"config.json: {key} changes the memory and is not modelled")
    must = dict(MUST_BE)
    for key, (rule, allowed) in LAYER_RULE_KEYS.items():
        if family.moe_layers != rule:
            must[key] = allowed
    for key, rule in SHARED_WIDTH_KEYS.items():
        if family.shared != rule:
            must[key] = (0,)
    for key, allowed in must.items():
        value = text.get(key)
        if isinstance(value, list):
            value = tuple(value)
        if value is not None and value not in allowed:
            raise ConfigJsonError(
                f"config.json: {key} = {text.get(key)!r} is not modelled for model_type "
                f"{family.model_type!r} (only {', '.join(repr(a) for a in allowed)})"
            )
    if family.qk_norm == "layer" and text.get("qk_norm_type", "per_layer") != "per_layer":
        raise ConfigJsonError(
            f"config.json: qk_norm_type {text.get('qk_norm_type')!r} is not modelled "
            "(only 'per_layer')"
        )


def _attention(
    text: Mapping[str, object], family: Family, hidden: int, heads: int, kv_heads: int
) -> tuple[int, int]:
    """(parameters of one layer's attention, the attention output's head width)."""
    kv_lora = optional(text, "kv_lora_rank")
    if kv_lora is not None:
        rope_dim = optional(text, "qk_rope_head_dim")
        if rope_dim is None:
            raise ConfigJsonError("config.json: kv_lora_rank (MLA) needs qk_rope_head_dim")
        nope = positive(text, "qk_nope_head_dim")
        v_dim = positive(text, "v_head_dim")
        q_rank = optional(text, "q_lora_rank")
        q_head = nope + rope_dim
        query = (
            hidden * heads * q_head
            if q_rank is None
            else hidden * q_rank + q_rank + q_rank * heads * q_head
        )
        latent = hidden * (kv_lora + rope_dim) + kv_lora  # kv_a_proj, kv_a_layernorm
        values = kv_lora * heads * (nope + v_dim) + heads * v_dim * hidden  # kv_b, o
        return query + latent + values, v_dim  # the output is heads x v_head_dim wide
    head_dim = _head_dim(text, hidden, heads)
    q_width, kv_width = heads * head_dim, kv_heads * head_dim
    attention = 2 * hidden * q_width + 2 * hidden * kv_width
    if family.qkv_bias:
        attention += q_width + 2 * kv_width
    elif family.bias_key and boolean(text, family.bias_key, False):
        attention += q_width + 2 * kv_width + (hidden if family.o_bias else 0)
    if family.qk_norm != "none" and (
        not family.qk_norm_key or boolean(text, family.qk_norm_key, False)
    ):
        attention += 2 * head_dim if family.qk_norm == "head" else q_width + kv_width
    if family.gpt_oss:
        attention += heads  # attention sinks, one per head
    return attention, head_dim


def _head_dim(text: Mapping[str, object], hidden: int, heads: int) -> int:
    if text.get("head_dim") is not None:
        return positive(text, "head_dim")
    if hidden % heads:
        raise ConfigJsonError(
            f"config.json: head_dim is missing and hidden_size ({hidden}) is not a "
            f"multiple of num_attention_heads ({heads})"
        )
    return hidden // heads


def _shared(text: Mapping[str, object], family: Family, experts: int) -> tuple[int, int | None]:
    """(shared experts per MoE layer, their width when not the routed experts')."""
    if not experts or family.shared == "none":
        return 0, None
    if family.shared == "count":
        return integer(text, "n_shared_experts", 0), None
    if family.shared == "llama4":
        return 1, None  # one shared expert, as wide as the routed ones
    if family.shared == "dense":
        return 1, positive(text, "intermediate_size")  # the dense MLP beside the experts
    qwen = family.shared == "qwen2_moe"
    key = "shared_expert_intermediate_size" if qwen else "shared_intermediate_size"
    width = integer(text, key, 0)
    return (1, width) if width else (0, None)


def model_from_config(
    config: Mapping[str, object], *, name: str, source: str = "config.json"
) -> LoadedConfig:
    """The `ModelSpec` (parameter count computed) and quantization of a config.json."""
    try:  # layouts whose cache is not a plain KV cache: gpuwatch.sizing.state_families
        state_family = read_state_family(
            config, name=name, source=source, base=_base_reader(source)
        )
    except ValueError as exc:
        raise ConfigJsonError(str(exc)) from None
    if state_family is not None:
        return LoadedConfig(state_family.spec, state_family.quantization, state_family.notes)
    text, notes = _text_config(config)
    family, family_notes = _family(config, text)
    notes += family_notes
    _check_unmodelled(text, family)
    layers = positive(text, "num_hidden_layers")
    hidden = positive(text, "hidden_size")
    heads = positive(text, "num_attention_heads")
    kv_heads = positive(text, "num_key_value_heads", heads)
    if heads % kv_heads:
        raise ConfigJsonError(
            f"config.json: num_key_value_heads ({kv_heads}) must divide "
            f"num_attention_heads ({heads})"
        )
    vocab = positive(text, "vocab_size")
    tied = boolean(text, "tie_word_embeddings", False)
    intermediate = positive(text, "intermediate_size")

    experts_key, experts = first_of(text, "num_local_experts", "num_experts", "n_routed_experts")
    if family.shared == "dense" and not boolean(text, "enable_moe_block", False):
        experts = 0  # Gemma 4 without its MoE block (31B): no experts, whatever num_experts says
    per_token = first_of(text, "num_experts_per_tok", "top_k_experts")[1] if experts else 0
    if experts and not 0 < per_token <= experts:
        raise ConfigJsonError(
            f"config.json: num_experts_per_tok ({per_token}) must be 1 to {experts_key} ({experts})"
        )
    moe_layers = moe_layer_count(text, family, layers) if experts else 0
    if experts and not moe_layers:
        raise ConfigJsonError(f"config.json: {experts_key} is set but no layer is an MoE layer")
    moe_width = (
        optional(text, "moe_intermediate_size")
        if experts and family.expert_width_key == "moe_intermediate_size"
        else None
    )
    dense_width = intermediate
    if moe_layers < layers and family.moe_layers == "interleave":
        # Llama 4 Maverick: dense layers intermediate_size_mlp wide, experts intermediate_size.
        dense_width = positive(text, "intermediate_size_mlp", intermediate)
        moe_width = intermediate if dense_width != intermediate else None
    expert_width = moe_width or dense_width
    shared, shared_width = _shared(text, family, experts)

    kv_lora = optional(text, "kv_lora_rank")
    attention, head_dim = _attention(text, family, hidden, heads, kv_heads)
    rope_dim = optional(text, "qk_rope_head_dim") if kv_lora else None
    kinds, window = layer_types(text, family.model_type, layers)
    attention_total, full_kv = layers * attention, None
    if family.model_type == "gemma4_text":
        global_layers = layers if kinds is None else kinds.count(FULL_ATTENTION)
        full_attention, full_kv = global_attention(text, hidden, heads, kv_heads, head_dim)
        attention_total = (layers - global_layers) * attention + global_layers * full_attention
        attention_total += layers  # layer_scalar, one weight per layer

    # Parameters, matrix by matrix.
    embeddings = vocab * hidden * (1 if tied else 2)
    expert = 3 * hidden * expert_width
    if family.gpt_oss:
        expert += 2 * expert_width + hidden  # gate_up and down biases
    router = hidden * experts + (experts if family.gpt_oss else 0)
    if family.shared == "qwen2_moe" and shared:
        router += hidden  # the shared expert's sigmoid gate (hidden x 1)
    moe_mlp = experts * expert + shared * 3 * hidden * (shared_width or expert_width) + router
    layer = attention + family.norms_per_layer * hidden
    vision = vision_parameters(family.vision, config)
    parameters = (
        embeddings
        + attention_total
        + layers * family.norms_per_layer * hidden
        + (layers - moe_layers) * 3 * hidden * dense_width
        + moe_layers * moe_mlp
        + hidden  # the final norm
        + vision
    )
    if vision:
        notes.append(
            f"the vision tower (vision_config) is counted: {vision:,} parameters, "
            "resident and kept 16-bit"
        )
    mtp = integer(text, family.mtp_key, 0) if family.mtp_key else 0
    if mtp:
        # one more decoder layer each, plus eh_proj (2 hidden x hidden), three norms and
        # the copies of the embedding and LM head DeepSeek-V3's format stores with it
        extra = mtp * (layer + (moe_mlp if experts else 3 * hidden * dense_width))
        extra += mtp * (2 * hidden * hidden + 3 * hidden + 2 * vocab * hidden)
        notes.append(
            f"the multi-token-prediction layers ({family.mtp_key} = {mtp}, about "
            f"{extra / 1e9:.2f}B parameters in the checkpoint's files with their embedding "
            "and head copies) are not counted: they are loaded only for speculative decoding"
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
                "intermediate_size": dense_width,
                "vocab_size": vocab,
                "tied_embeddings": tied,
                "sliding_window": window,
                "experts": experts,
                "experts_per_token": per_token,
                "moe_intermediate_size": moe_width if experts else None,
                "shared_experts": shared,
                "dense_layers": layers - moe_layers if experts else 0,
                "kv_lora_rank": kv_lora,
                "qk_rope_head_dim": rope_dim,
                "layer_types": kinds,
                "published_precision": published_precision(quantization),
                "source": source,
                "shared_expert_intermediate_size": shared_width if shared else None,
                "vision_parameters": vision,
                "full_kv_values_per_layer": full_kv,
            }
        )
    except ValueError as exc:
        raise ConfigJsonError(f"config.json: {one_line(exc)}") from None
    return LoadedConfig(entry.to_spec(), quantization, tuple(notes))


def _base_reader(source: str) -> Callable[[Mapping[str, object]], FamilyModel]:
    def read(config: Mapping[str, object]) -> FamilyModel:
        loaded = model_from_config(config, name="base", source=source)
        return FamilyModel(loaded.spec, loaded.quantization, loaded.notes)

    return read


def model_name_for(path: Path) -> str:
    """A model name for a config file: its folder's name for ``config.json``, else its stem."""
    base = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return "".join(c if not c.isspace() else "-" for c in base)[:64] or "config"


def load_config_json(path: Path, *, name: str | None = None) -> LoadedConfig:
    """`model_from_config` of the config.json at `path`; errors name the file."""
    try:
        data = read_json(path)  # bounded: size, depth (sizing.bounded_json)
    except BoundedJsonError as exc:
        raise ConfigJsonError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigJsonError(f"{path}: a config.json is a JSON object")
    data = with_hf_quant_config(path, data)
    try:
        check_config_sizes(data)
        return model_from_config(
            data, name=name or model_name_for(path), source=f"config.json {path}"
        )
    except ValueError as exc:
        raise ConfigJsonError(f"{path}: {exc}") from None


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
