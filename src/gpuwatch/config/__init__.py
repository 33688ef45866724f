"""Configuration: the TOML file, `GPUWATCH_<SECTION>__<KEY>` overrides, validation.

One job per module: `schema` the sections and `Config` (the file's shape; a feature's
own section lives beside its package and is gathered here), `shape` walking that shape
(what a dotted path holds, what a misspelling meant), `env` the environment override
engine, `checks` cross-references and warnings, `load` reading and validating with
every error at once, `render` the effective config as TOML. This package names the
public API; import from it (`from gpuwatch.config import Config, load_config`).

What must not live here: a feature's settings model (it lives beside its package, and
no feature package imports `gpuwatch.config`), checks against this host (files,
directories, addresses: `gpuwatch.cli.host_checks`).

Layer: config, above every package whose section it gathers (sources, tco, analysis,
alerts), below collectors, export, history and everything that reads a `Config`.
"""

from __future__ import annotations

from gpuwatch.config.checks import OPENCOST_DCGM_FAMILIES, config_warnings, reference_problems
from gpuwatch.config.env import (
    ENV_PREFIX,
    OTHER_VARIABLES,
    apply_env_overrides,
    env_override_paths,
    source_of,
    unknown_variables,
)
from gpuwatch.config.load import ConfigError, Validation, load_config, validate_config
from gpuwatch.config.plan_policy import PlanConfig, PlanQuota
from gpuwatch.config.render import render_config
from gpuwatch.config.schema import (
    DEFAULT_PORT,
    DEFAULT_REPORT_FORMATS,
    AgentConfig,
    Config,
    ExporterConfig,
    HistoryConfig,
    LoggingConfig,
    ReportConfig,
    ReportFormat,
)

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_REPORT_FORMATS",
    "ENV_PREFIX",
    "OPENCOST_DCGM_FAMILIES",
    "OTHER_VARIABLES",
    "AgentConfig",
    "Config",
    "ConfigError",
    "ExporterConfig",
    "HistoryConfig",
    "LoggingConfig",
    "PlanConfig",
    "PlanQuota",
    "ReportConfig",
    "ReportFormat",
    "Validation",
    "apply_env_overrides",
    "config_warnings",
    "env_override_paths",
    "load_config",
    "reference_problems",
    "render_config",
    "source_of",
    "unknown_variables",
    "validate_config",
]
