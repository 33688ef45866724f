"""The `[alerts]` / `[alerts.slack]` config sections.

Only options live here, never the webhook URL itself: that is a secret read from the
environment or from the file named by `webhook_url_file` (see `gpuwatch.slack.secret`).
This module must not import `gpuwatch.config` (which imports it) nor `slack_sdk`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuwatch.core.values import ConfigPath, Text

AlertCondition = Literal["idle", "held", "underutilized", "overprovisioned"]
"""A condition worth a Slack message: a waste-analysis state, or overprovisioned."""

DEFAULT_STATES: tuple[AlertCondition, ...] = ("idle", "held", "overprovisioned")


class SlackConfig(BaseModel):
    """[alerts.slack]: Slack alerts about wasted GPUs through an incoming webhook.

    Alerting is on when `enabled` is true (the default) and a webhook URL is available
    from `GPUWATCH_SLACK_WEBHOOK_URL` or `webhook_url_file`; `enabled = false` mutes it
    without removing the secret.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    enabled: bool = True
    webhook_url_file: ConfigPath | None = None
    states: list[AlertCondition] = Field(default_factory=lambda: list(DEFAULT_STATES))
    cooldown_seconds: float = Field(default=3600.0, ge=60.0, le=30 * 86400.0)
    resolve: bool = True
    mention: Text | None = Field(default=None, max_length=200)
    timeout_seconds: float = Field(default=3.0, gt=0.0, le=120.0)  # keeps SIGTERM under 5 s
    max_retries: int = Field(default=5, ge=0, le=20)
    retry_backoff_seconds: float = Field(default=1.0, gt=0.0, le=600.0)
    retry_backoff_max_seconds: float = Field(default=60.0, gt=0.0, le=3600.0)
    outbox_max_messages: int = Field(default=1000, ge=1, le=1_000_000)

    @field_validator("states")
    @classmethod
    def _unique_states(cls, value: list[AlertCondition]) -> list[AlertCondition]:
        if len(set(value)) != len(value):
            raise ValueError("states must not repeat a condition")
        return value

    @model_validator(mode="after")
    def _backoff_order(self) -> SlackConfig:
        if self.retry_backoff_seconds > self.retry_backoff_max_seconds:
            raise ValueError("retry_backoff_seconds must not exceed retry_backoff_max_seconds")
        return self


class AlertsConfig(BaseModel):
    """[alerts]: alert channels (only Slack so far)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    slack: SlackConfig = SlackConfig()
