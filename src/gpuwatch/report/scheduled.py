"""The agent's monthly report: the previous month's local report, on the 1st (UTC).

`report_trigger` is the APScheduler cron trigger of `[report]` (day 1, `hour_utc`,
`minute`, UTC, wall-clock time); `write_previous_month` is its job: it loads the month
before `now` from the host's history, writes the configured formats to
`[report] directory` (default `<agent.state_dir>/reports`) and, with `slack = true`,
sends the summary. It never raises into the scheduler: a failure is one log line.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apscheduler.triggers.cron import CronTrigger

from gpuwatch.config import Config, ReportConfig
from gpuwatch.report.period import month_before, month_period, previous_month
from gpuwatch.report.produce import (
    DataLoader,
    Outcome,
    load_from_source,
    plan_from_source,
    produce,
)
from gpuwatch.slack.secret import resolve_webhook_url

log = logging.getLogger(__name__)


def report_trigger(config: ReportConfig) -> Any:
    """The cron trigger: the 1st of every month at hour_utc:minute UTC."""
    return CronTrigger(day=1, hour=config.hour_utc, minute=config.minute, timezone=UTC)


def report_directory(config: Config) -> Path:
    """Where scheduled reports go."""
    return config.report.directory or config.agent.state_dir / "reports"


def write_previous_month(
    config: Config,
    now: datetime,
    *,
    loader: DataLoader = load_from_source,
    environ: Mapping[str, str] | None = None,
    sleep: Callable[[float], object] = time.sleep,
) -> Outcome | None:
    """Write the report of the month before `now`; None after a logged failure."""
    year, month = previous_month(now)
    period = month_period(year, month, now)
    generated = now.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    try:
        outcome = produce(
            config,
            period,
            formats=config.report.formats,
            out=report_directory(config),
            loader=loader,
            previous_period=month_before(period),
            generated=generated,
            planner=plan_from_source if loader is load_from_source else None,
        )
    except Exception as exc:  # noqa: BLE001 - a report must never stop the agent
        log.error("monthly report %s failed: %s", period.label, exc)
        return None
    log.info(
        "monthly report %s written to %s", period.label, ", ".join(str(p) for p in outcome.files)
    )
    if config.report.slack:
        _send(outcome, config, os.environ if environ is None else environ, sleep)
    return outcome


def _send(
    outcome: Outcome, config: Config, environ: Mapping[str, str], sleep: Callable[[float], object]
) -> None:
    # lazy: the Slack summary's renderer only with [report] slack = true
    from gpuwatch.report.slack import build_summary_message  # noqa: PLC0415

    # lazy: the summary's outbox (sqlite3) only with [report] slack = true
    from gpuwatch.slack.summary import send_summary  # noqa: PLC0415

    try:
        url = resolve_webhook_url(config.alerts.slack, environ)
        if url is None:
            log.warning("[report] slack = true but no Slack webhook is configured")
            return
        payload = build_summary_message(outcome.report, tuple(p.name for p in outcome.files))
        result = send_summary(
            payload, config.alerts.slack, url, config.agent.state_dir, now=time.time, sleep=sleep
        )
    except Exception as exc:  # noqa: BLE001 - Slack must never stop the agent
        log.error("monthly report summary not sent: %s", exc)
        return
    if result.failed:
        log.warning("%s", result.line)
