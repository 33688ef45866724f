"""TokenCollector against a real loopback HTTP server serving inference-server pages."""

from __future__ import annotations

import gzip
import logging
import socket
import subprocess

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from gpuwatch.core.clock import ManualClock
from gpuwatch.tokens import TokenCollector, TokenReading, TokenSourceConfig
from tests.conftest import require_binary
from tests.tokens.conftest import PageServer, vllm_page
from tests.tokens.test_parse import LLAMACPP, SGLANG_GAUGES, TGI

LOGGER = "gpuwatch.tokens"


def source(url: str, **fields: object) -> TokenSourceConfig:
    return TokenSourceConfig.model_validate({"name": "llm", "url": url, **fields})


def collector_for(*sources: TokenSourceConfig) -> tuple[TokenCollector, ManualClock]:
    clock = ManualClock()
    return TokenCollector(sources, clock), clock


def totals(reading: TokenReading) -> tuple[float, float]:
    return reading.prompt_tokens_total, reading.generation_tokens_total


def problems(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.levelno >= logging.WARNING)


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again: connections are refused


def test_vllm_totals_count_from_the_first_scrape(page_server: PageServer) -> None:
    collector, clock = collector_for(source(page_server.url))
    page_server.serve(vllm_page(1000.0, 200.0))
    first = collector.scrape("llm")
    assert first.up
    assert first.error is None
    assert totals(first) == (0.0, 0.0)
    assert first.last_scrape_seconds == clock.time()
    page_server.serve(vllm_page(1500.0, 260.0))
    clock.advance(15)
    assert totals(collector.scrape("llm")) == (500.0, 60.0)
    assert collector.readings() == (collector.scrape("llm"),)


@pytest.mark.parametrize(
    ("kind", "before", "after", "expected"),
    [
        ("sglang", SGLANG_GAUGES, SGLANG_GAUGES.replace(b"1200.0", b"1500.0"), (300.0, 0.0)),
        ("llamacpp", LLAMACPP, LLAMACPP.replace(b" 2048", b" 2100"), (0.0, 52.0)),
        (
            "tgi",
            TGI,
            TGI.replace(b"_sum 420", b"_sum 500").replace(b"_sum 96", b"_sum 99"),
            (80.0, 3.0),
        ),
    ],
)
def test_every_server_kind(
    page_server: PageServer, kind: str, before: bytes, after: bytes, expected: tuple[float, float]
) -> None:
    collector, _ = collector_for(source(page_server.url, kind=kind))
    page_server.serve(before)
    collector.scrape("llm")
    page_server.serve(after)
    assert totals(collector.scrape("llm")) == expected


def test_custom_counters_and_label_matchers(page_server: PageServer) -> None:
    custom = source(
        page_server.url,
        kind="custom",
        prompt_metric="app_prompt_tokens_total",
        generation_metric="app_output_tokens_total",
        label_matchers={"model": "b"},
    )
    collector, _ = collector_for(custom)

    def page(prompt: int, output: int) -> str:
        return (
            "# TYPE app_prompt_tokens_total counter\n"
            f'app_prompt_tokens_total{{model="a"}} 999\n'
            f'app_prompt_tokens_total{{model="b"}} {prompt}\n'
            f'app_output_tokens_total{{model="a"}} 999\n'
            f'app_output_tokens_total{{model="b"}} {output}\n'
        )

    page_server.serve(page(10, 5))
    collector.scrape("llm")
    page_server.serve(page(25, 9))
    assert totals(collector.scrape("llm")) == (15.0, 4.0)


def test_vllm_label_matchers_pick_one_model(page_server: PageServer) -> None:
    collector, _ = collector_for(source(page_server.url, label_matchers={"model_name": "b"}))
    page_server.serve(vllm_page(100.0, 10.0, models=("a", "b")))
    collector.scrape("llm")
    page_server.serve(vllm_page(150.0, 20.0, models=("a", "b")))  # b's series are 2x
    assert totals(collector.scrape("llm")) == (100.0, 20.0)


def test_a_server_restart_counts_like_increase(
    page_server: PageServer, caplog: pytest.LogCaptureFixture
) -> None:
    collector, _ = collector_for(source(page_server.url))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for prompt, generation in ((5000.0, 900.0), (5400.0, 1000.0), (120.0, 30.0), (300.0, 50.0)):
            page_server.serve(vllm_page(prompt, generation))
            reading = collector.scrape("llm")
            assert reading.up
    # +400 / +100, then the restart: 120 / 30 since, then +180 / +20
    assert totals(reading) == (400.0 + 120.0 + 180.0, 100.0 + 30.0 + 20.0)
    assert problems(caplog) == 0


BAD_REPLIES = [
    {"body": b"\x00\x01\xff garbage"},
    {
        "body": b"<!doctype html><html><body>Loading model...</body></html>",
        "content_type": "text/html",
    },
    {"body": vllm_page(9e9, 9e9).encode(), "truncate_to": 400},  # the connection closes early
    {"body": vllm_page(9e9, 9e9).encode()[:300]},  # a complete response of a cut page
    {"body": vllm_page(9e9, 9e9).replace("vllm:generation", "vllm:gen").encode()},
    {"body": b"Internal Server Error", "status": 500},
    {"body": b"", "status": 404},
    {"body": b"\x1f\x8b\x08\x00 not really gzip", "content_encoding": "gzip"},
]


