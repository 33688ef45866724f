"""The model catalog: parameter counts and the architecture figures the KV cache needs.

Built-in models live in the package data file ``models.toml`` (each naming the
config.json it comes from); `ModelCatalogEntry` is the same schema as a pydantic model so
the agent config can add models, and `build_model_catalog` merges both into a
`ModelCatalog` of `ModelSpec`. Names are matched case-insensitively.
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


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A transformer's size and the attention shape that sets its KV cache.

    `kv_heads` below `attention_heads` is grouped-query attention (GQA): only
    `kv_heads` key/value heads are cached per layer.
    """

    name: str
    parameters: int
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    source: str = CONFIG_SOURCE

    def kv_cache_bytes_per_token(self, bytes_per_value: float) -> float:
        """Bytes of K and V one token adds: 2 x layers x kv_heads x head_dim x bytes."""
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value


class ModelCatalogEntry(BaseModel):
    """One model as written in ``models.toml`` or in the agent config.

    `kv_heads` defaults to `attention_heads` (no GQA) and `head_dim` to
    `hidden_size / attention_heads`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^\S+$")
    parameters: int = Field(gt=0)
    layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    attention_heads: int = Field(gt=0)
    kv_heads: int | None = Field(default=None, gt=0)
    head_dim: int | None = Field(default=None, gt=0)
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
