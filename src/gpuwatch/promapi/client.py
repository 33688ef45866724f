"""A client of any Prometheus-compatible HTTP API (Prometheus, VictoriaMetrics, Thanos
Query, Mimir ...): instant queries against `/api/v1/query`, every answer checked, every
request of a run ended by one deadline (`deadline.py`).

`PrometheusOptions` says where and how (the URL, path prefix kept: user:password@ in it is
used as basic auth and a ?query is sent with every request, neither ever shown; extra
headers, a bearer token or basic-auth password file, a CA bundle, the whole run's
timeout); `gpuwatch.promapi.flags` makes them from the `--prometheus*` flags. Callers
(the report's fleet loader, the plan's) turn `PrometheusError` into their one line.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwatch.promapi.deadline import SocketWatch, watched_opener
from gpuwatch.promapi.labels import LabelKey, host_of, label_key

RULE_MODES = ("auto", "on", "off")
"""--prometheus-rules: use the report's recording rules when found, require them, never
use them."""

MAX_SAMPLE = float(2**53)
"""The largest sample magnitude read: beyond it no counter is exact and sums may overflow
(a larger price, count or amount is the store's garbage, not a fleet's)."""


class PrometheusError(Exception):
    """The API could not be read: one line naming the URL (no credentials) and the cause."""


@dataclass(frozen=True, slots=True)
class PrometheusOptions:
    """Where and how to reach the Prometheus-compatible API (the `--prometheus*` flags:
    `gpuwatch.promapi.flags`)."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()
    bearer_token_file: Path | None = None
    basic_auth_user: str | None = None
    basic_auth_password_file: Path | None = None
    ca_file: Path | None = None
    insecure_skip_verify: bool = False
    timeout_seconds: float = 300.0  # the whole run's: `deadline` is set from it
    scrape_interval_seconds: float | None = None
    parallel_queries: int = 4
    rules: str = "off"  # recording rules: off (default: faster), auto (when found), on (required)
    deadline: float | None = None  # time.monotonic() by which every query ends; None: each
    # Client's is timeout_seconds after it is made

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("--prometheus: expected an http:// or https:// URL")
        if self.bearer_token_file is not None and (
            self.basic_auth_user is not None or parts.username is not None
        ):
            raise ValueError("--prometheus-bearer-token-file: choose bearer token or basic auth")
        if (self.basic_auth_password_file is not None) != (self.basic_auth_user is not None):
            raise ValueError("--prometheus-password-file: needs --prometheus-user (and back)")
        if not self.timeout_seconds > 0 or not math.isfinite(self.timeout_seconds):
            raise ValueError("--prometheus-timeout: expected a positive number of seconds")
        if self.scrape_interval_seconds is not None and not (
            0 < self.scrape_interval_seconds < math.inf
        ):
            raise ValueError("--prometheus-scrape-interval: expected a positive number of seconds")
        if self.rules not in RULE_MODES:
            raise ValueError("--prometheus-rules: expected auto, on or off")
        for name, value in self.headers:
            if not name or any(c in name + value for c in "\r\n") or ":" in name:
                raise ValueError("--prometheus-header: expected 'Name: value' on one line")

    @property
    def display_url(self) -> str:
        """The URL as a report or a message may show it: no userinfo, query or fragment."""
        return redact_url(self.url)


