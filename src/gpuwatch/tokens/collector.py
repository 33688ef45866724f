"""TokenCollector: scrapes inference servers' token counters on a schedule.

The agent calls `scrape_due()` every second or so; each source is fetched when its
`interval_seconds` has elapsed, parsed (`gpuwatch.tokens.parse`) and its counters
reset-corrected (`gpuwatch.tokens.counters`). A source that is down or serves garbage
becomes `up = False` with one WARNING per failure episode; its totals are kept and the
other sources go on. The only I/O is the injected `fetch(url, timeout)` (default:
`UrllibFetch`, plain urllib without proxies).
"""

from __future__ import annotations

import gzip
import http.client
import logging
import math
import threading
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.clock import Clock
from gpuwatch.tokens.config import TokenSourceConfig, check_unique_names
from gpuwatch.tokens.counters import GroupedCounter, ResetCorrectedCounter
from gpuwatch.tokens.parse import counter_series

log = logging.getLogger(__name__)

Fetch = Callable[[str, float], bytes]
"""fetch(url, timeout seconds) -> response body; raises OSError (urllib's errors
included), http.client.HTTPException or ValueError when the source fails."""

MAX_BODY_BYTES = 64 * 1024 * 1024
ACCEPT = "text/plain;version=0.0.4;q=1.0,*/*;q=0.1"
SOURCE_ERRORS = (OSError, http.client.HTTPException, ValueError)
"""What `fetch` and the parser raise when a source fails (anything else is a bug)."""


class TokenSourceError(ValueError):
    """A source answered, but not with something usable; the message is log-safe."""


class UrllibFetch:
    """The default fetch: one GET with urllib, ignoring proxy environment variables."""

    def __init__(self, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._max = max_body_bytes

    def __call__(self, url: str, timeout: float) -> bytes:
        """The body of GET `url` (timeout in seconds per connect or read); raises on
        connection errors, timeouts, HTTP errors and oversized or truncated bodies."""
        request = urllib.request.Request(url, headers={"Accept": ACCEPT})  # noqa: S310 - http(s) only (config)
        try:
            with self._opener.open(request, timeout=timeout) as response:
                body: bytes = response.read(self._max + 1)
                missing = getattr(response, "length", None)  # of Content-Length, not received
                encoding = response.headers.get("Content-Encoding", "")
        except urllib.error.HTTPError as exc:
            exc.close()  # it holds the error response open
            raise
        if len(body) > self._max:
            raise TokenSourceError(f"response larger than {self._max} bytes")
        if missing:  # read(n) returns a short body where read() would raise IncompleteRead
            raise TokenSourceError(f"truncated response: {missing} bytes missing")
        if encoding.strip().lower() == "gzip":
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError, zlib.error):
                raise TokenSourceError("invalid gzip body") from None
        return body


@dataclass(frozen=True)
class TokenReading:
    """What is known about one token source.

    Totals are cumulative tokens since gpuwatch started watching the source (0 at the
    first successful scrape), corrected for counter resets, so they never decrease.
    `last_scrape_seconds` is the clock time (epoch s) of the last successful scrape,
    None before one; `error` says why the last scrape failed, None when it succeeded.
    `prompt_tokens_by_origin` splits the prompt tokens by where their KV cache came from,
    as (origin, tokens) sorted by origin, when the server exposes such a counter (vLLM's
    `vllm:prompt_tokens_by_source_total`); empty otherwise.
    """

    source: str
    up: bool
    prompt_tokens_total: float
    generation_tokens_total: float
    last_scrape_seconds: float | None
    error: str | None
    prompt_tokens_by_origin: tuple[tuple[str, float], ...] = ()


def describe(exc: BaseException) -> str:
    """A short, log-safe reason for a failed scrape."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        return describe(reason) if isinstance(reason, BaseException) else str(reason)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Source:
    """One source's state; `lock` serializes its scrapes."""

    def __init__(self, config: TokenSourceConfig) -> None:
        self.config = config
        self.names = config.counter_names()
        self.prompt = ResetCorrectedCounter()
        self.generation = ResetCorrectedCounter()
        self.by_origin_name: str | None = None
        self.by_origin: GroupedCounter | None = None
        breakdown = config.prompt_by_origin()
        if breakdown is not None:
            self.by_origin_name = breakdown[0]
            self.by_origin = GroupedCounter(breakdown[1])
        self.lock = threading.Lock()
        self.reading = TokenReading(config.name, False, 0.0, 0.0, None, None)
        self.duration_seconds: float | None = None
        self.next_due: float | None = None
        self.failing = False


