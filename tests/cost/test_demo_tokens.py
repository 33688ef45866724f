"""$/1M tokens by kind on the demo fleet, through the agent, at high simulated speed.

Under `gpuwatch run --simulate demo --speed X` the agent ticks every max(1 s, 0.05 s x X)
of simulated time, and the token thread scrapes the simulated vLLM server on its own
15 s grid. These tests drive the same agent on a manual clock the way a fast run does
(including a startup stall longer than the ledger's 60 s gap limit), then run the real
daemon at --speed 3000, where every tick is 150 simulated seconds apart.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest

from gpuwatch.agent import Agent, AgentOptions
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.simulate.services import ScenarioServices
from gpuwatch.tokens import TokenSourceConfig
from tests.agent_process import Samples, fetch, samples
from tests.conftest import free_port, require_binary, scenario_agent, simulated

SOURCE = "simulated-vllm-gpu3"


def per_million(values: Samples, kind: str, window: str = "1h") -> float | None:
    labels = frozenset({("source", SOURCE), ("window", window), ("kind", kind)})
    return values.get(("gpuwatch_cost_per_million_tokens_usd", labels))


def all_per_million(values: Samples) -> list[float]:
    return [v for (name, _), v in values.items() if name == "gpuwatch_cost_per_million_tokens_usd"]


class DemoRun:
    """The demo agent with its simulated vLLM server, on a manual clock."""

    def __init__(
        self, extra: Callable[[Any, str], tuple[TokenSourceConfig, ...]] | None = None
    ) -> None:
        """`extra(nv, url)` adds token sources, given the stand-in and the server's URL."""
        nv, self.clock = simulated("demo", ManualClock())
        self.services = ScenarioServices(nv, self.clock)
        self.services.start()
        sources = self.services.token_sources()
        more = () if extra is None else extra(nv, sources[0].url)
        self.agent = scenario_agent(
            Config(agent=AgentConfig(hostname="test-host")),
            nv,
            self.clock,
            token_sources=(*sources, *more),
        )

    def tick(self) -> Samples:
        """One agent tick, then /metrics as a scrape would render it."""
        self.agent.tick()
        return samples(generate_latest(self.agent.registry).decode())

    def scrape_tokens_for(self, seconds: float, step: float) -> None:
        """Simulated time passes with no tick while the token thread keeps scraping."""
        for _ in range(round(seconds / step)):
            self.clock.advance(step)
            self.agent.tokens.scrape_due()

    def close(self) -> None:
        self.agent.stop()
        self.services.stop()


@pytest.fixture
def demo() -> Iterator[DemoRun]:
    run = DemoRun()
    yield run
    run.close()


def test_a_fast_start_never_reads_zero_and_kinds_agree(demo: DemoRun) -> None:
    demo.tick()  # Agent.start() samples once ...
    demo.agent.tokens.scrape_due()  # ... then the token thread takes its baseline
    # the scheduler's first tick comes 90 simulated seconds later (0.75 s at --speed 120):
    # the ledger does not charge that gap, while the server served tokens all along
    demo.scrape_tokens_for(90.0, 15.0)
    values = demo.tick()
    tokens = ("gpuwatch_tokens_total", frozenset({("source", SOURCE), ("kind", "prompt")}))
    assert values[tokens] > 0
    assert all_per_million(values) == [], "tokens but no charged cost: absent, not 0.0"
    seen: list[Samples] = []
    for _ in range(100):  # 10 simulated minutes of 6 s ticks (--speed 120)
        demo.clock.advance(6.0)
        demo.agent.tokens.scrape_due()
        seen.append(demo.tick())
    assert all(v > 0 for values in seen for v in all_per_million(values))
    last = seen[-1]
    prompt, generation, every = (per_million(last, k) for k in ("prompt", "generation", "all"))
    assert prompt is not None
    assert generation is not None
    assert every is not None
    # the demo server makes 5 prompt tokens per generated token, over the same spans
    assert generation == pytest.approx(5.0 * prompt, rel=1e-9)
    assert 1.0 / every == pytest.approx(1.0 / prompt + 1.0 / generation, rel=1e-9)
    # the charged cost over the counted spans is GPU 3's cost since the baseline scrape,
    # less the uncharged startup gap: at most one tick's cost (6 s at $6.88/h) apart
    charged = last[("gpuwatch_token_source_cost_usd_total", frozenset({("source", SOURCE)}))]
    gpu3 = last[("gpuwatch_gpu_cost_usd_total", frozenset({("gpu", "3")}))]
    assert charged == gpu3
    assert gpu3 == pytest.approx(600.0 * 6.88 / 3600.0, abs=6.0 * 6.88 / 3600.0)
    origins = {
        dict(labels)["origin"]: v
        for (name, labels), v in last.items()
        if name == "gpuwatch_prompt_tokens_by_origin_total"
    }
    assert origins["local_cache_hit"] == pytest.approx(0.25 * last[tokens], rel=1e-9)
    assert origins["local_compute"] == pytest.approx(0.75 * last[tokens], rel=1e-9)
    assert origins["external_kv_transfer"] == 0.0


