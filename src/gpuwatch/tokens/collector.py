"""TokenCollector: scrapes inference servers' token counters on a schedule.

The agent calls `scrape_due()` every second or so; each source is fetched when its
`interval_seconds` has elapsed, parsed (`gpuwatch.tokens.parse`) and its counters
reset-corrected (`gpuwatch.tokens.counters`). A source that is down or serves garbage
(a malformed page, or a KV pool out of bounds: `gpuwatch.tokens.kv`) becomes
`up = False` with one WARNING per outage (`gpuwatch.core.health`: a source that flaps
stays in one); its totals are kept and the other sources go on. A counter increase no
GPU could serve (`gpuwatch.tokens.plausible`) is refused the same way: the span is not
counted, and the next scrape is a new baseline. The only I/O is the
injected `fetch(url, timeout)` (default: `gpuwatch.tokens.fetch.UrllibFetch`, plain urllib,
which bounds each scrape's time and body size). Each due source is scraped on its own
thread, so a source that stalls or drip-feeds costs only itself: it is down once its
`timeout_seconds` runs out.
"""

from __future__ import annotations

import logging
import math
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.core.clock import Clock
from gpuwatch.core.health import Outage
from gpuwatch.tokens.config import TokenSourceConfig, check_unique_names
from gpuwatch.tokens.counters import GroupedCounter, ResetCorrectedCounter
from gpuwatch.tokens.fetch import SOURCE_ERRORS, Fetch, UrllibFetch, describe
from gpuwatch.tokens.kv import KvCacheReading, kv_cache_reading
from gpuwatch.tokens.parse import LabelSet, Sample, find_samples, select_counters
from gpuwatch.tokens.plausible import implausible_increase
from gpuwatch.tokens.served import model_roots, models_url

log = logging.getLogger(__name__)

ROOTS_RETRY_SECONDS = 3600.0
"""How long a source whose served name /v1/models did not resolve waits to ask again."""


@dataclass(frozen=True)
class TokenReading:
    """What is known about one token source.

    Totals are cumulative tokens since gpuwatch started watching the source (0 at the
    first successful scrape), corrected for counter resets, so they never decrease.
    `last_scrape_seconds` is the clock time (epoch s) of the last successful scrape,
    None before one; `error` says why the last scrape failed, None when it succeeded.
    `prompt_tokens_by_origin` splits the prompt tokens by where their KV cache came from,
    as (origin, tokens) sorted by origin, when the server exposes such a counter (vLLM's
    `vllm:prompt_tokens_by_source_total`); empty otherwise. `kv_cache` is what the last
    successful scrape said about the KV cache (`gpuwatch.tokens.kv`), None when the
    server publishes nothing about it.
    """

    source: str
    up: bool
    prompt_tokens_total: float
    generation_tokens_total: float
    last_scrape_seconds: float | None
    error: str | None
    prompt_tokens_by_origin: tuple[tuple[str, float], ...] = ()
    kv_cache: KvCacheReading | None = None
    baseline_seconds: float | None = None
    """Clock time (epoch s) of the scrape the counters count from: the first, or the
    first after a refused one (`gpuwatch.tokens.plausible`); a span across two
    baselines holds tokens that were not counted, so the cost ledger charges it nothing."""