@pytest.mark.parametrize("reply", BAD_REPLIES)
def test_bad_responses_mark_the_source_down_and_keep_totals(
    page_server: PageServer, caplog: pytest.LogCaptureFixture, reply: dict[str, object]
) -> None:
    collector, _ = collector_for(source(page_server.url))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        page_server.serve(vllm_page(100.0, 10.0))
        collector.scrape("llm")
        page_server.serve(vllm_page(160.0, 15.0))
        assert totals(collector.scrape("llm")) == (60.0, 5.0)
        page_server.serve(**reply)  # type: ignore[arg-type]
        for _ in range(3):
            down = collector.scrape("llm")
            assert not down.up
            assert down.error
            assert totals(down) == (60.0, 5.0)
        assert problems(caplog) == 1
        page_server.serve(vllm_page(200.0, 20.0))
        back = collector.scrape("llm")
    assert back.up
    assert back.error is None
    assert totals(back) == (100.0, 10.0)
    assert problems(caplog) == 1


def test_gzip_bodies_are_decompressed(page_server: PageServer) -> None:
    collector, _ = collector_for(source(page_server.url))
    page_server.serve(gzip.compress(vllm_page(10.0, 1.0).encode()), content_encoding="gzip")
    collector.scrape("llm")
    page_server.serve(gzip.compress(vllm_page(15.0, 3.0).encode()), content_encoding="gzip")
    assert totals(collector.scrape("llm")) == (5.0, 2.0)


def test_a_body_cut_inside_a_value_is_not_a_reset(page_server: PageServer) -> None:
    collector, _ = collector_for(source(page_server.url))
    page = vllm_page(123456.0, 98765.0).encode()
    page_server.serve(page)
    collector.scrape("llm")
    cut = page.index(b"98765.0") + 2  # the client would read "98"
    page_server.serve(page, truncate_to=cut)
    reading = collector.scrape("llm")
    assert not reading.up
    assert reading.error is not None
    assert "truncated" in reading.error
    page_server.serve(page)
    assert totals(collector.scrape("llm")) == (0.0, 0.0)


def test_one_log_line_per_failure_episode(
    page_server: PageServer, caplog: pytest.LogCaptureFixture
) -> None:
    """An outage ends after three good scrapes in a row (one INFO line); the next
    failure starts another (one WARNING)."""
    collector, _ = collector_for(source(page_server.url))
    good = {"body": vllm_page(1.0, 1.0).encode()}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for reply in (*BAD_REPLIES, good, good, good, *BAD_REPLIES[:2]):
            page_server.serve(**reply)  # type: ignore[arg-type]
            collector.scrape("llm")
    assert problems(caplog) == 2
    assert sum("is up again" in r.getMessage() for r in caplog.records) == 1


