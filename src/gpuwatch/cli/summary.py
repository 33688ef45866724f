"""A summary through Slack (`gpuwatch report --slack`, `gpuwatch plan --slack`).

`webhook` is the preamble: the URL, or the one line saying none is configured, checked
before any work; `send` posts the payload through `gpuwatch.slack.summary` (its outbox
keeps it for a retry) and prints the outcome line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from gpuwatch.cli.common import EXIT_FAILURE, EXIT_OK, NO_WEBHOOK
from gpuwatch.config import Config
from gpuwatch.slack.secret import resolve_webhook_url
from gpuwatch.slack.summary import send_summary


def webhook(config: Config, environ: Mapping[str, str], err: IO[str]) -> str | None:
    """The webhook URL of `[alerts.slack]`; None after the line saying there is none (the
    command exits 2). An unreadable secret raises `WebhookSecretError`."""
    url = resolve_webhook_url(config.alerts.slack, environ)
    if url is None:
        print(f"gpuwatch: {NO_WEBHOOK}", file=err)
    return url


def send(
    payload: dict[str, Any],
    config: Config,
    url: str,
    err: IO[str],
    sleep: Callable[[float], object] | None = None,
) -> int:
    """Post `payload`, print the outcome; EXIT_OK when Slack took it, else EXIT_FAILURE."""
    result = send_summary(
        payload,
        config.alerts.slack,
        url,
        config.agent.state_dir,
        now=time.time,
        sleep=sleep or time.sleep,
    )
    print(f"gpuwatch: {result.line}", file=err)
    return EXIT_FAILURE if result.failed else EXIT_OK
