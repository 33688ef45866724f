"""The model catalog: parameter counts and the architecture the memory model needs.

Built-in models live in the package data file ``models.toml`` (each naming the
config.json it comes from); `ModelCatalogEntry` is the same schema as a pydantic model so
the agent config can add models, and `build_model_catalog` merges both into a
`ModelCatalog` of `ModelSpec`. Names are matched case-insensitively. The KV cache needs
the attention shape (layers, KV heads, head dim, sliding window); training activations
need layers and hidden size; LoRA adapters the projection shapes (intermediate size);
QLoRA which weights stay 16-bit (vocabulary, tied embeddings).
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpuwatch.sizing.size_bounds import SIZE_BOUNDS, check_size_bounds

CONFIG_SOURCE = "agent config"


class UnknownModelError(KeyError):
    """`ModelCatalog.get` of a name the catalog lacks; the message lists the known names."""

    def __str__(self) -> str:
        return str(self.args[0])


DEFAULT_VOCAB_SIZE = 32000
"""Vocabulary assumed when a model does not give one: Llama 1/2's and Mistral-7B's."""

LLAMA_MLP_MULTIPLE = 256
"""Llama's reference code rounds the SwiGLU width 8/3 x hidden up to a multiple of 256."""


def default_intermediate_size(hidden_size: int, *, gated: bool = True) -> int:
    """The MLP width a model without one gets: Llama's rule for a gated (SwiGLU) MLP,
    ``256 x ceil(int(8 x hidden / 3) / 256)`` (4096 -> 11008), else GPT's 4 x hidden."""
    if not gated:
        return 4 * hidden_size
    width = 8 * hidden_size // 3
    return -(-width // LLAMA_MLP_MULTIPLE) * LLAMA_MLP_MULTIPLE


PublishedPrecision = Literal[
    "fp32",
    "fp16",
    "bf16",
    "fp8",
    "int8",
    "int4",
    "awq-int4",
    "gptq-int4",
    "mxfp4",
    "nvfp4",
    "nf4",
    "bnb-int8",
]
"""What a model's published checkpoint stores its weights in: a storage precision or a
checkpoint layout `gpuwatch size --precision` takes (`quantization.SCHEMES`)."""

FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"
LayerType = Literal["full_attention", "sliding_attention"]
"""A layer's attention as config.json's ``layer_types`` names it."""


def check_moe_fields(
    *, layers: int, experts: int, experts_per_token: int, dense_layers: int
) -> None:
    """Raise ValueError naming the field when the MoE fields contradict each other."""
    if experts == 0:
        if experts_per_token or dense_layers:
            raise ValueError("experts_per_token and dense_layers need experts (MoE) > 0")
        return
    if not 0 < experts_per_token <= experts:
        raise ValueError(
            f"experts_per_token ({experts_per_token}) must be 1 to experts ({experts})"
        )
    if dense_layers >= layers:
        raise ValueError(f"dense_layers ({dense_layers}) must be below layers ({layers})")


def check_cache_fields(
    *, layers: int, kv_layers: int | None, state_layers: int, state_values: int, sliding: bool
) -> None:
    """Raise ValueError naming the field when the cache fields contradict each other."""
    cached = layers if kv_layers is None else kv_layers
    if cached + state_layers > layers:
        raise ValueError(
            f"kv_layers ({cached}) and state_layers ({state_layers}) exceed layers ({layers})"
        )
    if (state_layers > 0) != (state_values > 0):
        raise ValueError("state_layers and conv_state_values/recurrent_state_values come together")
    if kv_layers is not None and sliding:
        raise ValueError("kv_layers with a sliding_window is not modelled")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer: its size and the shapes the memory model needs.

    `kv_heads` below `attention_heads` is grouped-query attention (GQA): only
    `kv_heads` key/value heads are cached per layer. `intermediate_size` is the MLP
    width, `gated_mlp` a SwiGLU MLP (gate, up and down projections; else up and down),
    `vocab_size` the vocabulary, `tied_embeddings` an LM head sharing the input
    embedding, `sliding_window` the tokens each layer attends to (None: all); None in
    `intermediate_size` or `vocab_size` takes the defaults named in `assumed`.

    Mixture of experts: `experts` routed experts per MoE layer (0: dense), of which
    `experts_per_token` run per token, each an MLP `moe_intermediate_size` wide (None:
    `intermediate_size`); `shared_experts` run for every token; the first
    `dense_layers` layers (config.json's ``first_k_dense_replace``) have a dense MLP of
    `intermediate_size`. Multi-head latent attention (DeepSeek V2/V3): `kv_lora_rank`
    and `qk_rope_head_dim` set, the cache holds their sum per layer per token.
    `layer_types` names each layer's attention ("full_attention" or
    "sliding_attention", the latter caching at most `sliding_window` tokens); None
    with a `sliding_window` means every layer slides. `published_precision`: the
    precision or checkpoint layout (a `PublishedPrecision` name) the model's own
    checkpoint is published in, when not 16-bit: inference sizes it so by default.
    `dense_layers` counts the layers
    with a dense MLP wherever they are (the first ones in DeepSeek and GLM, every other
    one in Llama 4 Maverick). `shared_expert_intermediate_size`: the shared experts'
    width when it differs from the routed ones' (Qwen2-MoE, Granite MoE shared; None:
    `expert_size`). `vision_parameters`: the part of `parameters` in a vision tower
    beside the text model (Qwen2.5-VL, Qwen3-VL): resident, kept 16-bit by a
    quantization scheme, run only on images.
    `full_kv_values_per_layer`: the values one token adds to a
    full-attention layer's cache when those layers' attention differs from the sliding
    ones' (Gemma 4: global head_dim 512 with 4 KV heads; None: `kv_values_per_layer`).

    Caches that are not a plain per-token KV cache (docs/sizing.md, "Caches that are
    not a KV cache"): only `kv_layers` layers (None: all) cache K and V per token;
    `state_layers` layers (linear attention, Mamba-2) keep instead a fixed state per
    sequence of `conv_state_values` (the short convolution's last inputs) plus
    `recurrent_state_values` (the recurrent or SSM state), in the model's dtype, the
    recurrent part at `recurrent_state_bytes` per value when the model says so (None:
    the model's dtype). `indexer_bytes_per_token` is DeepSeek sparse attention's
    lightning-indexer key cache per token per KV layer (FP8 keys and FP32 scales,
    whatever the KV cache's dtype).
    """

    name: str
    parameters: int
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    source: str = CONFIG_SOURCE
    intermediate_size: int | None = None
    vocab_size: int | None = None
    tied_embeddings: bool = False
    gated_mlp: bool = True
    sliding_window: int | None = None
    experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int | None = None
    shared_experts: int = 0
    dense_layers: int = 0
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    layer_types: tuple[str, ...] | None = None
    shared_expert_intermediate_size: int | None = None
    vision_parameters: int = 0
    full_kv_values_per_layer: int | None = None
    kv_layers: int | None = None
    state_layers: int = 0
    conv_state_values: int = 0
    recurrent_state_values: int = 0
    recurrent_state_bytes: float | None = None
    indexer_bytes_per_token: int = 0
    published_precision: str | None = None

    @property
    def is_moe(self) -> bool:
        """Whether the MLPs are mixtures of routed experts (`experts` > 0)."""
        return self.experts > 0

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts: all but the `dense_layers`."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def expert_size(self) -> int:
        """One expert's MLP width: `moe_intermediate_size`, else `mlp_size`."""
        if self.moe_intermediate_size is not None:
            return self.moe_intermediate_size
        return self.mlp_size

    @property
    def shared_expert_size(self) -> int:
        """One shared expert's MLP width: `shared_expert_intermediate_size`, else
        `expert_size`."""
        if self.shared_expert_intermediate_size is not None:
            return self.shared_expert_intermediate_size
        return self.expert_size

    @property
    def parameters_per_expert(self) -> int:
        """Weights of one expert's MLP: (3 if gated else 2) x hidden x expert width."""
        return (3 if self.gated_mlp else 2) * self.hidden_size * self.expert_size

    @property
    def expert_parameters(self) -> int:
        """All routed experts' MLP weights over the MoE layers (0 for a dense model).

        Shared experts and the router (hidden x experts per layer) run for every token
        and are not counted here.
        """
        return self.moe_layers * self.experts * self.parameters_per_expert

    @property
    def router_parameters(self) -> int:
        """The routers' weights: hidden x experts per MoE layer."""
        return self.moe_layers * self.hidden_size * self.experts

    @property
    def active_parameters(self) -> int:
        """Parameters one token uses: all but the routed experts it is not sent to.

        `parameters` minus (experts - experts_per_token) experts per MoE layer and
        minus a vision tower (`vision_parameters`: it runs on images, not on a text
        token); the shared experts, router, attention, embeddings and norms all count.
        Equal to `parameters` for a dense text model.
        """
        unused = self.moe_layers * (self.experts - self.experts_per_token)
        return self.parameters - unused * self.parameters_per_expert - self.vision_parameters

    @property
    def mlp_size(self) -> int:
        """`intermediate_size`, else `default_intermediate_size`."""
        if self.intermediate_size is not None:
            return self.intermediate_size
        return default_intermediate_size(self.hidden_size, gated=self.gated_mlp)

    @property
    def vocabulary(self) -> int:
        """`vocab_size`, else `DEFAULT_VOCAB_SIZE`."""
        return self.vocab_size if self.vocab_size is not None else DEFAULT_VOCAB_SIZE

    @property
    def assumed(self) -> tuple[str, ...]:
        """What this spec takes by default rather than from the model's config."""
        notes = []
        if self.intermediate_size is None:
            rule = "Llama's 8/3 rule" if self.gated_mlp else "4 x hidden"
            notes.append(f"MLP width {self.mlp_size} ({rule})")
        if self.vocab_size is None:
            notes.append(f"vocabulary {self.vocabulary} (Llama 2's)")
        return tuple(notes)

    @property
    def is_mla(self) -> bool:
        """Whether attention is multi-head latent attention (DeepSeek V2/V3)."""
        return self.kv_lora_rank is not None

    @property
    def sliding_layers(self) -> int:
        """Layers that attend to (and cache) at most `sliding_window` tokens.

        Those `layer_types` names "sliding_attention"; without `layer_types`, every
        layer when there is a `sliding_window`, else none.
        """
        if self.sliding_window is None:
            return 0
        if self.layer_types is None:
            return self.layers
        return sum(kind == SLIDING_ATTENTION for kind in self.layer_types)

    @property
    def kv_layer_count(self) -> int:
        """Layers that cache keys and values per token: `kv_layers`, else all."""
        return self.layers if self.kv_layers is None else self.kv_layers

    @property
    def full_layers(self) -> int:
        """Layers that attend to (and cache) the whole context."""
        return self.kv_layer_count - self.sliding_layers

    @property
    def has_state(self) -> bool:
        """Whether some layers keep a fixed-size state per sequence (linear attention,
        Mamba-2) instead of a per-token KV cache."""
        return self.state_layers > 0

    def state_bytes_per_sequence(self, bytes_per_value: float) -> float:
        """Bytes of one sequence's fixed state over the `state_layers`, whatever its
        context: per layer `conv_state_values` x `bytes_per_value` (the model's dtype)
        + `recurrent_state_values` x (`recurrent_state_bytes` or `bytes_per_value`)."""
        recurrent = self.recurrent_state_bytes or bytes_per_value
        per_layer = (
            self.conv_state_values * bytes_per_value + self.recurrent_state_values * recurrent
        )
        return self.state_layers * per_layer

    @property
    def kv_values_per_layer(self) -> int:
        """Values one token adds to one layer's cache.

        Multi-head latent attention caches the compressed KV latent and the shared
        RoPE key: kv_lora_rank + qk_rope_head_dim (DeepSeek-V3: 512 + 64 = 576), with
        no KV-head factor; else K and V per KV head: 2 x kv_heads x head_dim.
        """
        if self.kv_lora_rank is not None:
            return self.kv_lora_rank + (self.qk_rope_head_dim or 0)
        return 2 * self.kv_heads * self.head_dim

    def kv_cache_tokens(self, context_tokens: int) -> int:
        """Tokens cached per sequence by the layers that cache the most: the context,
        at most the sliding window when every layer slides."""
        if self.sliding_window is None or self.full_layers:
            return context_tokens
        return min(context_tokens, self.sliding_window)

    @property
    def full_layer_kv_values(self) -> int:
        """Values one token adds to one full-attention layer's cache:
        `full_kv_values_per_layer`, else `kv_values_per_layer`."""
        if self.full_kv_values_per_layer is not None:
            return self.full_kv_values_per_layer
        return self.kv_values_per_layer

    def kv_cache_bytes_per_token(self, bytes_per_value: float) -> float:
        """Bytes one token adds to the cache of all layers (while within the window):
        Full layers add `full_layer_kv_values`, sliding ones `kv_values_per_layer` (K and
        V, x bytes per value), each KV layer `indexer_bytes_per_token` more; layers with a
        fixed state (`state_layers`) add nothing per token."""
        values = (
            self.full_layers * self.full_layer_kv_values
            + self.sliding_layers * self.kv_values_per_layer
        )
        return values * bytes_per_value + self.kv_layer_count * self.indexer_bytes_per_token

    def kv_cache_bytes_per_sequence(
        self,
        context_tokens: int,
        bytes_per_value: float,
        state_bytes_per_value: float | None = None,
    ) -> float:
        """Bytes of one sequence's cache at `context_tokens`, layer type by layer type:
        full layers cache the context (`full_layer_kv_values` per token), sliding layers at
        most `sliding_window` tokens (`kv_values_per_layer`), at `bytes_per_value`, plus the
        indexer's keys per cached token, and state layers their fixed state
        (`state_bytes_per_sequence` at `state_bytes_per_value`, the model's dtype; None:
        `bytes_per_value`)."""
        full = self.full_layers * context_tokens
        sliding = 0
        if self.sliding_window is not None:
            sliding = self.sliding_layers * min(context_tokens, self.sliding_window)
        values = full * self.full_layer_kv_values + sliding * self.kv_values_per_layer
        state = self.state_bytes_per_sequence(
            bytes_per_value if state_bytes_per_value is None else state_bytes_per_value
        )
        return values * bytes_per_value + (full + sliding) * self.indexer_bytes_per_token + state

    @property
    def embedding_parameters(self) -> int:
        """Input embedding plus an untied LM head: vocabulary x hidden, once or twice."""
        return self.vocabulary * self.hidden_size * (1 if self.tied_embeddings else 2)

    @property
    def norm_parameters(self) -> int:
        """Norm weights: two per layer and a final one, hidden each."""
        return (2 * self.layers + 1) * self.hidden_size


class ModelCatalogEntry(BaseModel):
    """One model as written in ``models.toml`` or in the agent config.

    `kv_heads` defaults to `attention_heads` (no GQA) and `head_dim` to
    `hidden_size / attention_heads`; `intermediate_size` and `vocab_size` left out take
    `ModelSpec`'s documented defaults (and the output says so). `config_json` records the
    Hugging Face config.json the other keys were read from: the agent config expands an
    entry giving it with `gpuwatch.sizing.hf_config.catalog_entry_data`.
    `published_precision` names how the model's own checkpoint is published when not
    16-bit (gpt-oss: mxfp4, DeepSeek-V3: fp8): inference sizes it so unless a precision
    is given.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=64, pattern=r"^\S+$")
    parameters: int = Field(gt=0)
    layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    attention_heads: int = Field(gt=0)
    kv_heads: int | None = Field(default=None, gt=0)
    head_dim: int | None = Field(default=None, gt=0)
    intermediate_size: int | None = Field(default=None, gt=0)
    vocab_size: int | None = Field(default=None, gt=0)
    tied_embeddings: bool = False
    gated_mlp: bool = True
    sliding_window: int | None = Field(default=None, gt=0)
    experts: int = Field(default=0, ge=0)
    experts_per_token: int = Field(default=0, ge=0)
    moe_intermediate_size: int | None = Field(default=None, gt=0)
    shared_experts: int = Field(default=0, ge=0)
    dense_layers: int = Field(default=0, ge=0)
    kv_lora_rank: int | None = Field(default=None, gt=0)
    qk_rope_head_dim: int | None = Field(default=None, gt=0)
    layer_types: tuple[LayerType, ...] | None = None
    published_precision: PublishedPrecision | None = None
    source: str = CONFIG_SOURCE
    config_json: str | None = Field(default=None, min_length=1, max_length=4096)
    shared_expert_intermediate_size: int | None = Field(default=None, gt=0)
    vision_parameters: int = Field(default=0, ge=0)
    full_kv_values_per_layer: int | None = Field(default=None, gt=0)
    kv_layers: int | None = Field(default=None, ge=0)
    state_layers: int = Field(default=0, ge=0)
    conv_state_values: int = Field(default=0, ge=0)
    recurrent_state_values: int = Field(default=0, ge=0)
    recurrent_state_bytes: float | None = Field(default=None, gt=0, le=8)
    indexer_bytes_per_token: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _heads_consistent(self) -> ModelCatalogEntry:
        check_size_bounds({name: getattr(self, name) for name in SIZE_BOUNDS})
        kv_heads = self.kv_heads or self.attention_heads
        if self.attention_heads % kv_heads:
            raise ValueError(
                f"kv_heads ({kv_heads}) must divide attention_heads ({self.attention_heads})"
            )
        if self.head_dim is None and self.hidden_size % self.attention_heads:
            raise ValueError("head_dim is needed: hidden_size is not a multiple of attention_heads")
        check_moe_fields(
            layers=self.layers,
            experts=self.experts,
            experts_per_token=self.experts_per_token,
            dense_layers=self.dense_layers,
        )
        if self.vision_parameters >= self.parameters:
            raise ValueError(
                f"vision_parameters ({self.vision_parameters}) must be below parameters "
                f"({self.parameters})"
            )
        if self.shared_expert_intermediate_size is not None and not self.shared_experts:
            raise ValueError("shared_expert_intermediate_size needs shared_experts > 0")
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise ValueError("kv_lora_rank and qk_rope_head_dim (MLA) come together")
        if self.layer_types is not None and len(self.layer_types) != self.layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries for {self.layers} layers"
            )
        if (
            self.layer_types is not None
            and SLIDING_ATTENTION in self.layer_types
            and self.sliding_window is None
        ):
            raise ValueError("layer_types has sliding_attention layers but no sliding_window")
        check_cache_fields(
            layers=self.layers,
            kv_layers=self.kv_layers,
            state_layers=self.state_layers,
            state_values=self.conv_state_values + self.recurrent_state_values,
            sliding=self.sliding_window is not None,
        )
        return self

    def to_spec(self) -> ModelSpec:
        """This entry with its defaults filled in."""
        return ModelSpec(
            name=self.name,
            parameters=self.parameters,
            layers=self.layers,
            hidden_size=self.hidden_size,
            attention_heads=self.attention_heads,
            kv_heads=self.kv_heads or self.attention_heads,
            head_dim=self.head_dim or self.hidden_size // self.attention_heads,
            source=self.source,
            intermediate_size=self.intermediate_size,
            vocab_size=self.vocab_size,
            tied_embeddings=self.tied_embeddings,
            gated_mlp=self.gated_mlp,
            sliding_window=self.sliding_window,
            experts=self.experts,
            experts_per_token=self.experts_per_token,
            moe_intermediate_size=self.moe_intermediate_size,
            shared_experts=self.shared_experts,
            dense_layers=self.dense_layers,
            kv_lora_rank=self.kv_lora_rank,
            qk_rope_head_dim=self.qk_rope_head_dim,
            layer_types=self.layer_types,
            shared_expert_intermediate_size=self.shared_expert_intermediate_size,
            vision_parameters=self.vision_parameters,
            full_kv_values_per_layer=self.full_kv_values_per_layer,
            kv_layers=self.kv_layers,
            state_layers=self.state_layers,
            conv_state_values=self.conv_state_values,
            recurrent_state_values=self.recurrent_state_values,
            recurrent_state_bytes=self.recurrent_state_bytes,
            indexer_bytes_per_token=self.indexer_bytes_per_token,
            published_precision=self.published_precision,
        )


class ModelCatalog:
    """An ordered, read-only set of `ModelSpec`, looked up by name (case-insensitive)."""

    __slots__ = ("_by_name", "_models")

    def __init__(self, models: Iterable[ModelSpec]) -> None:
        self._by_name = {model.name.casefold(): model for model in models}
        self._models = tuple(self._by_name.values())

    def __iter__(self) -> Iterator[ModelSpec]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.casefold() in self._by_name

    @property
    def names(self) -> tuple[str, ...]:
        """The names in catalog order."""
        return tuple(model.name for model in self._models)

    def get(self, name: str) -> ModelSpec:
        """The model with this name (case-insensitive); raises `UnknownModelError`."""
        try:
            return self._by_name[name.casefold()]
        except KeyError:
            raise UnknownModelError(
                f"unknown model {name!r}; known: {', '.join(self.names)}"
            ) from None


@functools.cache
def builtin_model_entries() -> tuple[ModelCatalogEntry, ...]:
    """The entries of the packaged ``models.toml``, in file order."""
    text = resources.files("gpuwatch.sizing").joinpath("models.toml").read_text("utf-8")
    entries = []
    for key, table in tomllib.loads(text).items():
        try:
            entries.append(ModelCatalogEntry.model_validate({"name": key, **table}))
        except ValidationError as exc:  # a packaging bug, not a user error
            raise RuntimeError(f"models.toml [{key}] is invalid: {exc}") from exc
    return tuple(entries)


def build_model_catalog(extra: Sequence[ModelCatalogEntry] = ()) -> ModelCatalog:
    """The built-in models plus `extra`; an extra entry with a known name replaces it."""
    entries = {entry.name.casefold(): entry for entry in builtin_model_entries()}
    for entry in extra:
        entries[entry.name.casefold()] = entry
    return ModelCatalog(entry.to_spec() for entry in entries.values())
