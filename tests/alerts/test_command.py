"""`gpuwatch alert test`: send_test_message, run_alert_test exit codes, the parser."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpuwatch.alerts import ENV_WEBHOOK_URL, SlackConfig
from gpuwatch.cli.alert import add_alert_parser, run_alert, run_alert_test, send_test_message
from tests.alerts.conftest import (
    HANG,
    HOSTNAME,
    NO_SERVICE,
    RATE_LIMITED,
    SECRET_TOKEN,
    SERVER_ERROR,
    FakeSlack,
    Reply,
)


def test_send_test_message_ok(slack: FakeSlack) -> None:
    ok, line = send_test_message(slack.url, HOSTNAME, timeout=2.0)
    assert ok
    assert "HTTP 200" in line
    (post,) = slack.all_posts()
    assert HOSTNAME in post.body["text"]
    assert post.body["blocks"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (NO_SERVICE, "no_service: the webhook was removed or revoked"),
        (SERVER_ERROR, "HTTP 500"),
        (RATE_LIMITED, "rate limited"),
        (HANG, "timeout"),
    ],
    ids=["404", "500", "429", "timeout"],
)
def test_send_test_message_failures(slack: FakeSlack, reply: Reply, expected: str) -> None:
    slack.default = reply
    ok, line = send_test_message(slack.url, HOSTNAME, timeout=0.3)
    assert not ok
    assert expected in line
    assert "\n" not in line
    assert SECRET_TOKEN not in line
    assert len(slack.all_posts()) == 1  # a test message is never retried


def test_send_test_message_unreachable(slack: FakeSlack) -> None:
    url = slack.url
    slack.close()
    ok, line = send_test_message(url, HOSTNAME, timeout=0.3)
    assert not ok
    assert line.startswith("cannot reach Slack")
    assert SECRET_TOKEN not in line


def test_run_alert_test_exit_codes(
    slack: FakeSlack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = SlackConfig(timeout_seconds=0.5)
    assert run_alert_test(config, HOSTNAME, {ENV_WEBHOOK_URL: slack.url}) == 0
    out, err = capsys.readouterr()
    assert "accepted" in out
    assert err == ""

    slack.default = NO_SERVICE
    assert run_alert_test(config, HOSTNAME, {ENV_WEBHOOK_URL: slack.url}) == 1
    out, err = capsys.readouterr()
    assert "no_service" in err
    assert SECRET_TOKEN not in out + err

    assert run_alert_test(config, HOSTNAME, {}) == 2
    assert ENV_WEBHOOK_URL in capsys.readouterr().err

    missing = SlackConfig(webhook_url_file=tmp_path / "absent")
    assert run_alert_test(missing, HOSTNAME, {}) == 2
    assert "no such file" in capsys.readouterr().err


def test_run_alert_test_reads_the_secret_file(
    slack: FakeSlack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "webhook"
    secret.write_text(slack.url + "\n")
    config = SlackConfig(webhook_url_file=secret, enabled=False)
    assert run_alert_test(config, HOSTNAME, {}) == 0
    assert "enabled is false" in capsys.readouterr().err
    assert len(slack.delivered()) == 1


def test_alert_parser_and_dispatch(slack: FakeSlack, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="gpuwatch")
    add_alert_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["alert", "test", "--config", "x.toml"])
    assert args.command == "alert"
    assert args.config == Path("x.toml")
    code = run_alert(
        args, slack=SlackConfig(), hostname=HOSTNAME, environ={ENV_WEBHOOK_URL: slack.url}
    )
    assert code == 0
    with pytest.raises(SystemExit):
        parser.parse_args(["alert"])
    capsys.readouterr()
