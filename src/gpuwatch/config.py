"""Configuration: the TOML file, `GPUWATCH_<SECTION>__<KEY>` overrides, validation.

Every section is a pydantic model that forbids unknown keys, so a typo is an error
with its dotted path (`exporter.listen: ...`) instead of a silently ignored option.
Secrets are never config text: they are read from files named here or from the
environment, and never logged. `config.example.toml` documents every option.
"""

from __future__ import annotations

import json
import os
import ssl
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpuwatch.alerts.config import AlertsConfig
from gpuwatch.billing import BillingConfig
from gpuwatch.sizing import (
    CatalogError,
    GpuCatalogEntry,
    ModelCatalogEntry,
    UnknownModelError,
    build_gpu_catalog,
    build_model_catalog,
)
from gpuwatch.tco import RentVsBuyConfig
from gpuwatch.tokens import TokenSources
from gpuwatch.workloads import WorkloadDeclaration, declared_workload

DEFAULT_PORT = 9842
"""Default listen port: clashes with neither dcgm-exporter (9400) nor nvidia_gpu_exporter (9835)."""

ENV_PREFIX = "GPUWATCH_"


class ConfigError(Exception):
    """A config that cannot be used; `errors` holds one `path: message` line each."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def parse_listen_address(value: str) -> tuple[str, int]:
    """Split `HOST:PORT` (or `[V6]:PORT`) into host and port; raises ValueError."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is outside 0-65535")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 - an exporter listens on all interfaces by default
    return host, port


class AgentConfig(_Section):
    """[agent]: sampling and local state."""

    interval_seconds: float = Field(default=1.0, ge=0.05, le=60.0)
    slow_interval_seconds: float = Field(default=15.0, ge=1.0, le=3600.0)
    state_dir: Path = Path("/var/lib/gpuwatch")
    hostname: str | None = None
    per_process_metrics: bool = False
    nvml_retry_max_seconds: float = Field(default=60.0, ge=1.0, le=3600.0)


class ExporterConfig(_Section):
    """[exporter]: the Prometheus endpoint."""

    listen: str = f"0.0.0.0:{DEFAULT_PORT}"
    dcgm_compat: bool = False
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    basic_auth_username: str | None = None
    basic_auth_password_file: Path | None = None

    @field_validator("listen")
    @classmethod
    def _valid_listen(cls, value: str) -> str:
        parse_listen_address(value)
        return value

    @model_validator(mode="after")
    def _pairs_complete(self) -> ExporterConfig:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file must be set together")
        if (self.basic_auth_username is None) != (self.basic_auth_password_file is None):
            raise ValueError(
                "basic_auth_username and basic_auth_password_file must be set together"
            )
        return self


class AnalysisConfig(_Section):
    """[analysis]: when a GPU counts as idle, held, underutilized or overprovisioned."""

    window_seconds: float = Field(default=1800.0, ge=60.0, le=7 * 86400.0)
    noise_floor_ratio: float = Field(default=0.01, ge=0.0, le=1.0)
    underutilized_below_ratio: float = Field(default=0.25, ge=0.0, le=1.0)
    underutilized_hysteresis_ratio: float = Field(default=0.05, ge=0.0, le=1.0)
    resolve_after_seconds: float = Field(default=60.0, ge=0.0)
    power_veto_watts: float | None = Field(default=None, gt=0.0)
    lookback_seconds: float = Field(default=86400.0, ge=60.0, le=90 * 86400.0)
    headroom_ratio: float = Field(default=0.1, ge=0.0, le=2.0)
    evaluation_interval_seconds: float = Field(default=10.0, ge=1.0, le=3600.0)


class SizingConfig(_Section):
    """[sizing]: your own GPUs (negotiated prices, on-prem parts) and models."""

    gpus: list[GpuCatalogEntry] = []
    models: list[ModelCatalogEntry] = []


class LoggingConfig(_Section):
    """[logging]: where the one line per failure goes."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["text", "json"] = "text"


class Config(_Section):
    """The whole agent configuration."""

    agent: AgentConfig = AgentConfig()
    exporter: ExporterConfig = ExporterConfig()
    logging: LoggingConfig = LoggingConfig()
    analysis: AnalysisConfig = AnalysisConfig()
    sizing: SizingConfig = SizingConfig()
    alerts: AlertsConfig = AlertsConfig()
    rent_vs_buy: RentVsBuyConfig = RentVsBuyConfig()
    workloads: list[WorkloadDeclaration] = []
    token_sources: TokenSources = []
    billing: BillingConfig = BillingConfig()


def _parse_env_value(raw: str) -> Any:
    """An override as a plain string (pydantic turns "2.5" and "true" into numbers and
    booleans where a field wants them, and "1234" stays a string where it wants one);
    a value that starts like a TOML array, table or quoted string is read as TOML."""
    if raw.lstrip()[:1] not in ("[", "{", '"', "'"):
        return raw
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def apply_env_overrides(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Return `data` with every `GPUWATCH_A__B[__C]=value` set at path a.b[.c].

    Variables without a double underscore (such as `GPUWATCH_SLACK_WEBHOOK_URL`) are not
    config overrides and are left alone.
    """
    merged: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        target = merged
        for part in path[:-1]:
            child = target.get(part)
            if not isinstance(child, dict):
                child = {}
                target[part] = child
            else:
                child = dict(child)
                target[part] = child
            target = child
        target[path[-1]] = _parse_env_value(environ[name])
    return merged


