"""Slack alerts about wasted GPUs: policy, Block Kit messages, the dispatcher.

The Slack transport, secret, outbox and mrkdwn escaping live in `gpuwatch.slack` (which
imports `slack_sdk` only when a message is sent, in `gpuwatch.slack.transport`):
importing `gpuwatch.alerts` does not load it. Nor does it load the dispatcher
(`dispatcher.py`), the outbox (sqlite3), the messages (`messages.py`) or the
`gpuwatch alert` command (`command.py`): this package's `__init__` imports only the
config, the secret, the outbox's error and `build_dispatcher` (`factory.py`, which
imports the dispatcher when a webhook is configured); import the others from their own
modules. This package must not import `gpuwatch.config` at module level (that module
imports `gpuwatch.alerts.config`). See docs/alerts.md.
"""

from __future__ import annotations

from gpuwatch.alerts.config import AlertsConfig, SlackConfig
from gpuwatch.alerts.factory import build_dispatcher, slack_off_reason
from gpuwatch.slack.errors import OutboxError
from gpuwatch.slack.secret import ENV_WEBHOOK_URL, WebhookSecretError, resolve_webhook_url

__all__ = [
    "ENV_WEBHOOK_URL",
    "AlertsConfig",
    "OutboxError",
    "SlackConfig",
    "WebhookSecretError",
    "build_dispatcher",
    "resolve_webhook_url",
    "slack_off_reason",
]
