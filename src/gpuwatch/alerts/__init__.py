"""Slack alerts about wasted GPUs: policy, Block Kit messages, SQLite outbox, delivery.

Only this package imports `slack_sdk`, and only when Slack alerting is on (lazily, in
`gpuwatch.alerts.delivery`): importing `gpuwatch.alerts` does not load it. This package
must not import `gpuwatch.config` at module level (that module imports
`gpuwatch.alerts.config`). See docs/alerts.md.
"""

from gpuwatch.alerts.command import add_alert_parser, run_alert, run_alert_test, send_test_message
from gpuwatch.alerts.config import AlertsConfig, SlackConfig
from gpuwatch.alerts.dispatcher import AlertDispatcher, build_dispatcher
from gpuwatch.alerts.messages import CostHook
from gpuwatch.alerts.outbox import OutboxError
from gpuwatch.alerts.secret import ENV_WEBHOOK_URL, WebhookSecretError, resolve_webhook_url

__all__ = [
    "ENV_WEBHOOK_URL",
    "AlertDispatcher",
    "AlertsConfig",
    "CostHook",
    "OutboxError",
    "SlackConfig",
    "WebhookSecretError",
    "add_alert_parser",
    "build_dispatcher",
    "resolve_webhook_url",
    "run_alert",
    "run_alert_test",
    "send_test_message",
]