def sharing_sources(nv: Any, url: str) -> tuple[TokenSourceConfig, ...]:
    """Two more sources on the demo server: GPU 3 by its uuid, and GPUs 2 and 3."""
    nv.nvmlInit()
    uuid = nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(3))
    nv.nvmlShutdown()
    return (
        TokenSourceConfig(name="same-gpu-by-uuid", url=url, gpus=[uuid]),
        TokenSourceConfig(name='gpus "2,3"', url=url, gpus=[2, 3]),
    )


def test_sources_sharing_a_gpu_are_charged_its_cost_once() -> None:
    run = DemoRun(sharing_sources)
    try:
        run.agent.tokens.scrape_due()
        for _ in range(200):
            run.clock.advance(3.0)
            run.agent.tokens.scrape_due()
            values = run.tick()
            charged = {
                dict(labels)["source"]: v
                for (name, labels), v in values.items()
                if name == "gpuwatch_token_source_cost_usd_total"
            }
            gpu = {
                dict(labels)["gpu"]: v
                for (name, labels), v in values.items()
                if name == "gpuwatch_gpu_cost_usd_total"
            }
            assert sum(charged.values()) == pytest.approx(gpu["2"] + gpu["3"], rel=1e-12)
            assert charged[SOURCE] == pytest.approx(gpu["3"] / 3, rel=1e-12)
            assert charged['gpus "2,3"'] == pytest.approx(gpu["2"] + gpu["3"] / 3, rel=1e-12)
        assert gpu["3"] > 1.0
        # GPU 2 (held, no tokens) makes the two-GPU source's tokens dearer than the others'
        two_gpus = values[
            (
                "gpuwatch_cost_per_million_tokens_usd",
                frozenset({("source", 'gpus "2,3"'), ("window", "1h"), ("kind", "all")}),
            )
        ]
        own = per_million(values, "all")
        assert own is not None
        assert two_gpus > 2.0 * own
        exposition = generate_latest(run.agent.registry)
        lint = subprocess.run(
            [require_binary("promtool"), "check", "metrics"],
            input=exposition,
            capture_output=True,
            check=False,
        )
        assert (lint.returncode, lint.stdout + lint.stderr) == (0, b"")
    finally:
        run.close()


def test_speed_3000_never_exports_a_zero_cost_per_token(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "GPUWATCH_AGENT__STATE_DIR": str(tmp_path)}
    args = ["--simulate", "demo", "--speed", "3000", "--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuwatch", "run", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    scrapes: list[Samples] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(scrapes) < 20:
            time.sleep(0.2)
            try:
                scrapes.append(samples(fetch(f"http://127.0.0.1:{port}/metrics")))
            except OSError:
                continue
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err.decode()
    tokens = ("gpuwatch_tokens_total", frozenset({("source", SOURCE), ("kind", "generation")}))
    assert scrapes[-1][tokens] > 0, "the demo served tokens"
    assert all(v > 0 for values in scrapes for v in all_per_million(values))
    cost = ("gpuwatch_gpu_cost_usd_total", frozenset({("gpu", "3")}))
    assert scrapes[-1].get(cost, 0.0) > 0, "150 s ticks are sampled time, not gaps"


def test_sources_without_a_cost_basis_are_named_once_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nv, clock = simulated("demo", ManualClock())
    url = f"http://127.0.0.1:{free_port()}/metrics"
    agent = Agent(
        Config(agent=AgentConfig(hostname="test-host")),
        nv,
        clock,
        AgentOptions(
            extra_token_sources=(
                TokenSourceConfig(name="fine", url=url, gpus=[3]),
                TokenSourceConfig(name="elsewhere", url=url, gpus=[3, 7]),
                TokenSourceConfig(name="no-gpus", url=url),
            ),
            environ={},
        ),
    )
    with caplog.at_level(logging.INFO, logger="gpuwatch.agent"):
        agent.open()
    levels = [r.levelno for r in caplog.records if r.name == "gpuwatch.agent"]
    agent.stop()
    assert levels.count(logging.WARNING) == 1  # "elsewhere": GPU 7 is not on this host
    assert levels.count(logging.INFO) == 1  # "no-gpus"
