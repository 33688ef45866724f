"""Pod counters never go backwards: the simulated kubelet stops for 5 simulated minutes
(its listing goes stale) and starts again, and every `gpuwatch_pod_*` counter keeps its
series and value throughout, read from /metrics after every tick and by a real
Prometheus (`resets()` of every pod counter is 0)."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from wsgiref.simple_server import WSGIServer

import pytest
from prometheus_client import start_http_server
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.agent import Agent
from gpuwatch.clock import ManualClock
from gpuwatch.config import AgentConfig, Config
from gpuwatch.simulate.cluster import SimulatedCluster
from tests.agent_process import fetch
from tests.conftest import free_port, scenario_agent, simulated
from tests.prometheus_process import running_prometheus, scrape_config

POD_COUNTERS = ("gpuwatch_pod_cost_usd_total", "gpuwatch_pod_idle_cost_usd_total")
OUTAGE_SECONDS = 300  # simulated
LIST_EVERY = 5  # simulated seconds, the cluster's list_interval_seconds

Series = tuple[str, frozenset[tuple[str, str]]]


@pytest.fixture
def demo() -> Iterator[tuple[Agent, ManualClock, SimulatedCluster]]:
    nv, clock = simulated("demo")
    cluster = SimulatedCluster(nv)
    cluster.start()
    agent = scenario_agent(
        Config(agent=AgentConfig(hostname="test-host")),
        nv,
        clock,
        kubernetes=cluster.kubernetes_config(),
    )
    yield agent, clock, cluster
    agent.stop()
    cluster.stop()


def scrape(agent: Agent) -> dict[Series, float]:
    """Every sample of the agent's /metrics, by name and labels."""
    text = generate_latest(agent.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def run(agent: Agent, clock: ManualClock, seconds: int, each: Callable[[], None]) -> None:
    """`seconds` 1 s ticks, listing every LIST_EVERY s as the scheduler does; `each` after
    every tick."""
    for _ in range(seconds):
        if int(clock.time()) % LIST_EVERY == 0:
            agent.refresh_attribution()
        clock.advance(1.0)
        agent.tick()
        each()


def _pod_series(samples: dict[Series, float]) -> dict[Series, float]:
    return {k: v for k, v in samples.items() if k[0] in POD_COUNTERS}


def test_pod_counters_hold_through_a_kubelet_outage(
    demo: tuple[Agent, ManualClock, SimulatedCluster],
) -> None:
    agent, clock, cluster = demo
    last: dict[Series, float] = {}
    stale_seen: list[float] = []

    def check() -> None:
        samples = scrape(agent)
        now = _pod_series(samples)
        assert set(last) <= set(now), f"pod series vanished: {set(last) - set(now)}"
        for key, value in now.items():
            assert value >= last.get(key, 0.0), f"{key} went back: {last[key]} -> {value}"
        last.update(now)
        stale_seen.append(samples[("gpuwatch_attribution_stale", frozenset())])

    run(agent, clock, 60, check)
    before = dict(last)
    pods = {dict(labels)["pod"] for _, labels in before}
    assert len(pods) == 5  # every demo pod is charged something (busy or idle)
    assert stale_seen[-1] == 0.0

    cluster.kubelet.stop()
    fresh_for = (3 + 1) * LIST_EVERY  # the last listing serves 3 intervals
    run(agent, clock, fresh_for, check)
    assert stale_seen[-1] == 1.0  # marked stale, labels gone, counters kept
    held = dict(last)
    run(agent, clock, OUTAGE_SECONDS - fresh_for, check)
    assert set(stale_seen[-(OUTAGE_SECONDS - fresh_for) :]) == {1.0}
    assert not any(k[0] == "gpuwatch_gpu_pod_info" for k in scrape(agent))
    assert _pod_series(scrape(agent)) == held  # a stale tick is charged to no pod

    cluster.kubelet.start()
    run(agent, clock, 60, check)
    assert stale_seen[-1] == 0.0
    grown = [k for k in before if last[k] > before[k]]
    assert {dict(labels)["pod"] for name, labels in grown if name == POD_COUNTERS[0]} == pods


def test_a_pod_gone_from_a_fresh_listing_is_dropped(
    demo: tuple[Agent, ManualClock, SimulatedCluster],
) -> None:
    """Keeping pods through staleness does not keep pods that really left."""
    agent, clock, cluster = demo
    run(agent, clock, 10, lambda: None)
    cluster.kubelet.set_pods([])
    run(agent, clock, LIST_EVERY + 1, lambda: None)
    left = {dict(labels)["pod"] for _, labels in _pod_series(scrape(agent))}
    # the pods' processes still run on the stand-in, in pods the listing no longer has:
    # those with a process stay (charged their busy share); the idle holders are gone
    assert "batch-eval-7f9c" not in left
    assert "vllm-llama-8b-canary" not in left


def _query(url: str, promql: str) -> list[dict[str, object]]:
    body = fetch(f"{url}/api/v1/query?query={urllib.parse.quote(promql)}")
    result: list[dict[str, object]] = json.loads(body)["data"]["result"]
    return result


def _wait_for_scrapes(url: str, promql: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if _query(url, promql):
                return
        except OSError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"Prometheus never answered {promql}")


def test_prometheus_sees_no_pod_counter_reset(
    demo: tuple[Agent, ManualClock, SimulatedCluster], tmp_path: Path
) -> None:
    agent, clock, cluster = demo
    run(agent, clock, 30, lambda: None)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=agent.registry)
    assert isinstance(server, WSGIServer)
    assert isinstance(thread, threading.Thread)
    try:
        with running_prometheus(tmp_path, scrape_config([port])) as url:
            _wait_for_scrapes(url, "count_over_time(gpuwatch_attribution_stale[1m]) >= 2")
            cluster.kubelet.stop()
            for _ in range(OUTAGE_SECONDS // 60):  # scraped while stale (1 s scrapes)
                run(agent, clock, 60, lambda: None)
                time.sleep(1.5)
            _wait_for_scrapes(url, "max_over_time(gpuwatch_attribution_stale[1m]) == 1")
            cluster.kubelet.start()
            # fewer seconds than before the outage: a counter restarted from 0 would be
            # scraped below its old value, which resets() counts
            run(agent, clock, 10, lambda: None)
            _wait_for_scrapes(url, "max_over_time(gpuwatch_attribution_pods[1m]) == 5")
            time.sleep(2.5)
            window = "[2m]"
            resets = _query(url, f"resets(gpuwatch_pod_cost_usd_total{window})")
            resets += _query(url, f"resets(gpuwatch_pod_idle_cost_usd_total{window})")
            counted = _query(url, f"count_over_time(gpuwatch_pod_cost_usd_total{window})")
    finally:
        server.shutdown()
        server.server_close()
    assert len(resets) == 2 * 5  # both counters of the 5 demo pods
    assert {float(r["value"][1]) for r in resets} == {0.0}  # type: ignore[index]
    # every pod series was scraped before, through and after the outage
    assert min(float(c["value"][1]) for c in counted) >= 8  # type: ignore[index]