def env_override_paths(environ: Mapping[str, str]) -> dict[str, str]:
    """Dotted config path -> the `GPUWATCH_...` variable that sets it."""
    return {
        ".".join(part.lower() for part in name[len(ENV_PREFIX) :].split("__")): name
        for name in environ
        if name.startswith(ENV_PREFIX) and "__" in name
    }


def _format_errors(exc: ValidationError, origin: str, env_paths: Mapping[str, str]) -> list[str]:
    lines = []
    for err in exc.errors():
        path = ".".join(str(part) for part in err["loc"]) or "(top level)"
        source = next(
            (
                var
                for env_path, var in env_paths.items()
                if path == env_path or path.startswith(env_path + ".")
            ),
            origin,
        )
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown option (check the spelling against config.example.toml)"
        lines.append(f"{path}: {message} [{source}]")
    return lines


def load_config(path: Path | None, environ: Mapping[str, str] | None = None) -> Config:
    """Load and validate the config at `path` (defaults when None) plus env overrides.

    Raises ConfigError listing every problem, each with its dotted path.
    """
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    origin = "defaults"
    if path is not None:
        origin = str(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError([f"{path}: no such file"]) from None
        except OSError as exc:
            raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None
        except UnicodeDecodeError:
            raise ConfigError([f"{path}: not UTF-8 text"]) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError([f"{path}: not valid TOML: {exc}"]) from None
    data = apply_env_overrides(data, env)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, origin, env_override_paths(env))) from None
    problems = [f"{line} [{origin}]" for line in reference_problems(config)]
    if problems:
        raise ConfigError(problems)
    return config


def reference_problems(config: Config) -> list[str]:
    """Cross-field checks: catalogs build, and every declared model or size is known."""
    problems = []
    try:
        build_gpu_catalog(config.sizing.gpus)
    except (CatalogError, ValueError) as exc:
        problems.append(f"sizing.gpus: {exc}")
    try:
        models = build_model_catalog(config.sizing.models)
    except (CatalogError, ValueError) as exc:
        problems.append(f"sizing.models: {exc}")
        return problems
    for i, declaration in enumerate(config.workloads):
        field = "model" if declaration.model is not None else "params"
        try:
            declared_workload(declaration, models)
        except UnknownModelError as exc:
            problems.append(f"workloads.{i}.model: {exc.args[0] if exc.args else exc}")
        except ValueError as exc:
            problems.append(f"workloads.{i}.{field}: {exc}")
    return problems


def secret_file_problems(exporter: ExporterConfig) -> list[str]:
    """The TLS and basic-auth files can be read and used (checked when the agent starts).

    Not part of `load_config`, so a config can be checked on a machine that does not
    hold the secrets. Messages name the field, never a file's content.
    """
    problems = []
    if exporter.basic_auth_password_file is not None:
        try:
            exporter.basic_auth_password_file.read_text(encoding="utf-8")
        except OSError as exc:
            problems.append(f"exporter.basic_auth_password_file: cannot read: {exc.strerror}")
        except UnicodeDecodeError:
            problems.append("exporter.basic_auth_password_file: not UTF-8 text")
    if exporter.tls_cert_file is not None and exporter.tls_key_file is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(str(exporter.tls_cert_file), str(exporter.tls_key_file))
        except OSError as exc:  # ssl.SSLError is an OSError
            detail = exc.strerror or getattr(exc, "reason", None) or type(exc).__name__
            problems.append(
                f"exporter.tls_cert_file: cannot load the certificate and key: {detail}"
            )
    return problems


def render_config(config: Config) -> str:
    """The effective config as TOML text (unset options shown as comments)."""
    lines: list[str] = []
    _render_table(config.model_dump(mode="json"), [], lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _is_table_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _render_table(table: dict[str, Any], path: list[str], lines: list[str]) -> None:
    """Scalars first, then sub-tables and arrays of tables, as TOML requires."""
    for key, value in table.items():
        if isinstance(value, dict) or _is_table_list(value):
            continue
        if value is None:
            lines.append(f"# {key} is not set")
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in table.items():
        if isinstance(value, dict):
            lines.extend(["", f"[{'.'.join([*path, key])}]"])
            _render_table(value, [*path, key], lines)
        elif _is_table_list(value):
            for item in value:
                lines.extend(["", f"[[{'.'.join([*path, key])}]]"])
                _render_table(item, [*path, key], lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + items + " }"
    return json.dumps(str(value))  # a JSON string is a valid TOML basic string
