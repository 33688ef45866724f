"""Cost on the demo fleet, end to end: `gpuwatch run --simulate demo --speed 60`.

The demo prices its H100s statically and its GPU 3 serves a simulated vLLM /metrics
that the agent scrapes over loopback HTTP. The analysis window is shortened to 10 minutes
(GPUWATCH_ANALYSIS__WINDOW_SECONDS) so the run takes ~20 s of real time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.agent_process import fetch, samples
from tests.conftest import free_port


def value(
    values: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return values[(name, frozenset(labels.items()))]


def test_demo_costs_idle_cost_and_cost_per_token(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "GPUWATCH_ANALYSIS__WINDOW_SECONDS": "600",
        "GPUWATCH_AGENT__STATE_DIR": str(tmp_path),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuwatch",
            "run",
            "--simulate",
            "demo",
            "--speed",
            "60",
            "--listen",
            f"127.0.0.1:{port}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        values: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        while time.monotonic() < deadline:
            time.sleep(1.0)
            try:
                values = samples(fetch(f"http://127.0.0.1:{port}/metrics"))
            except OSError:
                continue
            state = ("gpuwatch_gpu_state", frozenset({("gpu", "1"), ("state", "idle")}))
            elapsed = values.get(("gpuwatch_gpu_state_seconds", frozenset({("gpu", "1")})), 0)
            if values.get(state) == 1.0 and elapsed >= 1200:
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err.decode()
    assert value(values, "gpuwatch_gpu_state", gpu="1", state="idle") == 1.0
    assert value(values, "gpuwatch_gpu_price_usd_per_hour", gpu="1", source="static") == 6.88
    idle_gpu_cost = value(values, "gpuwatch_gpu_cost_usd_total", gpu="1")
    assert idle_gpu_cost > 2.0  # 20 simulated minutes at $6.88/h
    assert value(values, "gpuwatch_gpu_idle_cost_usd_total", gpu="1") == pytest.approx(
        idle_gpu_cost, rel=1e-6
    ), "idle from its first sample: all of its cost is idle cost"
    assert value(values, "gpuwatch_gpu_idle_cost_usd_total", gpu="0") < 0.01 * value(
        values, "gpuwatch_gpu_cost_usd_total", gpu="0"
    ), "the trainer's data-loading pauses are not idle time"
    source = "simulated-vllm-gpu3"
    tokens = value(values, "gpuwatch_tokens_total", source=source, kind="prompt") + value(
        values, "gpuwatch_tokens_total", source=source, kind="generation"
    )
    cost = value(values, "gpuwatch_gpu_cost_usd_total", gpu="3")
    assert tokens > 0
    by_kind = {
        kind: value(
            values, "gpuwatch_cost_per_million_tokens_usd", source=source, window="1h", kind=kind
        )
        for kind in ("prompt", "generation", "all")
    }
    # the agent is younger than an hour: the window holds all its cost and all its tokens
    # up to the last scrape (the cost runs on for up to one 15 s scrape interval after it)
    assert by_kind["all"] == pytest.approx(cost / tokens * 1e6, rel=0.03)
    generated = value(values, "gpuwatch_tokens_total", source=source, kind="generation")
    assert by_kind["generation"] == pytest.approx(cost / generated * 1e6, rel=0.03)
    # the demo server makes 5 prompt tokens per generated one: decode costs 6x "any token"
    assert by_kind["generation"] == pytest.approx(6.0 * by_kind["all"], rel=1e-9)
    assert by_kind["prompt"] == pytest.approx(1.2 * by_kind["all"], rel=1e-9)
