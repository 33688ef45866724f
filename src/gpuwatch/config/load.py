"""Loading a config: the TOML file, the environment's overrides, validation, and every
error at once, each with its dotted path and who set it (the file or a variable).

Checks against this host (files, directories, addresses) are `gpuwatch.cli.host_checks`'s.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuwatch.config.checks import reference_problems
from gpuwatch.config.env import checked_overrides, env_override_paths, source_of, unknown_variables
from gpuwatch.config.schema import Config
from gpuwatch.config.shape import closest_key


class ConfigError(Exception):
    """A config that cannot be used; `errors` holds one `path: message` line each."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def _format_errors(exc: ValidationError, origin: str, env_paths: Mapping[str, str]) -> list[str]:
    lines = []
    for err in exc.errors():
        path = ".".join(str(part) for part in err["loc"]) or "(top level)"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            closest = closest_key(err["loc"])
            message = "unknown option (check the spelling against config.example.toml)" + (
                f"; did you mean {closest}?" if closest else ""
            )
        lines.append(f"{path}: {message} [{source_of(path, origin, env_paths)}]")
    return lines


@dataclass(frozen=True)
class Validation:
    """The outcome of validating a config: every error, and a config to check further.

    `config` holds the valid sections as given and the invalid ones at their defaults;
    `bad_sections` names the top-level keys that had errors (their checks are skipped).
    """

    config: Config
    errors: list[str]
    bad_sections: frozenset[str]
    origin: str
    env_paths: Mapping[str, str]

    def source(self, path: str) -> str:
        """The file or variable that set the option at dotted `path`."""
        return source_of(path, self.origin, self.env_paths)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError([f"{path}: no such file"]) from None
    except IsADirectoryError:
        raise ConfigError([f"{path}: is a directory, not a file"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None
    except UnicodeDecodeError:
        raise ConfigError([f"{path}: not UTF-8 text"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{path}: not valid TOML: {exc}"]) from None


def validate_config(path: Path | None, environ: Mapping[str, str] | None = None) -> Validation:
    """Validate the config at `path` (defaults when None) plus env overrides: field
    errors, override errors and cross-field errors together, each with its dotted path.

    Raises ConfigError only when the file cannot be read or parsed at all.
    """
    env = os.environ if environ is None else environ
    data = {} if path is None else _read_toml(path)
    origin = "defaults" if path is None else str(path)
    env_paths = env_override_paths(env)
    data, errors = checked_overrides(data, env)
    bad = {line.split(".", 1)[0].split(":", 1)[0] for line in errors}
    errors += unknown_variables(env)  # blamed on a variable, not on a section
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        errors += _format_errors(exc, origin, env_paths)
        bad |= {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
        if any(not err["loc"] for err in exc.errors()):
            return Validation(Config(), errors, frozenset(Config.model_fields), origin, env_paths)
        good = {k: v for k, v in data.items() if k not in bad}
        config = Config.model_validate(good)
    for line in reference_problems(config, skip=bad):
        field = line.split(":", 1)[0]
        errors.append(f"{line} [{source_of(field, origin, env_paths)}]")
        bad.add(field.split(".", 1)[0])
    return Validation(config, errors, frozenset(bad), origin, env_paths)


def load_config(path: Path | None, environ: Mapping[str, str] | None = None) -> Config:
    """Load and validate the config at `path` (defaults when None) plus env overrides.

    Raises ConfigError listing every problem, each with its dotted path. Checks against
    this host (files, directories, addresses) are `gpuwatch.cli.host_checks`'s.
    """
    result = validate_config(path, environ)
    if result.errors:
        raise ConfigError(result.errors)
    return result.config
