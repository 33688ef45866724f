"""Configuration: the TOML file, `GPUWATCH_<SECTION>__<KEY>` overrides, validation.

Every section is a pydantic model that forbids unknown keys, so a typo is an error
with its dotted path (`exporter.listen: ...`) instead of a silently ignored option.
The same holds for the environment: a `GPUWATCH_` variable that is neither an override
of an existing option nor one of `OTHER_VARIABLES` is an error naming the variable and
the closest real one.
Secrets are never config text: they are read from files named here or from the
environment, and never logged. `config.example.toml` documents every option.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpuwatch.alerts.config import AlertsConfig
from gpuwatch.billing import BillingConfig
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.sizing import (
    CatalogError,
    GpuCatalog,
    GpuCatalogEntry,
    ModelCatalog,
    ModelCatalogEntry,
    UnknownModelError,
    build_gpu_catalog,
    build_model_catalog,
)
from gpuwatch.sizing.hf_config import catalog_entry_data
from gpuwatch.slack.secret import ENV_WEBHOOK_URL
from gpuwatch.tco import RentVsBuyConfig
from gpuwatch.tokens import TokenSources
from gpuwatch.values import ConfigPath, Text, parse_listen_address
from gpuwatch.workloads import (
    WorkloadDeclaration,
    config_json_workload,
    declared_workload,
    served_workload,
)

DEFAULT_PORT = 9842
"""Default listen port: clashes with neither dcgm-exporter (9400) nor nvidia_gpu_exporter (9835)."""

ENV_PREFIX = "GPUWATCH_"

OTHER_VARIABLES = {
    ENV_WEBHOOK_URL: "the Slack webhook URL (a secret, never config text)",
    "GPUWATCH_REPORT_PROMETHEUS_URL": "the Helm chart's report CronJob (read by its shell)",
}
"""`GPUWATCH_` variables that are not config overrides and are not errors."""

_SERVICE_LINK = re.compile(
    r"(?:[A-Z0-9_]+_)?(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?"
    r"|PORT_[0-9]+_(?:TCP|UDP|SCTP)(?:_(?:PROTO|PORT|ADDR))?)"
)
_SERVICE_LINK_PORT = re.compile(r"(?:[A-Z0-9_]+_)?PORT")
_SERVICE_LINK_URL = re.compile(r"(?:tcp|udp|sctp)://\S+")


def _service_link(name: str, value: str) -> bool:
    """True for a variable Kubernetes injects for a Service (service links, on by
    default): a Service called `gpuwatch` (the chart's, released as `gpuwatch`) or
    `gpuwatch-...` gives every pod in its namespace `GPUWATCH_SERVICE_HOST`,
    `GPUWATCH_SERVICE_PORT[_<PORT NAME>]`, `GPUWATCH_PORT=tcp://...` and
    `GPUWATCH_PORT_<N>_TCP[_PROTO|_PORT|_ADDR]`. They are not gpuwatch's."""
    rest = name[len(ENV_PREFIX) :]
    if _SERVICE_LINK.fullmatch(rest):
        return True
    return bool(_SERVICE_LINK_PORT.fullmatch(rest) and _SERVICE_LINK_URL.fullmatch(value))


class ConfigError(Exception):
    """A config that cannot be used; `errors` holds one `path: message` line each."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class AgentConfig(_Section):
    """[agent]: sampling and local state."""

    interval_seconds: float = Field(default=1.0, ge=0.05, le=60.0)
    slow_interval_seconds: float = Field(default=15.0, ge=1.0, le=3600.0)
    state_dir: ConfigPath = Path("/var/lib/gpuwatch")
    hostname: str | None = Field(default=None, min_length=1, max_length=253)  # data: escaped
    per_process_metrics: bool = False
    nvml_retry_max_seconds: float = Field(default=60.0, ge=1.0, le=3600.0)

    @model_validator(mode="after")
    def _slow_not_faster(self) -> AgentConfig:
        if self.slow_interval_seconds < self.interval_seconds:
            raise ValueError("slow_interval_seconds must not be shorter than interval_seconds")
        return self


class ExporterConfig(_Section):
    """[exporter]: the Prometheus endpoint."""

    listen: str = f"0.0.0.0:{DEFAULT_PORT}"
    dcgm_compat: bool = False
    dcgm_naming: Literal["classic", "4.9"] = "classic"
    tls_cert_file: ConfigPath | None = None
    tls_key_file: ConfigPath | None = None
    basic_auth_username: Text | None = Field(default=None, max_length=128)
    basic_auth_password_file: ConfigPath | None = None

    @field_validator("listen")
    @classmethod
    def _valid_listen(cls, value: str) -> str:
        parse_listen_address(value)
        return value

    @field_validator("basic_auth_username")
    @classmethod
    def _no_colon(cls, value: str | None) -> str | None:
        if value is not None and ":" in value:
            raise ValueError("a basic-auth user name cannot contain ':' (RFC 7617)")
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
    resolve_after_seconds: float = Field(default=60.0, ge=0.0, le=7 * 86400.0)
    power_veto_watts: float | None = Field(default=None, gt=0.0)
    lookback_seconds: float = Field(default=86400.0, ge=60.0, le=90 * 86400.0)
    headroom_ratio: float = Field(default=0.1, ge=0.0, le=2.0)
    evaluation_interval_seconds: float = Field(default=10.0, ge=1.0, le=3600.0)
    # the GPUs a recommendation may name (catalog ids); unset: the GPUs AWS rents in the
    # region when billing asks the Pricing API, else the current GPU's class
    candidate_gpus: list[str] | None = Field(default=None, min_length=1, max_length=256)

    @model_validator(mode="after")
    def _band_fits(self) -> AnalysisConfig:
        if self.underutilized_below_ratio + self.underutilized_hysteresis_ratio > 1.0:
            raise ValueError(
                "underutilized_below_ratio + underutilized_hysteresis_ratio must not exceed 1 "
                "(an underutilized GPU could never be busy again)"
            )
        return self


class SizingConfig(_Section):
    """[sizing]: your own GPUs (negotiated prices, on-prem parts) and models."""

    gpus: list[GpuCatalogEntry] = []
    models: list[ModelCatalogEntry] = []

    @field_validator("models", mode="before")
    @classmethod
    def _expand_config_json(cls, value: object) -> object:
        """Entries giving ``config_json`` take their keys from that config.json."""
        if not isinstance(value, list):
            return value
        expanded = []
        for i, item in enumerate(value):
            try:
                expanded.append(catalog_entry_data(item))
            except ValueError as exc:
                raise ValueError(f"entry {i}: {exc}") from None
        return expanded


class LoggingConfig(_Section):
    """[logging]: where the one line per failure goes."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["text", "json"] = "text"


class HistoryConfig(_Section):
    """[history]: the hourly rollups kept in `agent.state_dir/history.sqlite3`."""

    enabled: bool | None = None  # None: on when state_dir is writable, off under --simulate
    retention_days: int = Field(default=400, ge=1, le=36500)
    write_interval_seconds: float = Field(default=30.0, ge=1.0, le=3600.0)


ReportFormat = Literal["html", "md", "csv", "json", "pdf"]
DEFAULT_REPORT_FORMATS: tuple[ReportFormat, ...] = ("html", "md", "csv", "json")


class ReportConfig(_Section):
    """[report]: the agent writes the previous month's local report on the 1st (UTC)."""

    enabled: bool = False
    directory: ConfigPath | None = None  # default: <agent.state_dir>/reports
    formats: list[ReportFormat] = Field(default_factory=lambda: list(DEFAULT_REPORT_FORMATS))
    hour_utc: int = Field(default=1, ge=0, le=23)  # on the 1st, at hour_utc:minute UTC
    minute: int = Field(default=0, ge=0, le=59)
    slack: bool = False  # also send the summary through [alerts.slack]'s webhook

    @field_validator("formats")
    @classmethod
    def _some_formats(cls, value: list[ReportFormat]) -> list[ReportFormat]:
        if not value:
            raise ValueError("name at least one format")
        if len(set(value)) != len(value):
            raise ValueError("formats must not repeat a format")
        return value


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
    history: HistoryConfig = HistoryConfig()
    report: ReportConfig = ReportConfig()
    kubernetes: KubernetesConfig = KubernetesConfig()


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


def _override_names(environ: Mapping[str, str]) -> list[str]:
    """The `GPUWATCH_..__..` variables, sorted; others (the webhook URL) are no overrides."""
    return sorted(n for n in environ if n.startswith(ENV_PREFIX) and "__" in n[len(ENV_PREFIX) :])


def _env_path(name: str) -> list[str]:
    return [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]


def env_override_paths(environ: Mapping[str, str]) -> dict[str, str]:
    """Dotted config path -> the `GPUWATCH_...` variable that sets it."""
    return {".".join(_env_path(name)): name for name in _override_names(environ)}


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a config path holds: a section model, a list of them, a table or a value."""

    model: type[BaseModel] | None = None
    is_list: bool = False
    is_table: bool = False


def _shape(annotation: Any) -> _Shape:
    """The shape of a field from its annotation (`X | None`, `list[X]`, `dict[...]`)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _Shape(model=annotation)
    if origin is typing.Annotated:
        return _shape(args[0])
    if origin is list and args:
        inner = _shape(args[0])
        return _Shape(model=inner.model, is_list=inner.model is not None)
    if origin is dict:
        return _Shape(is_table=True)
    if len(args) == 1:  # Optional[X]
        return _shape(args[0])
    return _Shape()


def _override_problem(parts: list[str], data: Any) -> tuple[str, str] | None:
    """(dotted path, reason) when an override's path does not fit the config's shape:
    an unknown section or option, an item index that is not in the file, a key below
    an option. None when it fits."""
    if "" in parts:
        return ".".join(parts), "empty key (two double underscores in a row, or one at an end)"
    model: type[BaseModel] | None = Config
    node: Any = data
    i = 0
    while i < len(parts):
        part, here = parts[i], ".".join(parts[: i + 1])
        if model is None:
            return here, f"{'.'.join(parts[:i])} is an option, not a section: nothing is below it"
        field = model.model_fields.get(part)
        if field is None:
            kind = "option" if i == len(parts) - 1 else "section"
            return here, f"unknown {kind} (check the spelling against config.example.toml)"
        shape = _shape(field.annotation)
        node = node.get(part) if isinstance(node, dict) else None
        if shape.is_table and i + 2 < len(parts):
            return ".".join(parts[: i + 2]), f"{here} is a table of values, not of sections"
        if shape.is_table:
            return None
        if shape.is_list and i + 1 < len(parts):
            index_text = parts[i + 1]
            items = node if isinstance(node, list) else []
            if not index_text.isdigit():
                return (
                    f"{here}.{index_text}",
                    f"{here} is a list: the key after it is an item number (0, 1, ...)",
                )
            if int(index_text) >= len(items):
                return (
                    f"{here}.{index_text}",
                    f"no item {int(index_text)}: the file has {len(items)} (an override can "
                    "change an item, not add one)",
                )
            node = items[int(index_text)]
            i += 1
        model = shape.model
        i += 1
    return None


def _apply_one(data: dict[str, Any], parts: list[str], value: Any) -> dict[str, Any]:
    """`data` with `value` at `parts` (copying what it changes; indexes into lists)."""
    head, rest = parts[0], parts[1:]
    merged: Any = dict(data)
    if not rest:
        merged[head] = value
        return dict(merged)
    child = merged.get(head)
    if isinstance(child, list) and rest[0].isdigit() and int(rest[0]) < len(child):
        items = list(child)
        index = int(rest[0])
        inner = items[index] if isinstance(items[index], dict) else {}
        items[index] = _apply_one(inner, rest[1:], value) if rest[1:] else value
        merged[head] = items
    else:
        merged[head] = _apply_one(child if isinstance(child, dict) else {}, rest, value)
    return dict(merged)


def _overrides(
    data: dict[str, Any], environ: Mapping[str, str]
) -> tuple[dict[str, Any], list[str]]:
    """`data` with every override that fits applied, and one error line per one that
    does not (blamed on the variable, never on the file)."""
    merged = data
    problems: list[str] = []
    seen: dict[str, str] = {}
    for name in _override_names(environ):
        parts = _env_path(name)
        dotted = ".".join(parts)
        if dotted in seen:
            problems.append(f"{dotted}: set twice, by {seen[dotted]} and by this [{name}]")
            continue
        seen[dotted] = name
        problem = _override_problem(parts, data)
        if problem is not None:
            hint = ""
            if problem[1].startswith("unknown "):
                hint = _did_you_mean(name, [*_option_variables(), *OTHER_VARIABLES])
            problems.append(f"{problem[0]}: {problem[1]}{hint} [{name}]")
            continue
        merged = _apply_one(merged, parts, _parse_env_value(environ[name]))
    return merged, problems


def _option_variables(model: type[BaseModel] = Config, prefix: str = ENV_PREFIX) -> list[str]:
    """The override variable of every option (a list of sections as its item 0)."""
    names: list[str] = []
    for key, field in model.model_fields.items():
        name = f"{prefix}{key.upper()}"
        shape = _shape(field.annotation)
        if shape.model is not None:
            names += _option_variables(
                shape.model, f"{name}__0__" if shape.is_list else f"{name}__"
            )
        else:
            names.append(name)
    return names


def _closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate `word` most likely meant (a misspelling), or None when none is close."""
    found = difflib.get_close_matches(word, list(candidates), 1, 0.6)
    return found[0] if found else None


def _closest_variable(name: str, candidates: list[str]) -> str | None:
    """The real variable `name` most likely meant (compared without the prefix, which
    every candidate shares), or None when none is close."""
    rest = {c[len(ENV_PREFIX) :]: c for c in candidates}
    found = _closest(name[len(ENV_PREFIX) :].upper(), rest)
    return rest[found] if found else None


def _closest_key(loc: Sequence[str | int]) -> str | None:
    """The dotted path of the option or section that the unknown file key at `loc` most
    likely meant (a sibling of it), or None when none is close."""
    model: type[BaseModel] | None = Config
    for part in loc[:-1]:
        if isinstance(part, int):
            continue  # an item of a list of sections
        field = model.model_fields.get(part) if model is not None else None
        model = _shape(field.annotation).model if field is not None else None
    if model is None:
        return None
    key = _closest(str(loc[-1]), model.model_fields)
    return ".".join([*(str(p) for p in loc[:-1]), key]) if key else None


def _did_you_mean(name: str, candidates: list[str]) -> str:
    closest = _closest_variable(name, candidates)
    return f"; did you mean {closest}?" if closest else ""


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """One error line per `GPUWATCH_` variable without a double underscore that names
    nothing gpuwatch reads (`GPUWATCH_AGENT_INTERVAL_SECONDS`, one underscore too few):
    it would otherwise be ignored without a word. Names the closest real variable.
    `OTHER_VARIABLES` and Kubernetes' service-link variables are no errors."""
    candidates = [*_option_variables(), *OTHER_VARIABLES]
    lines = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in OTHER_VARIABLES:
            continue
        if _service_link(name, environ[name]):
            continue
        if "__" in name[len(ENV_PREFIX) :]:
            continue  # an override: checked against the config's shape by _overrides
        lines.append(
            f"{name}: no such setting (overrides are GPUWATCH_<SECTION>__<OPTION>, two "
            f"underscores between the parts){_did_you_mean(name, candidates)} [{name}]"
        )
    return lines


def apply_env_overrides(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Return `data` with every `GPUWATCH_A__B[__C]=value` set at path a.b[.c].

    A number after a list names an existing item (`GPUWATCH_TOKEN_SOURCES__0__URL`).
    Variables without a double underscore (such as `GPUWATCH_SLACK_WEBHOOK_URL`) are not
    config overrides and are left alone here. No check against the config's shape here:
    `validate_config` reports overrides that do not fit it and leaves them out, and
    reports the other `GPUWATCH_` variables that name nothing (`unknown_variables`).
    """
    merged = data
    for name in _override_names(environ):
        merged = _apply_one(merged, _env_path(name), _parse_env_value(environ[name]))
    return merged


def source_of(path: str, origin: str, env_paths: Mapping[str, str]) -> str:
    """Who set the option at dotted `path`: the variable that set it, a part of it or a
    section around it, else `origin` (the file, or "defaults")."""
    for env_path, var in env_paths.items():
        if path == env_path or path.startswith(env_path + ".") or env_path.startswith(path + "."):
            return var
    return origin


def _format_errors(exc: ValidationError, origin: str, env_paths: Mapping[str, str]) -> list[str]:
    lines = []
    for err in exc.errors():
        path = ".".join(str(part) for part in err["loc"]) or "(top level)"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            closest = _closest_key(err["loc"])
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
    data, errors = _overrides(data, env)
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
    this host (files, directories, addresses) are `gpuwatch.host_checks`'s.
    """
    result = validate_config(path, environ)
    if result.errors:
        raise ConfigError(result.errors)
    return result.config


def reference_problems(config: Config, skip: typing.AbstractSet[str] = frozenset()) -> list[str]:
    """Cross-field checks: catalogs build, and every declared model or size is known.

    Sections named in `skip` (invalid ones, at their defaults) are not checked.
    """
    if "sizing" in skip:
        return []
    problems = []
    try:
        catalog = build_gpu_catalog(config.sizing.gpus)
    except (CatalogError, ValueError) as exc:
        problems.append(f"sizing.gpus: {exc}")
    else:
        if config.analysis.candidate_gpus is not None and "analysis" not in skip:
            problems.extend(_candidate_problems(config, catalog))
    try:
        models = build_model_catalog(config.sizing.models)
    except (CatalogError, ValueError) as exc:
        problems.append(f"sizing.models: {exc}")
        return problems
    if "workloads" not in skip:
        for i, declaration in enumerate(config.workloads):
            field = (
                "config_json"
                if declaration.config_json is not None
                else "model"
                if declaration.model is not None
                else "params"
            )
            try:
                declared_workload(declaration, models)
            except UnknownModelError as exc:
                problems.append(f"workloads.{i}.model: {exc.args[0] if exc.args else exc}")
            except ValueError as exc:
                problems.append(f"workloads.{i}.{field}: {exc}")
    if "token_sources" not in skip:
        problems.extend(_token_source_problems(config, models))
    return problems


def _token_source_problems(config: Config, models: ModelCatalog) -> list[str]:
    """A token source's `model`, `config_json` and `precision` can be sized."""
    problems = []
    for i, source in enumerate(config.token_sources):
        if source.model is not None and source.model not in models:
            problems.append(
                f"token_sources.{i}.model: unknown model {source.model!r}; "
                f"known: {', '.join(models.names)}"
            )
        try:
            if source.config_json is not None:
                config_json_workload(source.config_json, source.precision)
            elif source.model is not None and source.model in models:
                served_workload(models.get(source.model), source.precision)
        except ValueError as exc:
            field = "config_json" if source.config_json is not None else "precision"
            problems.append(f"token_sources.{i}.{field}: {exc}")
    return problems


def _candidate_problems(config: Config, catalog: GpuCatalog) -> list[str]:
    """`[analysis] candidate_gpus` names catalog GPUs (built in or `[[sizing.gpus]]`)."""
    problems = []
    for i, gpu_id in enumerate(config.analysis.candidate_gpus or ()):
        if gpu_id not in catalog:
            problems.append(
                f"analysis.candidate_gpus.{i}: unknown GPU {gpu_id!r}; "
                f"known: {', '.join(catalog.ids)}"
            )
    return problems


OPENCOST_DCGM_FAMILIES = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_DEC_UTIL")
"""The dcgm-exporter families OpenCost's GPU queries read, by their classic names."""


def config_warnings(config: Config) -> list[str]:
    """Settings that are valid but likely not what was meant, one `path: reason` line each
    (`gpuwatch check-config` prints them; they never fail the check)."""
    exporter = config.exporter
    if exporter.dcgm_naming == "classic":
        return []
    if not exporter.dcgm_compat:
        return ["exporter.dcgm_naming: has no effect without exporter.dcgm_compat = true"]
    families = " and ".join(OPENCOST_DCGM_FAMILIES)
    return [
        f"exporter.dcgm_naming: OpenCost's GPU queries read {families}, "
        "names the 4.9 set does not export: OpenCost will find no GPU usage "
        '(keep dcgm_naming = "classic" where OpenCost reads this agent)'
    ]


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
