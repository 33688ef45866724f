"""Slack alerts about wasted GPUs: policy, Block Kit messages, the dispatcher.

The Slack transport, secret, outbox and mrkdwn escaping live in `gpuwatch.slack` (which
imports `slack_sdk` only when a message is sent, in `gpuwatch.slack.transport`):
importing `gpuwatch.alerts` does not load it. Nor does it
load the dispatcher or the outbox (sqlite3): the config,
the secret and `build_dispatcher` are imported here, the other names on first use
(PEP 562), so a host without Slack alerting never imports them. This package must not
import `gpuwatch.config` at module level (that module imports `gpuwatch.alerts.config`).
See docs/alerts.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpuwatch.alerts.config import AlertsConfig, SlackConfig
from gpuwatch.alerts.factory import build_dispatcher, slack_off_reason
from gpuwatch.slack.secret import ENV_WEBHOOK_URL, WebhookSecretError, resolve_webhook_url

if TYPE_CHECKING:
    from gpuwatch.alerts.dispatcher import AlertDispatcher
    from gpuwatch.alerts.messages import CostHook
    from gpuwatch.slack.outbox import OutboxError

__all__ = [
    "ENV_WEBHOOK_URL",
    "AlertDispatcher",
    "AlertsConfig",
    "CostHook",
    "OutboxError",
    "SlackConfig",
    "WebhookSecretError",
    "build_dispatcher",
    "resolve_webhook_url",
    "slack_off_reason",
]

_LAZY = {
    "AlertDispatcher": "gpuwatch.alerts.dispatcher",
    "CostHook": "gpuwatch.alerts.messages",
    "OutboxError": "gpuwatch.slack.outbox",
}


def __getattr__(name: str) -> Any:
    """The dispatcher's and outbox's names, imported on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
