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

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

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


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer: its size and the shapes the memory model needs.

    `kv_heads` below `attention_heads` is grouped-query attention (GQA): only
    `kv_heads` key/value heads are cached per layer. `intermediate_size` is the MLP
    width, `gated_mlp` a SwiGLU MLP (gate, up and down projections; else up and down),
    `vocab_size` the vocabulary, `tied_embeddings` an LM head sharing the input
    embedding, `sliding_window` the tokens each layer attends to (None: all); None in
    `intermediate_size` or `vocab_size` takes the defaults named in `assumed`.
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

    def kv_cache_tokens(self, context_tokens: int) -> int:
        """Tokens cached per sequence: the context, at most the sliding window."""
        if self.sliding_window is None:
            return context_tokens
        return min(context_tokens, self.sliding_window)

    def kv_cache_bytes_per_token(self, bytes_per_value: float) -> float:
        """Bytes of K and V one token adds: 2 x layers x kv_heads x head_dim x bytes."""
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value

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
    `ModelSpec`'s documented defaults (and the output says so).
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
    source: str = CONFIG_SOURCE

    @model_validator(mode="after")
    def _heads_consistent(self) -> ModelCatalogEntry:
        kv_heads = self.kv_heads or self.attention_heads
        if self.attention_heads % kv_heads:
            raise ValueError(
                f"kv_heads ({kv_heads}) must divide attention_heads ({self.attention_heads})"
            )
        if self.head_dim is None and self.hidden_size % self.attention_heads:
            raise ValueError("head_dim is needed: hidden_size is not a multiple of attention_heads")
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