def redact_url(url: str) -> str:
    """`url` without userinfo, query or fragment."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


class Client:
    """Instant queries against `/api/v1/query`, authenticated as the options say, each
    ended by the run's deadline (`PrometheusOptions.deadline`).

    Every answer is checked: valid JSON of the API's shape, and every sample a finite
    number of at most `MAX_SAMPLE` (and >= 0 unless the query is `signed`); anything else
    is a PrometheusError.
    """

    def __init__(self, options: PrometheusOptions) -> None:
        parts = urllib.parse.urlsplit(options.url)
        self._display = options.display_url
        self._endpoint = self._display + "/api/v1/query"
        self._extra_query = urllib.parse.parse_qsl(parts.query)
        self._timeout = options.timeout_seconds
        self._headers = {"Accept": "application/json", "User-Agent": "gpuwatch-report"}
        self._headers.update(dict(options.headers))
        if options.bearer_token_file is not None:
            token = _read_secret(options.bearer_token_file, "--prometheus-bearer-token-file")
            self._headers["Authorization"] = f"Bearer {token}"
        user, password = parts.username, parts.password
        if options.basic_auth_user is not None and options.basic_auth_password_file is not None:
            user = options.basic_auth_user
            password = _read_secret(options.basic_auth_password_file, "--prometheus-password-file")
        if user is not None:
            pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password or '')}"
            self._headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        context: ssl.SSLContext | None = None
        if parts.scheme == "https":
            context = ssl.create_default_context(
                cafile=str(options.ca_file) if options.ca_file else None
            )
            if options.insecure_skip_verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        deadline = options.deadline
        if deadline is None:
            deadline = time.monotonic() + options.timeout_seconds
        self._watch = SocketWatch(deadline)
        self._opener = watched_opener(self._watch, context)

    def close(self) -> None:
        """Stop the deadline's timer (the client's queries are over)."""
        self._watch.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _late(self) -> PrometheusError:
        return PrometheusError(
            f"{self._display}: no complete answer within --prometheus-timeout "
            f"{self._timeout:g} s (a deadline for the whole run)"
        )

    def query(self, promql: str, at: float) -> tuple[str, list[Any]]:
        """Run one instant query at `at` (Unix seconds); (resultType, result)."""
        remaining = self._watch.remaining()
        if remaining <= 0:
            raise self._late()
        form = [("query", promql), ("time", f"{at:.3f}"), *self._extra_query]
        body = urllib.parse.urlencode(form).encode()
        headers = {**self._headers, "Content-Type": "application/x-www-form-urlencoded"}
        request = urllib.request.Request(self._endpoint, data=body, headers=headers)  # noqa: S310
        try:
            with self._opener.open(request, timeout=remaining) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if self._watch.expired:
                raise self._late() from None
            raise PrometheusError(f"{self._display}: HTTP {exc.code}{_api_error(exc)}") from None
        except (
            urllib.error.URLError,
            OSError,
            ValueError,
            RecursionError,
            http.client.HTTPException,
        ) as exc:
            if self._watch.expired or isinstance(exc, TimeoutError):
                raise self._late() from None
            reason = getattr(exc, "reason", exc)
            raise PrometheusError(f"{self._display}: {_one_line(str(reason))}") from None
        if not isinstance(payload, dict):
            raise self._shape(promql, "not a JSON object")
        if payload.get("status") != "success":
            error = _one_line(str(payload.get("error", "query failed")))
            raise PrometheusError(f"{self._display}: {error}")
        data = payload.get("data")
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("resultType"), str)
            or not isinstance(data.get("result"), list)
        ):
            raise self._shape(promql, "no data.resultType and data.result list")
        return str(data["resultType"]), list(data["result"])

    def vector(
        self, promql: str, at: float, *, signed: bool = False, labels_only: bool = False
    ) -> dict[LabelKey, float]:
        """An instant vector as {labels: value}; `signed`: values below 0 are allowed;
        `labels_only`: the caller reads the labels only, every value is 0."""
        kind, result = self.query(promql, at)
        if kind != "vector":
            raise PrometheusError(f"{self._display}: expected a vector, got {_one_line(kind)}")
        out: dict[LabelKey, float] = {}
        for item in result:
            key = self._labels(promql, item)
            pair = item.get("value")
            if not isinstance(pair, list) or len(pair) != 2:
                raise self._shape(promql, "a sample is not [time, value]")
            self._number(promql, key, pair[0], signed=False)
            out[key] = 0.0 if labels_only else self._number(promql, key, pair[1], signed=signed)
        return out

    def matrix(self, promql: str, at: float) -> dict[LabelKey, list[tuple[float, float]]]:
        """A range vector's raw samples as {labels: [(unix seconds, value)]}, times rising."""
        kind, result = self.query(promql, at)
        if kind != "matrix":
            raise PrometheusError(f"{self._display}: expected a matrix, got {_one_line(kind)}")
        out: dict[LabelKey, list[tuple[float, float]]] = {}
        for item in result:
            key = self._labels(promql, item)
            values = item.get("values")
            if not isinstance(values, list):
                raise self._shape(promql, "a series has no values list")
            samples: list[tuple[float, float]] = []
            for pair in values:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise self._shape(promql, "a sample is not [time, value]")
                t = self._number(promql, key, pair[0], signed=False)
                if samples and t <= samples[-1][0]:
                    raise self._shape(promql, "sample times out of order")
                samples.append((t, self._number(promql, key, pair[1], signed=False)))
            out[key] = samples
        return out

    def _labels(self, promql: str, item: object) -> LabelKey:
        metric = item.get("metric") if isinstance(item, dict) else None
        if not isinstance(metric, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
        ):
            raise self._shape(promql, "a series has no metric of string labels")
        return label_key(metric)

    def _number(self, promql: str, key: LabelKey, raw: object, *, signed: bool) -> float:
        """`raw` (a sample's time or value) as a float: finite, and >= 0 unless `signed`."""
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise self._shape(promql, "a sample is not a number")
        try:
            value = float(raw)
        except ValueError:
            raise self._shape(promql, f"a sample is {_one_line(str(raw))!r}") from None
        if not abs(value) <= MAX_SAMPLE or (value < 0 and not signed):
            expected = "a finite number" + ("" if signed else " >= 0") + " of at most 2^53"
            where = f" (host {host_of(key)!r})" if host_of(key) else ""
            raise PrometheusError(
                f"{self._display}: {_metric_of(promql)}{where} is {_one_line(str(raw))}: "
                f"expected {expected}"
            )
        return value

    def _shape(self, promql: str, what: str) -> PrometheusError:
        return PrometheusError(
            f"{self._display}: not a Prometheus API answer to {_metric_of(promql)} ({what})"
        )


def _metric_of(promql: str) -> str:
    """The first gpuwatch metric a query names (what a message about its answer shows)."""
    found = re.search(r"gpuwatch[_:][A-Za-z0-9_:]*", promql)
    return found.group(0) if found else "a query"


def _one_line(text: str, limit: int = 200) -> str:
    """`text` on one line (control characters escaped), at most `limit` characters."""
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit * 2])
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _api_error(exc: urllib.error.HTTPError) -> str:
    try:
        error = json.loads(exc.read()).get("error")
    except (ValueError, OSError, AttributeError):
        return ""
    return f" ({_one_line(str(error))})" if error else ""


def _read_secret(path: Path, flag: str) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise PrometheusError(f"{flag}: cannot read {path}: {exc.strerror}") from None
