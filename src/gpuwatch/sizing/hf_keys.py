"""Reading a config.json's sizes: integers and flags, each error naming its key.

`ConfigJsonError` is the one error of the config.json loader (`gpuwatch.sizing.hf_config`
re-exports it); the readers here turn a missing, null, non-integer or negative value
into it, naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping


class ConfigJsonError(ValueError):
    """A config.json gpuwatch cannot size; the message names the field."""


def integer(config: Mapping[str, object], key: str, default: int | None = None) -> int:
    """``config[key]`` as a non-negative integer; absent or null takes `default`."""
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


def positive(config: Mapping[str, object], key: str, default: int | None = None) -> int:
    """`integer`, and above 0."""
    value = integer(config, key, default)
    if value == 0:
        raise ConfigJsonError(f"config.json: {key} must be positive, got 0")
    return value


def optional(config: Mapping[str, object], key: str) -> int | None:
    """`positive`, or None when absent or null."""
    return None if config.get(key) is None else positive(config, key)


def boolean(config: Mapping[str, object], key: str, default: bool) -> bool:
    """``config[key]`` as true or false; absent takes `default`."""
    value = config.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigJsonError(f"config.json: {key} must be true or false, not {value!r}")
    return value


def first_of(config: Mapping[str, object], *keys: str) -> tuple[str, int]:
    """The first of `keys` present and not null, as (key, value); ("", 0) if none."""
    for key in keys:
        if config.get(key) is not None:
            return key, integer(config, key)
    return "", 0


def section(config: Mapping[str, object], key: str) -> Mapping[str, object] | None:
    """``config[key]`` as an object (None when absent or null)."""
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigJsonError(f"config.json: {key} must be an object")
    return value