class _Source:
    """One source's state; `lock` serializes its scrapes."""

    def __init__(self, config: TokenSourceConfig) -> None:
        self.config = config
        self.names = config.counter_names()
        self.kv_names = config.kv_cache_names()
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
        self.observed_at: float | None = None  # monotonic s: start of the last counted scrape
        self.baseline_seconds: float | None = None  # epoch s: TokenReading.baseline_seconds
        self.next_due: float | None = None
        self.outage = Outage()
        self.in_flight = False  # a scrape thread runs (under the collector's schedule lock)
        self.roots: dict[str, str] = {}  # served name -> root, from the server's /v1/models
        self.roots_asked_at: float | None = None  # monotonic s of the last /v1/models GET


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

    def scrape_due(self, *, wait: bool = True, inline: bool = False) -> None:
        """Scrape every source whose interval has elapsed (all of them the first time),
        each on its own daemon thread, so that a slow source delays only itself.

        Each source keeps a fixed grid of `interval_seconds` from its first scrape;
        slots missed while late are skipped, not caught up, and so is a slot whose
        previous scrape still runs. A scrape ends within its `timeout_seconds` (the fetch
        enforces it); `wait` returns only when the scrapes started here have ended.
        `inline` scrapes them one after another on the caller's thread instead (a replay
        whose fetch reads simulated pages in process).
        """
        threads = []
        with self._schedule_lock:
            now = self._clock.monotonic()
            for index, source in enumerate(self._sources.values()):
                if source.next_due is not None and now < source.next_due:
                    continue
                interval = source.config.interval_seconds
                following = (now if source.next_due is None else source.next_due) + interval
                if following <= now:  # late: skip the missed slots, stay on the grid
                    following += interval * math.floor((now - following) / interval + 1.0)
                source.next_due = following
                if source.in_flight:
                    continue
                source.in_flight = True
                threads.append(
                    threading.Thread(
                        target=self._scrape_in_flight,
                        args=(source,),
                        name=f"gpuwatch-tokens-{index}",
                        daemon=True,  # a source that hangs never delays shutdown
                    )
                )
        if inline:
            for thread in threads:
                thread.run()
            return
        for thread in threads:
            thread.start()
        if wait:
            for thread in threads:
                thread.join()

    def _scrape_in_flight(self, source: _Source) -> None:
        try:
            self.scrape(source.config.name)
        finally:
            with self._schedule_lock:
                source.in_flight = False

    def scrape(self, name: str) -> TokenReading:
        """Scrape source `name` now (KeyError if unknown); never raises for a source
        failure, which is reported in the returned reading."""
        source = self._sources[name]
        with source.lock:
            start = self._clock.monotonic()
            try:
                body = self._fetch(source.config.url, source.config.timeout_seconds)
                optional = () if source.by_origin_name is None else (source.by_origin_name,)
                found = find_samples(body, [*source.names, *optional, *source.kv_names])
                matchers = source.config.label_matchers
                series = select_counters(found, source.names, matchers, optional)
                kv = self._with_roots(source, self._kv_cache(source, found))
            except SOURCE_ERRORS as exc:
                reading = self._failed(source, describe(exc))
            else:
                refused = self._implausible(source, series)
                if refused is None:
                    reading = self._counted(source, series, kv, start)
                else:
                    self._forget(source)
                    reading = self._failed(source, refused)
            source.duration_seconds = max(self._clock.monotonic() - start, 0.0)
            source.reading = reading
            return reading

    def _implausible(self, source: _Source, series: dict[str, dict[LabelSet, float]]) -> str | None:
        """Why this scrape's increase is more than the source's GPUs could serve since the
        last counted scrape began (`gpuwatch.tokens.plausible`), None when it is not."""
        if source.observed_at is None:
            return None  # the first scrape is a baseline: nothing is counted
        prompt_name, generation_name = source.names
        increases = {
            prompt_name: source.prompt.pending(series[prompt_name]),
            generation_name: source.generation.pending(series[generation_name]),
        }
        if source.by_origin is not None and source.by_origin_name in series:
            increases[source.by_origin_name] = source.by_origin.pending(
                series[source.by_origin_name]
            )
        seconds = self._clock.monotonic() - source.observed_at
        return implausible_increase(increases, seconds, len(source.config.gpus))

    @staticmethod
    def _forget(source: _Source) -> None:
        """Drop the counters' baseline after a refused scrape: its span is not counted,
        the next scrape is a new baseline and honest increases count from there (a
        span lost, never a lie counted)."""
        source.observed_at = None
        source.prompt.forget()
        source.generation.forget()
        if source.by_origin is not None:
            source.by_origin.forget()

    def _counted(
        self,
        source: _Source,
        series: dict[str, dict[LabelSet, float]],
        kv: KvCacheReading | None,
        start: float,
    ) -> TokenReading:
        """The reading of a scrape whose counters are taken (their increases added)."""
        name = source.config.name
        prompt_name, generation_name = source.names
        resets = source.prompt.resets + source.generation.resets
        now = self._clock.time()
        if source.observed_at is None:
            source.baseline_seconds = now
        source.prompt.observe(series[prompt_name])
        source.generation.observe(series[generation_name])
        source.observed_at = start
        by_origin: tuple[tuple[str, float], ...] = ()
        if source.by_origin is not None and source.by_origin_name in series:
            source.by_origin.observe(series[source.by_origin_name])
            by_origin = tuple(sorted(source.by_origin.totals.items()))
        if source.prompt.resets + source.generation.resets > resets:
            log.info("token source %r: counters went back (server restart?)", name)
        if source.outage.succeed():
            log.info("token source %r is up again", name)
        return TokenReading(
            name,
            True,
            source.prompt.total,
            source.generation.total,
            now,
            None,
            by_origin,
            kv,
            source.baseline_seconds,
        )

    def _failed(self, source: _Source, error: str) -> TokenReading:
        name = source.config.name
        if source.outage.fail():
            log.warning(
                "token source %r (%s) is down: %s", name, _loggable(source.config.url), error[:200]
            )
        else:
            log.debug("token source %r still down: %s", name, error)
        return replace(source.reading, up=False, error=error)

    @staticmethod
    def _kv_cache(source: _Source, found: dict[str, list[Sample]]) -> KvCacheReading | None:
        """The KV cache the page says, None when it says none. Raises ExpositionError
        when what it says is malformed or out of bounds (a pool of 1e15 blocks): a page
        that lies about its pool is a failed scrape, its need never measured from it."""
        if not source.kv_names:
            return None
        return kv_cache_reading(source.config.kind, found, source.config.label_matchers)

    def _with_roots(self, source: _Source, kv: KvCacheReading | None) -> KvCacheReading | None:
        """`kv` with the roots of its served names (`gpuwatch.tokens.served`), asked of
        the server's /v1/models when a name is new to it (again at most once an hour while
        one stays unresolved); no question when the source sets `model` or `config_json`.
        A failed question leaves the names as they are (the scrape still counts)."""
        config = source.config
        if kv is None or not kv.model_names or config.model or config.config_json:
            return kv
        now = self._clock.monotonic()
        asked = source.roots_asked_at
        unknown = [name for name in kv.model_names if name not in source.roots]
        if unknown and (asked is None or now - asked >= ROOTS_RETRY_SECONDS):
            source.roots_asked_at = now
            try:
                body = self._fetch(models_url(config.url), config.timeout_seconds)
            except SOURCE_ERRORS as exc:
                log.debug("token source %r: no /v1/models (%s)", config.name, describe(exc))
            else:
                source.roots.update(model_roots(body))
        found = tuple((name, source.roots[name]) for name in kv.model_names if name in source.roots)
        return replace(kv, model_roots=found)

    def readings(self) -> tuple[TokenReading, ...]:
        """The latest reading of every source, in config order."""
        return tuple(source.reading for source in self._sources.values())

    def families(self) -> Iterator[Metric]:
        """gpuwatch_tokens_total{source,kind}, gpuwatch_token_source_up{source},
        gpuwatch_token_source_scrape_duration_seconds{source} and, for servers that split
        their prompt tokens, gpuwatch_prompt_tokens_by_origin_total{source,origin}, and
        for servers that publish their KV cache (while up),
        gpuwatch_token_source_kv_cache_used_tokens{source} and
        gpuwatch_token_source_kv_cache_capacity_tokens{source}."""
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
        kv_used = GaugeMetricFamily(
            "gpuwatch_token_source_kv_cache_used_tokens",
            "Tokens whose KV cache the inference server holds now (vLLM: usage x "
            "num_gpu_blocks x block_size; SGLang: num_used_tokens), at the last scrape.",
            labels=("source",),
        )
        kv_capacity = GaugeMetricFamily(
            "gpuwatch_token_source_kv_cache_capacity_tokens",
            "Tokens the inference server's KV cache pool holds at most (vLLM: "
            "num_gpu_blocks x block_size; SGLang: max_total_num_tokens).",
            labels=("source",),
        )
        for source in self._sources.values():
            reading = source.reading
            kv = reading.kv_cache
            if reading.up and kv is not None:
                if kv.used_tokens is not None:
                    kv_used.add_metric([reading.source], kv.used_tokens)
                if kv.capacity_tokens is not None:
                    kv_capacity.add_metric([reading.source], kv.capacity_tokens)
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
        for family in (kv_used, kv_capacity):
            if family.samples:
                yield family


def _loggable(url: str) -> str:
    """The URL without its query string and fragment (they may carry tokens)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
