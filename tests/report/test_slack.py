"""`gpuwatch report --slack` against the loopback Slack stand-in of the alert tests."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwatch.alerts import AlertsConfig, SlackConfig
from gpuwatch.cli import _parser
from gpuwatch.cli.report import run_report
from gpuwatch.config import AgentConfig, Config
from gpuwatch.report.build import build_report
from gpuwatch.report.model import ReportData
from gpuwatch.report.produce import SourceRequest
from gpuwatch.report.slack import build_summary_message
from gpuwatch.slack.outbox import Outbox
from gpuwatch.slack.summary import REPORT_OUTBOX_FILE
from tests.alerts.conftest import SECRET_TOKEN, SERVER_ERROR, FakeSlack
from tests.report.data import sample_data
from tests.report.test_command import NOW

EVIL = "<!channel> <script>x</script>"


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.delenv(name)
    fake = FakeSlack()
    yield fake
    fake.close()


def _config(state_dir: Path) -> Config:
    fast = SlackConfig(
        timeout_seconds=1.0,
        max_retries=1,
        retry_backoff_seconds=0.01,
        retry_backoff_max_seconds=0.1,
    )
    return Config(agent=AgentConfig(state_dir=state_dir), alerts=AlertsConfig(slack=fast))


def _loader(request: SourceRequest) -> ReportData:
    if request.period.label == "2026-09":
        return ReportData(request.period, ())
    return replace(sample_data(host_a=EVIL), period=request.period)


def _run(tmp_path: Path, slack: FakeSlack, *extra: str) -> tuple[int, str]:
    args = _parser().parse_args(["report", "--month", "2026-10", "--slack", *extra])
    err = io.StringIO()
    code = run_report(
        args,
        _config(tmp_path / "state"),
        loader=_loader,
        now=NOW,
        stdout=io.StringIO(),
        stderr=err,
        environ={"GPUWATCH_SLACK_WEBHOOK_URL": slack.url},
        slack_sleep=lambda _s: None,
    )
    return code, err.getvalue()


def test_summary_reaches_slack_with_figures_waste_and_file_name(
    tmp_path: Path, slack: FakeSlack
) -> None:
    code, err = _run(tmp_path, slack, "--out", str(tmp_path / "out"), "--format", "html,json")
    assert code == 0, err
    (post,) = slack.delivered()
    body = post.body
    blocks = body["blocks"]
    assert blocks[0]["type"] == "header"
    assert "2026-10" in blocks[0]["text"]["text"]
    fields = "\n".join(f["text"] for f in blocks[1]["fields"])
    assert "*Total GPU cost*\n$187.20" in fields
    assert "$79.20 (42.3 %)" in fields
    assert (
        "*Savings available per month*\n$1,679.00 (idle $584.00 + held $0.00 + "
        "right-sizing $1,095.00)" in fields
    )
    waste = blocks[2]["text"]["text"]
    assert waste.startswith("*Most wasteful GPUs*")
    assert "&lt;!channel&gt; &lt;script&gt;x&lt;/script&gt;" in waste  # a name pings no one
    assert "<!channel>" not in json.dumps(body)
    context = blocks[-1]["elements"][0]["text"]
    assert "gpuwatch-report-2026-10.html" in context
    assert "gpuwatch-report-2026-10.json" in context
    assert SECRET_TOKEN not in err


def test_summary_without_files_says_so(tmp_path: Path, slack: FakeSlack) -> None:
    code, _ = _run(tmp_path, slack)
    assert code == 0
    (post,) = slack.delivered()
    assert "not written to a file" in post.body["blocks"][-1]["elements"][0]["text"]


def test_a_failing_slack_keeps_the_summary_for_the_next_report(
    tmp_path: Path, slack: FakeSlack
) -> None:
    slack.script(SERVER_ERROR, SERVER_ERROR)
    code, err = _run(tmp_path, slack)
    assert code == 1
    assert "stays queued" in err
    assert SECRET_TOKEN not in err
    assert slack.delivered() == []
    outbox = Outbox(tmp_path / "state" / REPORT_OUTBOX_FILE, max_messages=10)
    assert outbox.pending_count == 1
    outbox.close()
    code, err = _run(tmp_path, slack)  # Slack is back: both summaries go, oldest first
    assert code == 0, err
    assert len(slack.delivered()) == 2


def test_message_limits_waste_items() -> None:
    message = build_summary_message(build_report(sample_data()), ())
    assert message["text"].startswith("GPU cost report 2026-10-01 to 2026-10-02: $187.20 total")
    assert len(message["blocks"]) == 4
