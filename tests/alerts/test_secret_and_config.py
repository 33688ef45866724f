"""Where the webhook URL comes from, how it stays hidden, and the [alerts.slack] options."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from gpuwatch.alerts import (
    ENV_WEBHOOK_URL,
    AlertsConfig,
    SlackConfig,
    WebhookSecretError,
    build_dispatcher,
    resolve_webhook_url,
)
from gpuwatch.alerts.dispatcher import AlertDispatcher
from gpuwatch.core.clock import ManualClock
from gpuwatch.slack.secret import WebhookUrl
from tests.alerts.conftest import SECRET_TOKEN

URL = f"https://hooks.slack.com/services/{SECRET_TOKEN}"


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "webhook"
    secret_file.write_text("https://hooks.slack.com/services/FROM/FILE/xxxxxxxx\n")
    config = SlackConfig(webhook_url_file=secret_file)
    assert resolve_webhook_url(config, {ENV_WEBHOOK_URL: URL}) == URL
    assert resolve_webhook_url(config, {ENV_WEBHOOK_URL: "  "}) == (
        "https://hooks.slack.com/services/FROM/FILE/xxxxxxxx"
    )
    assert resolve_webhook_url(SlackConfig(), {}) is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "no such file"), ("", "empty"), (f"not a url {SECRET_TOKEN}", "not an http(s) URL")],
)
def test_bad_secret_files_fail_without_showing_their_content(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    secret_file = tmp_path / "webhook"
    if content is not None:
        secret_file.write_text(content)
    with pytest.raises(WebhookSecretError) as info:
        resolve_webhook_url(SlackConfig(webhook_url_file=secret_file), {})
    assert expected in str(info.value)
    assert str(secret_file) in str(info.value)
    assert SECRET_TOKEN not in str(info.value)


def test_unreadable_secret_file(tmp_path: Path) -> None:
    # a directory cannot be read as a file, even by root
    with pytest.raises(WebhookSecretError, match="cannot read"):
        resolve_webhook_url(SlackConfig(webhook_url_file=tmp_path), {})


def test_a_bad_environment_value_never_echoes_it() -> None:
    with pytest.raises(WebhookSecretError) as info:
        resolve_webhook_url(SlackConfig(), {ENV_WEBHOOK_URL: f"ftp://{SECRET_TOKEN}"})
    assert ENV_WEBHOOK_URL in str(info.value)
    assert SECRET_TOKEN not in str(info.value)


def test_webhook_url_is_redacted_everywhere_but_reveal() -> None:
    url = WebhookUrl(URL)
    assert SECRET_TOKEN not in repr(url)
    assert SECRET_TOKEN not in str(url)
    assert SECRET_TOKEN not in f"{url}"
    assert url.reveal() == URL
    scrubbed = url.scrub(f"POST {URL} failed; path /services/{SECRET_TOKEN}")
    assert SECRET_TOKEN not in scrubbed


def test_config_defaults_and_validation() -> None:
    config = AlertsConfig().slack
    assert config.enabled
    assert config.states == ["idle", "held", "overprovisioned"]
    assert config.cooldown_seconds == 3600
    with pytest.raises(ValidationError, match="extra"):
        SlackConfig.model_validate({"webhook_url": URL})  # the URL is never config text
    with pytest.raises(ValidationError):
        SlackConfig.model_validate({"states": ["idle", "idle"]})
    with pytest.raises(ValidationError):
        SlackConfig.model_validate({"states": ["busy"]})
    with pytest.raises(ValidationError):
        SlackConfig(retry_backoff_seconds=10, retry_backoff_max_seconds=5)
    with pytest.raises(ValidationError):
        config.enabled = False


def test_build_dispatcher_is_off_without_url_or_when_disabled(tmp_path: Path) -> None:
    def build(config: SlackConfig, environ: dict[str, str]) -> AlertDispatcher | None:
        return build_dispatcher(
            config, environ, state_dir=tmp_path, clock=ManualClock(), hostname="h"
        )

    assert build(SlackConfig(), {}) is None
    assert build(SlackConfig(enabled=False), {ENV_WEBHOOK_URL: URL}) is None
    dispatcher = build(SlackConfig(), {ENV_WEBHOOK_URL: URL})
    assert dispatcher is not None
    assert SECRET_TOKEN not in repr(dispatcher)
    dispatcher.stop()
    assert (tmp_path / "alerts.sqlite3").exists()


def test_importing_alerts_does_not_import_slack_sdk() -> None:
    code = "import gpuwatch.alerts, sys; assert 'slack_sdk' not in sys.modules"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
