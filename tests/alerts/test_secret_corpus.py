"""No secret in any message, whatever the webhook URL looks like.

Each URL of the corpus carries the token; it goes through `gpuwatch alert test` (the CLI,
in process) and, where it is accepted, through a dispatcher that tries to deliver an
alert to a closed loopback port. The token must appear in no output, log line or metric,
in any spelling (raw, percent-encoded, repr-escaped), and nothing may be a traceback.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpuwatch.alerts import ENV_WEBHOOK_URL, SlackConfig, WebhookSecretError, build_dispatcher
from gpuwatch.alerts.dispatcher import AlertDispatcher
from gpuwatch.cli import main
from gpuwatch.core.clock import ManualClock
from tests.alerts.conftest import START, metrics_text, snapshot, verdict
from tests.tokens.test_collector import dead_port

TOKEN = "xoxSeCrEtToKeN1234567890"
"""The core of the token: alphanumeric, so every escaping of the URL keeps it whole."""

_PORT = dead_port()
_HOST = f"127.0.0.1:{_PORT}"

CORPUS = [
    f"http://{_HOST}/services/T0/B0/{TOKEN}",  # well formed: delivery fails (closed port)
    f"http://{_HOST}/services/T0/B0/{TOKEN}\x01",  # control characters
    f"http://{_HOST}/services/T0/B0/{TOKEN}\x00",
    f"http://{_HOST}/services/T0/B0/\x1b[31m{TOKEN}",
    f"http://{_HOST}/services/T0/B0/{TOKEN}\x7f",
    f"http://{_HOST}/services/T0/B0/{TOKEN}\x85",
    f"http://{_HOST}/services/T0/B0/{TOKEN}\u2028x",
    f"http://{_HOST}/services/T0/\nB0/{TOKEN}",
    f"http://{_HOST}/services/T0/B0/{TOKEN} trailing words",
    f"http://{_HOST}/services/T0/B0/{TOKEN}é",  # non-ASCII
    f"http://[::1/services/T0/B0/{TOKEN}",  # invalid IPv6
    f"http://[zz::1]/services/T0/B0/{TOKEN}",
    f"http://[::1]]/services/T0/B0/{TOKEN}",
    f"http://127.0.0.1:99999/services/T0/B0/{TOKEN}",  # port out of range
    f"http://127.0.0.1:port/services/T0/B0/{TOKEN}",
    f"http://{TOKEN}@{_HOST}/services/x",  # token as user info
    f"http://user:{TOKEN}@{_HOST}/services/x",
    f"http://{_HOST}/services?token={TOKEN}",  # in the query
    f"http://{_HOST}/services#{TOKEN}",  # in the fragment
    f"http://{_HOST}/services/T0/B0/{TOKEN}%00%0a",  # percent-encoded controls
    f"http://{_HOST}/services/T0/B0/%{TOKEN}",  # a broken percent escape
    f"ftp://{_HOST}/services/T0/B0/{TOKEN}",  # wrong scheme
    f"{_HOST}/services/T0/B0/{TOKEN}",  # no scheme
    f"http:///services/T0/B0/{TOKEN}",  # no host
    f"http://{_HOST}/services/T0/B0/{TOKEN}" + "/x" * 2000,  # very long
    f"http://{_HOST}/{'%' * 3}{TOKEN}{'[' * 3}",
]


def _leaks(text: str) -> bool:
    return TOKEN in text or TOKEN.lower() in text.lower()


@pytest.mark.parametrize("url", CORPUS, ids=range(len(CORPUS)))
def test_alert_test_never_shows_the_token(
    url: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    secret = tmp_path / "webhook-url"
    secret.write_bytes(url.encode("utf-8", "surrogateescape"))  # a file can hold NUL
    config = tmp_path / "gpuwatch.toml"
    config.write_text(f"[alerts.slack]\nwebhook_url_file = '{secret}'\ntimeout_seconds = 0.5\n")
    caplog.set_level(logging.DEBUG)
    code = main(["alert", "test", "--config", str(config)])
    out, err = capsys.readouterr()
    assert code in (1, 2)
    assert "Traceback" not in out + err
    assert not _leaks(out + err + caplog.text), out + err


@pytest.mark.parametrize("url", CORPUS, ids=range(len(CORPUS)))
def test_the_dispatcher_never_shows_the_token(
    url: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = ManualClock(START)
    slack = SlackConfig(timeout_seconds=0.3, max_retries=1, retry_backoff_seconds=0.01)
    try:
        dispatcher = build_dispatcher(
            slack, {ENV_WEBHOOK_URL: url}, state_dir=tmp_path, clock=clock, hostname="h"
        )
    except WebhookSecretError as exc:
        refusal = str(exc)
    else:
        refusal = ""
    assert not _leaks(refusal)
    if refusal:
        assert not _leaks(caplog.text)
        return
    assert isinstance(dispatcher, AlertDispatcher)
    try:
        dispatcher.evaluate(snapshot(clock, [verdict(1, "idle", START - 3600.0)]))
        dispatcher.deliver_pending()
        assert not _leaks(caplog.text)
        assert not _leaks(metrics_text(dispatcher))
        assert not _leaks(repr(dispatcher.__dict__))
    finally:
        dispatcher.stop(timeout=2.0)
