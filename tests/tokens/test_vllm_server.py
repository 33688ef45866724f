"""gpuwatch.simulate.vllm_server: the demo's simulated vLLM endpoint, over loopback HTTP."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.core.clock import ManualClock
from gpuwatch.simulate import SimulatedNvml, load_scenario
from gpuwatch.simulate.vllm_server import SimulatedVllmServer, TokenIntegral, activity_rate
from gpuwatch.tokens import TokenCollector, TokenSourceConfig


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def server(clock: ManualClock) -> Iterator[SimulatedVllmServer]:
    with SimulatedVllmServer(clock, clock.time(), lambda t: (300.0, 75.0)) as running:
        yield running


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:  # loopback only
        body: bytes = response.read()
        return body


def counters(body: bytes) -> dict[str, float]:
    return {
        s.name: s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")
    }


def test_constant_rate_integrates_to_rate_times_time(
    server: SimulatedVllmServer, clock: ManualClock
) -> None:
    assert counters(get(server.url)) == {
        "vllm:prompt_tokens_total": 0.0,
        "vllm:generation_tokens_total": 0.0,
    }
    clock.advance(1234.5)
    assert counters(get(server.url)) == {
        "vllm:prompt_tokens_total": 300.0 * 1234.5,
        "vllm:generation_tokens_total": 75.0 * 1234.5,
    }


def test_page_has_other_vllm_families(server: SimulatedVllmServer, clock: ManualClock) -> None:
    clock.advance(600)
    names = {f.name for f in text_string_to_metric_families(get(server.url).decode())}
    assert {
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:num_requests_running",
        "vllm:e2e_request_latency_seconds",
    } <= names


def test_unknown_paths_are_404(server: SimulatedVllmServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        get(server.url.replace("/metrics", "/nope"))
    assert info.value.code == 404
    info.value.close()
    assert get(server.url.replace("/metrics", "/health")) == b""


def test_integral_is_exact_for_step_constant_rates() -> None:
    def rate(t: float) -> tuple[float, float]:
        return (100.0, 10.0) if t < 60 else (200.0, 0.0)

    integral = TokenIntegral(rate)
    assert integral.at(-5) == (0.0, 0.0)
    assert integral.at(30.5) == (3050.0, 305.0)
    assert integral.at(90.0) == (6000.0 + 6000.0, 600.0)
    assert integral.at(30.5) == (3050.0, 305.0)  # earlier times still answer exactly


def test_integral_is_cached_and_deterministic() -> None:
    calls: list[float] = []

    def rate(t: float) -> tuple[float, float]:
        calls.append(t)
        return 1.0 + (int(t) % 7) * 0.1, 0.3

    fine = TokenIntegral(rate)
    for t in range(1, 3601):
        fine.at(float(t))
    assert len(calls) < 2 * 3600 + 10  # each step's rate taken once, plus one per call
    coarse = TokenIntegral(rate)
    assert coarse.at(3600.0) == fine.at(3600.0)


def test_counters_are_monotonic(clock: ManualClock) -> None:
    nv = SimulatedNvml(load_scenario("demo"), clock=clock)
    rate = activity_rate(nv, 3, 20000.0, 4000.0)
    server = SimulatedVllmServer(clock, clock.time(), rate)
    previous = (0.0, 0.0)
    for _ in range(200):
        clock.advance(7.3)
        now, _ = server.counters()
        assert now[0] >= previous[0]
        assert now[1] >= previous[1]
        previous = now


def test_collector_reads_the_simulated_server(
    server: SimulatedVllmServer, clock: ManualClock
) -> None:
    collector = TokenCollector([TokenSourceConfig(name="demo", url=server.url)], clock)
    collector.scrape("demo")
    clock.advance(60)
    reading = collector.scrape("demo")
    assert reading.up
    assert (reading.prompt_tokens_total, reading.generation_tokens_total) == (18000.0, 4500.0)


def test_busier_gpu_serves_more_tokens(clock: ManualClock) -> None:
    nv = SimulatedNvml(load_scenario("demo"), clock=clock)
    nv.nvmlInit()
    start = clock.time() - nv.scenario_time()
    handle = nv.nvmlDeviceGetHandleByIndex(3)
    server = SimulatedVllmServer(clock, start, activity_rate(nv, 3, 20000.0, 4000.0))
    minutes = []
    for _ in range(30):  # demo GPU 3 draws a new activity level every minute
        before, _ = server.counters()
        clock.advance(30)
        util = nv.nvmlDeviceGetUtilizationRates(handle).gpu  # moves with SM activity
        clock.advance(30)
        after, _ = server.counters()
        minutes.append((util, after[1] - before[1], after[0] - before[0]))
    nv.nvmlShutdown()
    for util_a, generated_a, prompt_a in minutes:
        assert generated_a > 0
        assert prompt_a == pytest.approx(5 * generated_a)
        for util_b, generated_b, _ in minutes:
            if util_a > util_b + 5:  # clearly busier (jitter is +-2 %)
                assert generated_a > generated_b


def test_activity_rate_checks_its_gpu(clock: ManualClock) -> None:
    nv = SimulatedNvml(load_scenario("demo"), clock=clock)
    with pytest.raises(ValueError, match="does not exist"):
        activity_rate(nv, 9, 1.0, 1.0)
    assert activity_rate(nv, 1, 100.0, 100.0)(500.0) == (0.0, 0.0)  # GPU 1 idles


def test_url_needs_a_started_server(clock: ManualClock) -> None:
    server = SimulatedVllmServer(clock, clock.time(), lambda t: (1.0, 1.0))
    with pytest.raises(RuntimeError):
        _ = server.url
    server.start()
    try:
        assert server.url.startswith("http://127.0.0.1:")
        with pytest.raises(RuntimeError):
            server.start()
    finally:
        server.stop()
    server.stop()  # idempotent


def test_prompt_tokens_split_by_origin(clock: ManualClock) -> None:
    with SimulatedVllmServer(
        clock, clock.time(), lambda t: (400.0, 50.0), prefix_cache_hit_ratio=0.25
    ) as server:
        clock.advance(100)
        body = get(server.url).decode()
    by_source = {
        s.labels["source"]: s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == "vllm:prompt_tokens_by_source_total"
    }
    assert by_source == {
        "local_compute": 30_000.0,
        "local_cache_hit": 10_000.0,
        "external_kv_transfer": 0.0,
    }
    with pytest.raises(ValueError, match="prefix_cache_hit_ratio"):
        SimulatedVllmServer(clock, clock.time(), lambda t: (1.0, 1.0), prefix_cache_hit_ratio=1.5)
