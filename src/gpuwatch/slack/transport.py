"""Posting to a Slack incoming webhook: the one place that imports `slack_sdk`, lazily.

`WebhookTransport.post` makes exactly one HTTP attempt through
`slack_sdk.webhook.WebhookClient` (with `retry_handlers=[]`: the SDK does not raise on
HTTP errors, and its rate-limit handler raises on a date `Retry-After`, so the retry
policy lives here instead) and returns an `HttpResult`. `classify` maps a result to
what to do; `send_with_retries` applies the bounded retry policy to one message.
Every text that leaves this module has the webhook URL scrubbed out.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast
from urllib.error import URLError

from gpuwatch.core.health import backoff_seconds
from gpuwatch.slack.secret import WebhookUrl

if TYPE_CHECKING:
    from slack_sdk.webhook import WebhookClient  # noqa: TID251 - types only

ErrorKind = Literal["timeout", "connection"]
Action = Literal["sent", "retry", "wait", "dead", "drop"]
Outcome = Literal["sent", "dead", "dropped", "deferred", "stopped"]

MAX_BODY_CHARS = 120


@dataclass(frozen=True, slots=True)
class HttpResult:
    """One attempt: Slack's answer, or why there was none. Texts are URL-free."""

    status: int | None  # HTTP status; None when no answer came
    body: str = ""  # Slack's answer, e.g. "ok", "no_service" (short, one line)
    retry_after_seconds: float | None = None  # from a Retry-After header
    error: ErrorKind | None = None  # why no answer came
    detail: str = ""  # the exception's text when no answer came


def describe_answer(result: HttpResult | None) -> str:
    """A URL-free summary of Slack's last answer, for log lines."""
    if result is None:
        return "no attempt"
    if result.status is None:
        return f"{result.error}: {result.detail}" if result.detail else str(result.error)
    return f"HTTP {result.status} {result.body}".strip()


@functools.cache
def _quiet_logger() -> logging.Logger:
    """A logger for slack_sdk that drops everything: its debug lines contain the URL."""
    quiet = logging.Logger("gpuwatch.alerts.slack_sdk", logging.CRITICAL + 1)
    quiet.disabled = True
    quiet.propagate = False
    quiet.addHandler(logging.NullHandler())
    return quiet


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_BODY_CHARS else line[: MAX_BODY_CHARS - 1] + "…"


def parse_retry_after(value: str | None, now_seconds: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(float(text), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(when.timestamp() - now_seconds, 0.0)


def _header(headers: Any, name: str) -> str | None:
    try:
        items = headers.items()
    except AttributeError:
        return None
    for key, value in items:
        if str(key).lower() == name:
            return str(value[0] if isinstance(value, list) and value else value)
    return None


def _error_kind(exc: BaseException) -> ErrorKind:
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, URLError) and isinstance(exc.reason, TimeoutError):
        return "timeout"
    return "connection"


class WebhookTransport:
    """One POST per call to the webhook, through slack_sdk's WebhookClient."""

    def __init__(self, url: WebhookUrl, timeout_seconds: float, now: Callable[[], float]) -> None:
        self._url = url
        self._timeout_seconds = timeout_seconds
        self._now = now
        self._client: WebhookClient | None = None

    def _webhook_client(self) -> WebhookClient:
        if self._client is None:
            # lazy: slack_sdk only when a message is sent
            from slack_sdk.webhook import WebhookClient  # noqa: PLC0415, TID251

            self._client = WebhookClient(
                self._url.reveal(),
                # annotated int, but urllib takes float seconds
                timeout=cast("int", self._timeout_seconds),
                logger=_quiet_logger(),
                retry_handlers=[],  # one attempt per call; the policy is send_with_retries
            )
        return self._client

    def post(self, payload: Mapping[str, Any]) -> HttpResult:
        """Send `payload` once; never raises for network or HTTP failures."""
        try:
            response = self._webhook_client().send_dict(dict(payload))
        except Exception as exc:  # noqa: BLE001 - any failure to reach Slack is an outcome
            detail = self._url.scrub(f"{type(exc).__name__}: {exc}")
            return HttpResult(None, error=_error_kind(exc), detail=_one_line(detail))
        retry_after = parse_retry_after(_header(response.headers, "retry-after"), self._now())
        return HttpResult(
            int(response.status_code),
            _one_line(self._url.scrub(str(response.body or ""))),
            retry_after,
        )


def classify(result: HttpResult) -> tuple[Action, str | None]:
    """What to do after one attempt, and the failure reason for the metric (None: ok)."""
    status = result.status
    if status is None:
        return "retry", result.error or "connection"
    if 200 <= status < 300:
        return "sent", None
    if status == 429:
        return "wait", "rate_limited"
    if status >= 500:
        return "retry", "server_error"
    if status in (403, 404, 410):
        return "dead", "webhook_dead"  # revoked, channel deleted or archived, prohibited
    if status == 400:
        return "drop", "invalid_payload"
    if 400 <= status < 500:
        return "drop", "rejected"
    return "retry", "http_error"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries for one message within one delivery round."""

    max_retries: int = 5
    backoff_seconds: float = 1.0  # first wait; doubles each retry
    backoff_max_seconds: float = 60.0  # longest wait inside a round; also the next-round delay

    def backoff(self, retry: int) -> float:
        """Seconds before retry number `retry` (0-based)."""
        return backoff_seconds(retry, self.backoff_seconds, self.backoff_max_seconds)


@dataclass(frozen=True, slots=True)
class SendResult:
    """How one message's delivery round ended."""

    outcome: Outcome
    last: HttpResult | None = None
    defer_seconds: float = 0.0  # for "deferred": wait at least this before the next round
    reasons: tuple[str, ...] = field(default=())  # one failure reason per failed attempt


class Transport(Protocol):
    """What `send_with_retries` needs: one attempt per call (see WebhookTransport)."""

    def post(self, payload: Mapping[str, Any]) -> HttpResult:
        """Send once; report the answer or why there was none."""
        ...


def send_with_retries(
    transport: Transport,
    payload: Mapping[str, Any],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], object],
    stopping: Callable[[], bool],
    on_failure: Callable[[str], None],
    before_attempt: Callable[[], None] = lambda: None,
    after_failed_attempt: Callable[[], None] = lambda: None,
) -> SendResult:
    """Post `payload`, retrying 429 (after Retry-After), 5xx, timeouts and connection errors.

    At most `policy.max_retries` retries; then, or when Retry-After exceeds
    `backoff_max_seconds`, the result is "deferred" and the message stays queued.
    `on_failure(reason)` is called once per failed attempt.
    """
    reasons: list[str] = []
    last: HttpResult | None = None
    for attempt in range(policy.max_retries + 1):
        if stopping():
            return SendResult("stopped", last, reasons=tuple(reasons))
        before_attempt()
        last = transport.post(payload)
        action, reason = classify(last)
        if action == "sent":
            return SendResult("sent", last, reasons=tuple(reasons))
        after_failed_attempt()
        assert reason is not None  # every non-sent action has a reason
        reasons.append(reason)
        on_failure(reason)
        if action == "dead":
            return SendResult("dead", last, reasons=tuple(reasons))
        if action == "drop":
            return SendResult("dropped", last, reasons=tuple(reasons))
        wait = policy.backoff(attempt)
        if action == "wait" and last.retry_after_seconds is not None:
            wait = last.retry_after_seconds
            if wait > policy.backoff_max_seconds:
                return SendResult("deferred", last, wait, tuple(reasons))
        if attempt == policy.max_retries:
            break
        sleep(wait)
    return SendResult("deferred", last, policy.backoff_max_seconds, tuple(reasons))
