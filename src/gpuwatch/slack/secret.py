"""The Slack webhook URL: where it comes from and how it is kept out of every output.

The URL is a bearer secret (whoever has it can post to the channel). It is read from
`GPUWATCH_SLACK_WEBHOOK_URL` or from the file named by `[alerts.slack] webhook_url_file`,
never from config text; it is held in a `WebhookUrl`, whose repr and str are redacted,
and `WebhookUrl.scrub` removes it from any text before that text is logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, urlsplit

ENV_WEBHOOK_URL = "GPUWATCH_SLACK_WEBHOOK_URL"
REDACTED = "<redacted webhook URL>"


class WebhookFileConfig(Protocol):
    """Where a config names the webhook URL's file (`[alerts.slack] webhook_url_file`)."""

    @property
    def webhook_url_file(self) -> Path | None:
        """The file holding the URL; None: the environment alone."""
        ...


class WebhookSecretError(Exception):
    """The webhook URL cannot be read or is not a URL; the message never contains it."""


class WebhookUrl:
    """A webhook URL that never shows itself: `reveal()` is the only way to read it."""

    __slots__ = ("_secrets", "_value")

    def __init__(self, value: str, *, source: str = "the webhook URL") -> None:
        url = value.strip()
        problem = _problem(url)
        if problem is not None:
            raise WebhookSecretError(f"{source} is not an http(s) URL: {problem}")
        self._value = url
        parts = urlsplit(url)
        # the path, query, fragment and any user info carry the token: scrub each of them
        # (and each path segment) when it appears alone, raw, quoted or repr-escaped
        tails = [parts.path, parts.query, parts.fragment, *parts.path.split("/")]
        if "@" in parts.netloc:
            tails.append(parts.netloc)
        plain = {url, *(t for t in tails if len(t) >= 8)}
        variants = {v for t in plain for v in (t, quote(t, safe=""), repr(t)[1:-1])}
        self._secrets = tuple(sorted(variants, key=len, reverse=True))

    def reveal(self) -> str:
        """The URL itself, for the HTTP client only."""
        return self._value

    def scrub(self, text: str) -> str:
        """`text` with the URL (and its token-bearing path) replaced by a placeholder."""
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def __repr__(self) -> str:
        return f"WebhookUrl({REDACTED})"

    __str__ = __repr__


def _problem(url: str) -> str | None:
    """Why `url` cannot be a webhook URL, in words that never quote it; None if it can."""
    if any(not c.isprintable() or c.isspace() for c in url):
        return "it contains a control or space character"
    if not url.isascii():
        return "it contains non-ASCII characters (percent-encode them)"
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError when out of range or not a number
    except ValueError:
        return "its host or port is malformed"
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "it needs http:// or https:// and a host"
    return None


def resolve_webhook_url(config: WebhookFileConfig, environ: Mapping[str, str]) -> str | None:
    """The webhook URL: `GPUWATCH_SLACK_WEBHOOK_URL` wins, else `webhook_url_file`.

    Returns None when neither is set (an empty variable counts as unset). Raises
    WebhookSecretError, whose message names the file but never the URL, when the file
    cannot be read, is empty, or either source does not hold an http(s) URL.
    """
    from_env = environ.get(ENV_WEBHOOK_URL, "").strip()
    if from_env:
        return WebhookUrl(from_env, source=ENV_WEBHOOK_URL).reveal()
    path = config.webhook_url_file
    if path is None:
        return None
    source = f"alerts.slack.webhook_url_file {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WebhookSecretError(f"{source}: no such file") from None
    except OSError as exc:
        raise WebhookSecretError(f"{source}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise WebhookSecretError(f"{source}: not UTF-8 text") from None
    if not text.strip():
        raise WebhookSecretError(f"{source}: the file is empty")
    return WebhookUrl(text, source=source).reveal()
