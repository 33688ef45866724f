"""The agent's monthly report: the cron trigger's fire times and the job, no real wait."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from gpuwatch.config import AgentConfig, Config, ConfigError, ReportConfig, load_config
from gpuwatch.report.model import ReportData
from gpuwatch.report.produce import SourceRequest
from gpuwatch.report.scheduled import report_trigger, write_previous_month
from tests.conftest import make_agent
from tests.report.data import month_data


def _next(trigger: object, after: datetime) -> datetime:
    return trigger.get_next_fire_time(None, after)  # type: ignore[attr-defined,no-any-return]


def test_trigger_fires_on_the_first_at_the_configured_utc_time() -> None:
    trigger = report_trigger(ReportConfig(hour_utc=1, minute=30))
    assert _next(trigger, datetime(2026, 10, 15, 12, tzinfo=UTC)) == datetime(
        2026, 11, 1, 1, 30, tzinfo=UTC
    )
    assert _next(trigger, datetime(2026, 11, 1, 0, 0, tzinfo=UTC)) == datetime(
        2026, 11, 1, 1, 30, tzinfo=UTC
    )
    assert _next(trigger, datetime(2026, 12, 1, 1, 31, tzinfo=UTC)) == datetime(
        2027, 1, 1, 1, 30, tzinfo=UTC
    )


def test_job_writes_the_previous_month(tmp_path: Path) -> None:
    requests: list[SourceRequest] = []

    def loader(request: SourceRequest) -> ReportData:
        requests.append(request)
        year, month = request.period.start.year, request.period.start.month
        return replace(month_data(year, month, 100.0 + month, 10.0), period=request.period)

    config = Config(
        agent=AgentConfig(state_dir=tmp_path),
        report=ReportConfig(enabled=True, formats=["json", "csv"]),
    )
    outcome = write_previous_month(config, datetime(2026, 11, 1, 1, 0, tzinfo=UTC), loader=loader)
    assert outcome is not None
    assert [r.period.label for r in requests] == ["2026-10", "2026-09"]
    assert not requests[0].period.month_to_date
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [
        "gpuwatch-report-2026-10.csv",
        "gpuwatch-report-2026-10.json",
    ]
    document = json.loads((tmp_path / "reports" / "gpuwatch-report-2026-10.json").read_text())
    assert document["total_cost_usd"] == 110.0
    assert document["previous_period"] == "2026-09"


def test_a_failing_job_is_one_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def loader(request: SourceRequest) -> ReportData:
        raise OSError("database is locked")

    config = Config(agent=AgentConfig(state_dir=tmp_path), report=ReportConfig(enabled=True))
    with caplog.at_level(logging.ERROR, logger="gpuwatch.report.scheduled"):
        outcome = write_previous_month(config, datetime(2026, 1, 1, 1, tzinfo=UTC), loader=loader)
    assert outcome is None
    assert len(caplog.records) == 1
    assert "2025-12" in caplog.records[0].getMessage()


def test_the_agent_schedules_the_job_when_enabled(tmp_path: Path) -> None:
    agent, _ = make_agent()
    enabled = agent.config.model_copy(
        update={"report": ReportConfig(enabled=True, hour_utc=3, minute=5)}
    )
    agent.config = enabled
    scheduler = BackgroundScheduler(timezone=UTC)
    try:
        agent._schedule_report(scheduler)
        (job,) = scheduler.get_jobs()
        assert job.id == "monthly_report"
        assert _next(job.trigger, datetime(2026, 2, 10, tzinfo=UTC)) == datetime(
            2026, 3, 1, 3, 5, tzinfo=UTC
        )
    finally:
        agent.stop()


def test_report_section_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[report]\nformats = ["html", "xlsx"]\nhour_utc = 24\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    fields = sorted(line.split(":", 1)[0] for line in caught.value.errors)
    assert fields == ["report.formats.1", "report.hour_utc"]
