"""A one-off summary (a report's, a plan's) sent through Slack with an outbox.

`send_summary` queues the message in a SQLite outbox of its own (`state_dir/reports.sqlite3`,
the alerts' `Outbox` class: an agent's alert dispatcher never sees it, so no message goes
out twice) and delivers everything queued there with the alerts' retry policy; a message
Slack could not take stays queued for the next run. The webhook URL is never shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpuwatch.slack.outbox import Outbox
from gpuwatch.slack.secret import WebhookUrl
from gpuwatch.slack.transport import (
    RetryPolicy,
    Transport,
    WebhookTransport,
    describe_answer,
    send_with_retries,
)

REPORT_OUTBOX_FILE = "reports.sqlite3"


class DeliverySettings(Protocol):
    """How to deliver (`[alerts.slack]`: `gpuwatch.alerts.config.SlackConfig`)."""

    @property
    def timeout_seconds(self) -> float:
        """One HTTP attempt's timeout."""
        ...

    @property
    def max_retries(self) -> int:
        """Retries of one message within one round."""
        ...

    @property
    def retry_backoff_seconds(self) -> float:
        """The first wait; doubles each retry."""
        ...

    @property
    def retry_backoff_max_seconds(self) -> float:
        """The longest wait."""
        ...

    @property
    def outbox_max_messages(self) -> int:
        """Messages the outbox keeps; the oldest are dropped beyond."""
        ...


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """What became of the queued summaries."""

    sent: int
    pending: int  # still queued (Slack failed; the next report tries again)
    line: str  # one URL-free line for the user

    @property
    def failed(self) -> bool:
        """True when a summary was refused or is still queued."""
        return self.pending > 0 or self.refused

    refused: bool = False  # Slack refused a summary (dropped)


def send_summary(
    payload: dict[str, Any],
    config: DeliverySettings,
    webhook_url: str,
    state_dir: Path,
    *,
    now: Callable[[], float],
    sleep: Callable[[float], object],
    transport: Transport | None = None,
) -> SendOutcome:
    """Queue `payload` in the report outbox, then deliver everything queued there.

    Raises OutboxError when the outbox cannot be used (state_dir not writable).
    """
    url = WebhookUrl(webhook_url)
    transport = transport or WebhookTransport(url, config.timeout_seconds, now)
    policy = RetryPolicy(
        config.max_retries, config.retry_backoff_seconds, config.retry_backoff_max_seconds
    )
    outbox = Outbox(
        state_dir / REPORT_OUTBOX_FILE, max_messages=config.outbox_max_messages, now=now
    )
    sent = 0
    refused = False
    line = "Slack took the report summary"
    try:
        outbox.enqueue(lambda _id: payload, now(), {})
        last_id = 0
        while (message := outbox.next_pending(last_id)) is not None:
            last_id = message.id
            result = send_with_retries(
                transport,
                message.payload,
                policy,
                sleep=sleep,
                stopping=lambda: False,
                on_failure=lambda _reason: None,
                before_attempt=lambda: outbox.begin_attempt(message.id),
                after_failed_attempt=lambda: outbox.end_attempt(message.id),
            )
            answer = describe_answer(result.last)
            if result.outcome == "sent":
                outbox.remove(message.id, success_seconds=now())
                sent += 1
            elif result.outcome == "dropped":
                outbox.remove(message.id)
                refused = True
                line = f"Slack refused the report summary ({answer}); dropped it"
            else:
                line = f"Slack did not take the report summary ({answer}); it stays queued"
                break
        return SendOutcome(sent, outbox.pending_count, url.scrub(line), refused)
    finally:
        outbox.close()
