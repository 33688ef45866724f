"""Pod series across a kubelet outage: the simulated kubelet stops for 5 simulated
minutes (its listing goes stale) and starts again. Every `gpuwatch_pod_*` counter keeps
its series and value throughout, read from /metrics after every tick and by a real
Prometheus (`resets()` of every pod counter is 0); the holds (`gpuwatch_gpu_pod_info`,
`gpuwatch_gpu_pod_allocated_idle`) stay, so `GpuwatchGpuAllocatedIdle` keeps firing and
OpenCost's queries keep every pod (both run by promtool on the agent's own scrapes)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from wsgiref.simple_server import WSGIServer

import pytest
import yaml
from prometheus_client import start_http_server
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config, ExporterConfig
from gpuwatch.core.clock import ManualClock
from gpuwatch.simulate.cluster import SimulatedCluster
from tests.agent_process import fetch
from tests.conftest import free_port, require_binary, simulated
from tests.prometheus_process import running_prometheus, scrape_config
from tests.rules.rulefiles import ALERTS_FILE, RECORDING_FILE
from tests.support.kube_node import kube_node
from tests.test_opencost_queries import (
    CLUSTER_FILTER,
    CLUSTER_LABEL,
    DEMO_PODS,
    QUERY_FMT_GET_GPU_INFO,
    QUERY_FMT_GPUS_USAGE_AVG,
)

POD_COUNTERS = ("gpuwatch_pod_cost_usd_total", "gpuwatch_pod_idle_cost_usd_total")
HOLD_SERIES = ("gpuwatch_gpu_pod_info", "gpuwatch_gpu_pod_allocated_idle")
OUTAGE_SECONDS = 300  # simulated
LIST_EVERY = 5  # simulated seconds, the cluster's list_interval_seconds

Series = tuple[str, frozenset[tuple[str, str]]]
IDLE_DEMO_PODS = ("batch-eval-7f9c", "vllm-llama-8b-canary")  # hold a GPU, run nothing


@pytest.fixture
def demo() -> Iterator[tuple[Agent, ManualClock, SimulatedCluster]]:
    nv, clock = simulated("demo")
    with kube_node(Config(agent=AgentConfig(hostname="test-host")), nv, clock) as (agent, cluster):
        yield agent, clock, cluster


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


def _hold_series(samples: dict[Series, float]) -> dict[Series, float]:
    return {k: v for k, v in samples.items() if k[0] in HOLD_SERIES}


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
    holds = _hold_series(scrape(agent))
    assert len(holds) == 2 * 5  # info and allocated-idle of the five demo holders
    pods = {dict(labels)["pod"] for _, labels in before}
    assert len(pods) == 5  # every demo pod is charged something (busy or idle)
    assert stale_seen[-1] == 0.0

    cluster.kubelet.stop()
    fresh_for = (3 + 1) * LIST_EVERY  # the last listing serves 3 intervals
    run(agent, clock, fresh_for, check)
    assert stale_seen[-1] == 1.0  # marked stale, holds and counters kept
    held = dict(last)
    run(agent, clock, OUTAGE_SECONDS - fresh_for, check)
    assert set(stale_seen[-(OUTAGE_SECONDS - fresh_for) :]) == {1.0}
    assert _hold_series(scrape(agent)) == holds  # until the kubelet drops them
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
            _wait_for_scrapes(url, "gpuwatch_attribution_stale == 0")  # the kubelet answers
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


OPENCOST_WINDOW = "1m"  # two 30 s scrapes
SCRAPE_EVERY = 30  # simulated seconds between the scrapes given to promtool
TICK = 5  # simulated seconds per tick (the kubelet is listed every tick)
FIRING_AT = 31  # minutes: GpuwatchGpuAllocatedIdle (for: 30m) fires on the demo's two
OUTAGE = (32, 37)  # the kubelet is down from 32m to 37m
END = 39
HOLD_FAMILIES = (
    "up",
    *HOLD_SERIES,
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_DEC_UTIL",
)


def _promtool_series(scrapes: list[dict[Series, float]]) -> list[dict[str, str]]:
    """`input_series` of the hold families, one value per scrape, as Prometheus stores
    them: a series missing from a scrape gets a staleness marker, then no value; empty
    labels are no labels; every sample gets the scrape's job and instance."""
    keys = sorted({k for scrape in scrapes for k in scrape if k[0] in HOLD_FAMILIES})
    out = []
    for name, labels in keys:
        values: list[str] = []
        for i, scrape in enumerate(scrapes):
            value = scrape.get((name, labels))
            if value is not None:
                values.append(repr(value))
            else:
                values.append("stale" if i and (name, labels) in scrapes[i - 1] else "_")
        kept = {k: v for k, v in labels if v} | {"job": "gpuwatch", "instance": "h1:9842"}
        text = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(kept.items()))
        out.append({"series": f"{name}{{{text}}}", "values": " ".join(values)})
    return out