class TokenCollector:
    """Token counters of inference servers, scraped on each source's own interval."""

    def __init__(
        self,
        sources: Sequence[TokenSourceConfig],
        clock: Clock,
        *,
        fetch: Fetch | None = None,
    ) -> None:
        """Raises ValueError when two sources share a name."""
        check_unique_names(list(sources))
        self._clock = clock
        self._fetch: Fetch = fetch if fetch is not None else UrllibFetch()
        self._sources = {s.name: _Source(s) for s in sources}
        self._schedule_lock = threading.Lock()
        self.sources: tuple[TokenSourceConfig, ...] = tuple(sources)

    def scrape_due(self) -> None:
        """Scrape every source whose interval has elapsed (all of them the first time).

        Each source keeps a fixed grid of `interval_seconds` from its first scrape;
        slots missed while late are skipped, not caught up. Sources are scraped one
        after the other; a failure only marks its source down.
        """
        with self._schedule_lock:
            now = self._clock.monotonic()
            due = []
            for source in self._sources.values():
                if source.next_due is not None and now < source.next_due:
                    continue
                interval = source.config.interval_seconds
                following = (now if source.next_due is None else source.next_due) + interval
                if following <= now:  # late: skip the missed slots, stay on the grid
                    following += interval * math.floor((now - following) / interval + 1.0)
                source.next_due = following
                due.append(source.config.name)
        for name in due:
            self.scrape(name)

    def scrape(self, name: str) -> TokenReading:
        """Scrape source `name` now (KeyError if unknown); never raises for a source
        failure, which is reported in the returned reading."""
        source = self._sources[name]
        with source.lock:
            start = self._clock.monotonic()
            prompt_name, generation_name = source.names
            try:
                body = self._fetch(source.config.url, source.config.timeout_seconds)
                optional = () if source.by_origin_name is None else (source.by_origin_name,)
                series = counter_series(body, source.names, source.config.label_matchers, optional)
            except SOURCE_ERRORS as exc:
                reading = self._failed(source, describe(exc))
            else:
                resets = source.prompt.resets + source.generation.resets
                source.prompt.observe(series[prompt_name])
                source.generation.observe(series[generation_name])
                by_origin: tuple[tuple[str, float], ...] = ()
                if source.by_origin is not None and source.by_origin_name in series:
                    source.by_origin.observe(series[source.by_origin_name])
                    by_origin = tuple(sorted(source.by_origin.totals.items()))
                if source.prompt.resets + source.generation.resets > resets:
                    log.info("token source %r: counters went back (server restart?)", name)
                if source.failing:
                    log.info("token source %r is up again", name)
                    source.failing = False
                reading = TokenReading(
                    name,
                    True,
                    source.prompt.total,
                    source.generation.total,
                    self._clock.time(),
                    None,
                    by_origin,
                )
            source.duration_seconds = max(self._clock.monotonic() - start, 0.0)
            source.reading = reading
            return reading

    def _failed(self, source: _Source, error: str) -> TokenReading:
        name = source.config.name
        if source.failing:
            log.debug("token source %r still down: %s", name, error)
        else:
            log.warning(
                "token source %r (%s) is down: %s", name, _loggable(source.config.url), error[:200]
            )
            source.failing = True
        return replace(source.reading, up=False, error=error)

    def readings(self) -> tuple[TokenReading, ...]:
        """The latest reading of every source, in config order."""
        return tuple(source.reading for source in self._sources.values())

    def families(self) -> Iterator[Metric]:
        """gpuwatch_tokens_total{source,kind}, gpuwatch_token_source_up{source},
        gpuwatch_token_source_scrape_duration_seconds{source} and, for servers that split
        their prompt tokens, gpuwatch_prompt_tokens_by_origin_total{source,origin}."""
        if not self._sources:
            return
        tokens = CounterMetricFamily(
            "gpuwatch_tokens",
            "Tokens the inference server processed since gpuwatch started watching it "
            "(kind: prompt or generation), corrected for counter resets.",
            labels=("source", "kind"),
        )
        up = GaugeMetricFamily(
            "gpuwatch_token_source_up",
            "1 when the last scrape of the token source succeeded, else 0.",
            labels=("source",),
        )
        duration = GaugeMetricFamily(
            "gpuwatch_token_source_scrape_duration_seconds",
            "Seconds the last scrape of the token source took.",
            labels=("source",),
        )
        by_origin = CounterMetricFamily(
            "gpuwatch_prompt_tokens_by_origin",
            "Prompt tokens by where their KV cache came from (origin: the server's own label, "
            "for vLLM local_compute, local_cache_hit or external_kv_transfer), since gpuwatch "
            "started watching the server, corrected for counter resets.",
            labels=("source", "origin"),
        )
        for source in self._sources.values():
            reading = source.reading
            tokens.add_metric([reading.source, "prompt"], reading.prompt_tokens_total)
            tokens.add_metric([reading.source, "generation"], reading.generation_tokens_total)
            up.add_metric([reading.source], 1.0 if reading.up else 0.0)
            if source.duration_seconds is not None:
                duration.add_metric([reading.source], source.duration_seconds)
            for origin, total in reading.prompt_tokens_by_origin:
                by_origin.add_metric([reading.source, origin], total)
        yield tokens
        yield up
        if duration.samples:
            yield duration
        if by_origin.samples:
            yield by_origin


def _loggable(url: str) -> str:
    """The URL without its query string and fragment (they may carry tokens)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
