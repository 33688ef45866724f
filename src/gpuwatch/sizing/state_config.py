"""What the readers of layouts with a non-KV cache share (`state_families` dispatches).

Small config.json key readers that name the key in every error (`StateConfigError`, a
`ValueError` hf_config turns into its `ConfigJsonError`), the `FamilyModel` a family
reader returns, and `build`, which validates the fields through `ModelCatalogEntry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpuwatch.sizing.models import ModelCatalogEntry, ModelSpec
from gpuwatch.sizing.quantization import QuantizationScheme
from gpuwatch.sizing.quantization_config import scheme_from_quantization_config


class StateConfigError(ValueError):
    """A config.json of these families that cannot be sized; the message names the key."""


@dataclass(frozen=True, slots=True)
class FamilyModel:
    """What a family reader makes of a config.json: the model, its quantization, notes."""

    spec: ModelSpec
    quantization: QuantizationScheme | None
    notes: tuple[str, ...]


BaseReader = Callable[[Mapping[str, object]], FamilyModel]
"""The plain reader (hf_config's), for a family that extends a layout it knows."""

FamilyReader = Callable[[Mapping[str, object], str, str, BaseReader], FamilyModel]
"""A family reader: (config, name, source, the plain reader) -> the model."""


def integer(config: Mapping[str, object], key: str, default: int | None = None) -> int:
    """`config[key]` as a non-negative integer (absent or null: `default`)."""
    value = config.get(key)
    if value is None:
        value = default
    if value is None:
        raise StateConfigError(f"config.json: {key} is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise StateConfigError(f"config.json: {key} must be an integer, not {value!r}")
    if value < 0:
        raise StateConfigError(f"config.json: {key} must not be negative, got {value}")
    return value


def positive(config: Mapping[str, object], key: str, default: int | None = None) -> int:
    """`config[key]` as a positive integer."""
    value = integer(config, key, default)
    if value == 0:
        raise StateConfigError(f"config.json: {key} must be positive, got 0")
    return value


def flag(config: Mapping[str, object], key: str, default: bool) -> bool:
    """`config[key]` as true or false (absent or null: `default`)."""
    value = config.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise StateConfigError(f"config.json: {key} must be true or false, not {value!r}")
    return value


def quantization_of(config: Mapping[str, object]) -> QuantizationScheme | None:
    """The config's ``quantization_config`` as a scheme (None: none)."""
    raw = config.get("quantization_config")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise StateConfigError("config.json: quantization_config must be an object")
    return scheme_from_quantization_config(raw)


def build(
    config: Mapping[str, object], fields: Mapping[str, object], notes: list[str]
) -> FamilyModel:
    """A `FamilyModel` from `ModelCatalogEntry` fields (validated) and the config."""
    try:
        entry = ModelCatalogEntry.model_validate(fields)
    except ValueError as exc:
        raise StateConfigError(f"config.json: {exc}") from None
    return FamilyModel(entry.to_spec(), quantization_of(config), tuple(notes))