def test_allocated_idle_alert_and_opencost_hold_through_a_kubelet_outage(
    tmp_path: Path,
) -> None:
    """promtool runs the alert rules and OpenCost's own queries on what the agent exported
    every 30 simulated seconds: 32 minutes with the kubelet up (the alert fires at 31m),
    5 minutes with it down, 2 minutes up again. The alert stays firing and OpenCost keeps
    all five pods at every minute of the outage."""
    nv, clock = simulated("demo")
    config = Config(
        agent=AgentConfig(hostname="test-host"), exporter=ExporterConfig(dcgm_compat=True)
    )
    scrapes: list[dict[Series, float]] = []
    with kube_node(config, nv, clock) as (agent, cluster):
        start = clock.time()
        while clock.time() - start < END * 60:
            elapsed = clock.time() - start
            if elapsed == OUTAGE[0] * 60:
                cluster.kubelet.stop()
            if elapsed == OUTAGE[1] * 60:
                cluster.kubelet.start()
            if elapsed % SCRAPE_EVERY == 0:
                scrapes.append({**scrape(agent), ("up", frozenset()): 1.0})
            agent.refresh_attribution()
            clock.advance(TICK)
            agent.tick()
    minutes = range(FIRING_AT, END)
    firing = 'ALERTS{alertname="GpuwatchGpuAllocatedIdle",alertstate="firing"}'
    idle_pods = [{"labels": f'{{pod="{p}"}}', "value": 1} for p in IDLE_DEMO_PODS]
    every_pod = [
        {"labels": f'{{container="{c}",namespace="{n}",pod="{p}"}}', "value": 1}
        for n, p, c in sorted(DEMO_PODS)
    ]
    usage = QUERY_FMT_GPUS_USAGE_AVG % (OPENCOST_WINDOW, CLUSTER_LABEL)
    info = QUERY_FMT_GET_GPU_INFO % (CLUSTER_FILTER, OPENCOST_WINDOW, CLUSTER_LABEL)
    cases = []
    for minute in minutes:
        at = f"{minute}m"
        cases.append(
            {"expr": f"count by (pod) ({firing})", "eval_time": at, "exp_samples": idle_pods}
        )
        for query in (usage, info):
            cases.append(
                {
                    "expr": f"count by (namespace, pod, container) ({query})",
                    "eval_time": at,
                    "exp_samples": every_pod,
                }
            )
    test = {
        "rule_files": [str(RECORDING_FILE), str(ALERTS_FILE)],
        "evaluation_interval": f"{SCRAPE_EVERY}s",
        "tests": [
            {
                "interval": f"{SCRAPE_EVERY}s",
                "input_series": _promtool_series(scrapes),
                "promql_expr_test": cases,
            }
        ],
    }
    path = tmp_path / "outage.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False), encoding="utf-8")
    result = subprocess.run(
        [require_binary("promtool"), "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