def test_a_flapping_source_logs_one_line_per_outage(
    page_server: PageServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A page good on one scrape and bad on the next is up and down as it is, scrape by
    scrape, but logs one WARNING for the whole outage, not a line per scrape."""
    collector, _ = collector_for(source(page_server.url))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for scrape in range(20):
            bad = scrape % 2 == 1
            page_server.serve("garbage" if bad else vllm_page(1.0 + scrape, 1.0))
            assert collector.scrape("llm").up is not bad
    messages = [r.getMessage() for r in caplog.records]
    assert problems(caplog) == 1, messages
    assert len(messages) == 1, messages


def test_connection_refused(caplog: pytest.LogCaptureFixture) -> None:
    collector, _ = collector_for(source(f"http://127.0.0.1:{dead_port()}/metrics"))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        first = collector.scrape("llm")
        collector.scrape("llm")
    assert not first.up
    assert first.error == "connection refused"
    assert first.last_scrape_seconds is None
    assert problems(caplog) == 1


def test_timeout(page_server: PageServer) -> None:
    collector, _ = collector_for(source(page_server.url, timeout_seconds=0.2))
    page_server.serve(vllm_page(1.0, 1.0), stall_seconds=5.0)
    reading = collector.scrape("llm")
    assert not reading.up
    assert reading.error == "timed out"


def test_one_source_down_does_not_affect_another(page_server: PageServer) -> None:
    good = source(page_server.url)
    bad = source(f"http://127.0.0.1:{dead_port()}/metrics", name="bad")
    collector, _ = collector_for(good, bad)
    page_server.serve(vllm_page(1.0, 1.0))
    collector.scrape_due()
    assert [r.up for r in collector.readings()] == [True, False]


def test_scrape_due_follows_each_interval() -> None:
    calls: list[str] = []

    def fetch(url: str, timeout: float) -> bytes:
        calls.append(url)
        return vllm_page(1.0, 1.0).encode()

    clock = ManualClock()
    fast = source("http://fast/metrics", name="fast", interval_seconds=10)
    slow = source("http://slow/metrics", name="slow", interval_seconds=30)
    collector = TokenCollector([fast, slow], clock, fetch=fetch)
    collector.scrape_due()  # both are due at once
    assert calls == ["http://fast/metrics", "http://slow/metrics"]
    for _ in range(9):
        clock.advance(1)
        collector.scrape_due()
    assert len(calls) == 2
    clock.advance(1)  # t = 10
    collector.scrape_due()
    assert calls[2:] == ["http://fast/metrics"]
    clock.advance(20.5)  # t = 30.5: fast was due at 20 and 30, scraped once; slow due at 30
    collector.scrape_due()
    assert calls[3:] == ["http://fast/metrics", "http://slow/metrics"]
    clock.advance(9.5)  # t = 40: fast keeps its 10 s grid
    collector.scrape_due()
    assert calls[5:] == ["http://fast/metrics"]
    assert collector.scrape("slow").up  # a manual scrape does not move the schedule
    clock.advance(20)  # t = 60
    collector.scrape_due()
    assert calls[7:] == ["http://fast/metrics", "http://slow/metrics"]


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        TokenCollector([source("http://a/m"), source("http://b/m")], ManualClock())


def test_unknown_source_is_a_key_error() -> None:
    collector, _ = collector_for(source("http://a/m"))
    with pytest.raises(KeyError):
        collector.scrape("nope")


class Families(Collector):
    def __init__(self, collector: TokenCollector) -> None:
        self.collector = collector

    def collect(self) -> list[Metric]:
        return list(self.collector.families())


def test_families_pass_promtool(page_server: PageServer) -> None:
    up = source(page_server.url, name="llama")
    down = source(f"http://127.0.0.1:{dead_port()}/metrics", name="qwen")
    collector, _ = collector_for(up, down)
    page_server.serve(vllm_page(10.0, 1.0, by_source={"local_compute": 8.0}))
    collector.scrape_due()
    page_server.serve(vllm_page(30.0, 2.0, by_source={"local_compute": 20.0}))
    collector.scrape("llama")
    registry = CollectorRegistry()
    registry.register(Families(collector))
    text = generate_latest(registry)
    result = subprocess.run(
        [require_binary("promtool"), "check", "metrics"],
        input=text,
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout + result.stderr == b""
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }
    assert samples[("gpuwatch_tokens_total", (("kind", "prompt"), ("source", "llama")))] == 20.0
    assert samples[("gpuwatch_tokens_total", (("kind", "generation"), ("source", "llama")))] == 1.0
    assert samples[("gpuwatch_token_source_up", (("source", "llama"),))] == 1.0
    assert samples[("gpuwatch_token_source_up", (("source", "qwen"),))] == 0.0
    assert ("gpuwatch_token_source_scrape_duration_seconds", (("source", "qwen"),)) in samples
    origin = ("gpuwatch_prompt_tokens_by_origin_total", (("origin", "local_compute"),))
    assert samples[(origin[0], (*origin[1], ("source", "llama")))] == 12.0


def test_vllm_prompt_tokens_by_origin_are_counted_and_exported(page_server: PageServer) -> None:
    collector, _ = collector_for(source(page_server.url, label_matchers={"model_name": "b"}))
    origins = {"local_compute": 700.0, "local_cache_hit": 300.0, "external_kv_transfer": 0.0}
    page_server.serve(vllm_page(1000.0, 10.0, models=("a", "b"), by_source=origins))
    assert collector.scrape("llm").prompt_tokens_by_origin == (
        ("external_kv_transfer", 0.0),
        ("local_cache_hit", 0.0),
        ("local_compute", 0.0),
    )
    later = {"local_compute": 900.0, "local_cache_hit": 400.0, "external_kv_transfer": 5.0}
    page_server.serve(vllm_page(1305.0, 20.0, models=("a", "b"), by_source=later))
    reading = collector.scrape("llm")
    # model b's series are twice the page's values (vllm_page scales by the model's rank)
    assert dict(reading.prompt_tokens_by_origin) == {
        "local_compute": 400.0,
        "local_cache_hit": 200.0,
        "external_kv_transfer": 10.0,
    }
    assert reading.prompt_tokens_total == 610.0
    exported = {
        s.labels["origin"]: s.value
        for family in collector.families()
        if family.name == "gpuwatch_prompt_tokens_by_origin"
        for s in family.samples
    }
    assert exported == dict(reading.prompt_tokens_by_origin)


def test_servers_without_the_breakdown_export_none(page_server: PageServer) -> None:
    vllm, _ = collector_for(source(page_server.url))
    page_server.serve(vllm_page(1000.0, 10.0))
    assert vllm.scrape("llm").prompt_tokens_by_origin == ()
    sglang, _ = collector_for(source(page_server.url, kind="sglang"))
    page_server.serve(SGLANG_GAUGES)
    assert sglang.scrape("llm").prompt_tokens_by_origin == ()
    names = {f.name for c in (vllm, sglang) for f in c.families()}
    assert "gpuwatch_prompt_tokens_by_origin" not in names


def test_no_sources_no_families() -> None:
    assert list(TokenCollector([], ManualClock()).families()) == []
