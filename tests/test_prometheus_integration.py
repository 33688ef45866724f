"""A real Prometheus (Debian's package) scrapes `gpuwatch run --simulate demo`.

The GPUs' memory and activity are read back through Prometheus's HTTP API, so this
checks the exposition format, the names and the values end to end.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent_process import fetch, start_agent
from tests.conftest import free_port
from tests.prometheus_process import running_prometheus, scrape_config

QUERY_TIMEOUT_SECONDS = 40


@pytest.fixture(scope="module")
def agent_port() -> Iterator[int]:
    port = free_port()
    proc = start_agent(["--simulate", "demo", "--speed", "10"], port)
    yield port
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)


@pytest.fixture(scope="module")
def prometheus_url(agent_port: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir: Path = tmp_path_factory.mktemp("prometheus")
    with running_prometheus(workdir, scrape_config([agent_port])) as url:
        yield url


def query(prometheus_url: str, promql: str) -> list[dict[str, object]]:
    """Poll an instant query until it returns at least one series."""
    deadline = time.monotonic() + QUERY_TIMEOUT_SECONDS
    while True:
        try:
            body = fetch(f"{prometheus_url}/api/v1/query?query={urllib.parse.quote(promql)}")
            result: list[dict[str, object]] = json.loads(body)["data"]["result"]
            if result:
                return result
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"Prometheus returned nothing for {promql}")
        time.sleep(0.5)


def by_gpu(result: list[dict[str, object]]) -> dict[str, float]:
    values: dict[str, float] = {}
    for series in result:
        metric = series["metric"]
        value = series["value"]
        assert isinstance(metric, dict)
        assert isinstance(value, list)
        values[metric["gpu"]] = float(value[1])
    return values


def test_prometheus_scrapes_the_agent(prometheus_url: str) -> None:
    up = query(prometheus_url, 'up{job="gpuwatch"} == 1')
    assert len(up) == 1


def test_memory_read_back_through_prometheus(prometheus_url: str) -> None:
    used = by_gpu(query(prometheus_url, "gpuwatch_gpu_memory_used_bytes"))
    total = by_gpu(query(prometheus_url, "gpuwatch_gpu_memory_total_bytes"))
    assert sorted(used) == ["0", "1", "2", "3"]
    assert used["1"] < 1e9, "GPU 1 runs nothing"
    assert 25e9 < used["2"] < 40e9, "GPU 2 is held by a ~30 GB notebook"
    assert used["3"] > 0.85 * total["3"], "GPU 3's server preallocates 90 % of VRAM"
    assert used["0"] > 0.8 * total["0"], "GPU 0 trains with most of its memory"


def test_activity_read_back_through_prometheus(prometheus_url: str) -> None:
    sm = by_gpu(query(prometheus_url, "gpuwatch_gpu_sm_active_ratio"))
    assert sm["1"] < 0.01
    assert sm["2"] < 0.01
    assert 0.0 < sm["3"] < 0.5
    peak = by_gpu(query(prometheus_url, "max_over_time(gpuwatch_gpu_sm_active_ratio[1m])"))
    assert peak["0"] > 0.8, "the training GPU runs near full activity"
    util = by_gpu(query(prometheus_url, "gpuwatch_gpu_utilization_ratio"))
    assert sorted(util) == ["0", "1", "2", "3"]
