"""The config file's shape: every section's model and `Config`, the whole file.

Every section is a pydantic model that forbids unknown keys, so a typo is an error
with its dotted path (`exporter.listen: ...`) instead of a silently ignored option.
The sections of gpuwatch's own parts (agent, exporter, logging, history, report) live
here; a feature package's section lives beside it (`[analysis]` in
`gpuwatch.analysis.config`, `[sizing]` in `gpuwatch.sizing.config`, `[rent_vs_buy]` in
`gpuwatch.tco.config`, `[billing]`, `[alerts]`, `[kubernetes]`, `[slurm]`, `[[token_sources]]`,
`[[workloads]]` in theirs) and `Config` gathers them. No I/O here: reading the file and
the environment is `load`'s and `env`'s. `config.example.toml` documents every option.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuwatch.alerts.config import AlertsConfig
from gpuwatch.analysis.config import AnalysisConfig
from gpuwatch.billing.config import BillingConfig
from gpuwatch.config.plan_policy import PlanConfig
from gpuwatch.core.values import ConfigPath, Text, parse_listen_address
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.sizing.config import SizingConfig
from gpuwatch.slurm.config import SlurmConfig
from gpuwatch.tco.config import RentVsBuyConfig
from gpuwatch.tokens import TokenSources
from gpuwatch.workloads import WorkloadDeclaration

DEFAULT_PORT = 9842
"""Default listen port: clashes with neither dcgm-exporter (9400) nor nvidia_gpu_exporter (9835)."""


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
    slurm: SlurmConfig = SlurmConfig()
    plan: PlanConfig = PlanConfig()
