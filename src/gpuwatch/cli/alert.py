"""`gpuwatch alert test`: send one test message through the configured webhook.

`run` loads the config and calls `run_alert` with its `[alerts.slack]` section. Exit
codes: 0 delivered, 1 Slack did not take it, 2 no (readable) webhook.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from gpuwatch.alerts.config import SlackConfig
from gpuwatch.alerts.messages import build_test_message
from gpuwatch.cli import add_command
from gpuwatch.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, NO_WEBHOOK
from gpuwatch.config import load_config
from gpuwatch.core.clock import SystemClock
from gpuwatch.slack.secret import (
    WebhookSecretError,
    WebhookUrl,
    resolve_webhook_url,
)
from gpuwatch.slack.transport import HttpResult, WebhookTransport, classify

_PERMANENT_HINTS = {
    "no_service": "the webhook was removed or revoked; create a new one",
    "channel_not_found": "the channel was deleted; create a webhook for another channel",
    "channel_is_archived": "the channel is archived; unarchive it or create a new webhook",
    "action_prohibited": "the workspace does not allow this webhook to post",
    "invalid_token": "the webhook token is invalid; create a new webhook",
}


def add_alert_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add `alert test [--config FILE]` to the CLI's subcommands; returns the `alert` parser."""
    return add_command(subparsers, "alert")


def add_arguments(alert: argparse.ArgumentParser) -> None:
    """`gpuwatch alert`'s subcommands: `test [--config FILE]`."""
    commands = alert.add_subparsers(dest="alert_command", required=True)
    test = commands.add_parser("test", help="send a test message to the Slack webhook")
    test.add_argument("--config", type=Path, help="TOML config file")


def run(args: argparse.Namespace) -> int:
    """Run `gpuwatch alert` with the `--config` file's `[alerts.slack]`."""
    config = load_config(args.config)
    hostname = config.agent.hostname or socket.gethostname()
    return run_alert(args, slack=config.alerts.slack, hostname=hostname, environ=os.environ)


def run_alert(
    args: argparse.Namespace, *, slack: SlackConfig, hostname: str, environ: Mapping[str, str]
) -> int:
    """Run the `alert` subcommand in `args` with the loaded `[alerts.slack]` section."""
    if args.alert_command == "test":
        return run_alert_test(slack, hostname, environ)
    raise AssertionError(args.alert_command)  # argparse only lets known commands through


def _outcome_line(result: HttpResult, timeout: float) -> tuple[bool, str]:
    action, _ = classify(result)
    if action == "sent":
        return True, f"Slack accepted the test message (HTTP {result.status})"
    if result.status is None:
        if result.error == "timeout":
            return False, f"no answer from Slack within {timeout:g} s (timeout)"
        return False, f"cannot reach Slack: {result.detail}"
    answer = f"Slack answered HTTP {result.status} {result.body}".rstrip()
    hint = _PERMANENT_HINTS.get(result.body)
    if hint is None and action == "wait":
        hint = "rate limited, try again in a minute"
    if hint is None and action == "retry":
        hint = "Slack is having trouble, try again later"
    return False, f"{answer}: {hint}" if hint else answer


def send_test_message(webhook_url: str, hostname: str, timeout: float) -> tuple[bool, str]:
    """Post one test message (no retries); (delivered, a one-line outcome without the URL)."""
    try:
        url = WebhookUrl(webhook_url)
    except WebhookSecretError as exc:
        return False, str(exc)
    clock = SystemClock()
    transport = WebhookTransport(url, timeout, clock.time)
    result = transport.post(build_test_message(hostname, clock.time()))
    return _outcome_line(result, timeout)


def run_alert_test(slack: SlackConfig, hostname: str, environ: Mapping[str, str]) -> int:
    """`gpuwatch alert test`: print the outcome; 0 sent, 1 not delivered, 2 no webhook."""
    try:
        url = resolve_webhook_url(slack, environ)
    except WebhookSecretError as exc:
        print(f"gpuwatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if url is None:
        print(f"gpuwatch: {NO_WEBHOOK}", file=sys.stderr)
        return EXIT_USAGE
    if not slack.enabled:
        print(
            "gpuwatch: note: alerts.slack.enabled is false, the agent sends no alerts",
            file=sys.stderr,
        )
    ok, line = send_test_message(url, hostname, slack.timeout_seconds)
    if ok:
        print(f"gpuwatch: {line}")
        return EXIT_OK
    print(f"gpuwatch: {line}", file=sys.stderr)
    return EXIT_FAILURE
