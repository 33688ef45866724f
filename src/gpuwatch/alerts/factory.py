"""Whether Slack alerting is on, and the dispatcher when it is.

Light on purpose: the agent asks here on every start, and a host without Slack alerting
never imports the dispatcher, its SQLite outbox (sqlite3) or the delivery code.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwatch.alerts.config import SlackConfig
from gpuwatch.core.clock import Clock
from gpuwatch.slack.secret import resolve_webhook_url

if TYPE_CHECKING:
    from gpuwatch.alerts.dispatcher import AlertDispatcher
    from gpuwatch.alerts.messages import CostHook


def build_dispatcher(
    config: SlackConfig,
    environ: Mapping[str, str],
    *,
    state_dir: Path,
    clock: Clock,
    hostname: str,
    costs: CostHook | None = None,
) -> AlertDispatcher | None:
    """The dispatcher the agent should run, or None when Slack alerting is off.

    Off when `config.enabled` is False or no webhook URL is configured. Raises
    WebhookSecretError (unreadable URL file) and OutboxError (unusable state_dir): both
    are startup errors a user can fix, with URL-free messages.
    """
    if not config.enabled:
        return None
    url = resolve_webhook_url(config, environ)
    if url is None:
        return None
    # lazy: the dispatcher and its SQLite outbox only when a webhook is configured
    from gpuwatch.alerts.dispatcher import AlertDispatcher  # noqa: PLC0415

    return AlertDispatcher(config, url, state_dir, clock, hostname, costs=costs)


def slack_off_reason(config: SlackConfig) -> str:
    """Why `build_dispatcher` returned None, in one line a user can act on."""
    if not config.enabled:
        return "[alerts.slack] enabled = false"
    return (
        "no webhook URL: set GPUWATCH_SLACK_WEBHOOK_URL or [alerts.slack] webhook_url_file "
        "(docs/alerts.md)"
    )
