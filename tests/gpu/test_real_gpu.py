"""The agent's checks against a real GPU (skipped where NVML is absent)."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from prometheus_client.exposition import generate_latest

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config, ExporterConfig
from gpuwatch.core.clock import SystemClock
from tests.conftest import require_binary


def real_agent(nv: Any) -> Agent:
    config = Config(
        agent=AgentConfig(per_process_metrics=True), exporter=ExporterConfig(dcgm_compat=True)
    )
    agent = Agent(config, nv, SystemClock())
    agent.open()
    return agent


def test_every_real_gpu_samples_with_sane_values(real_nvml: Any) -> None:
    agent = real_agent(real_nvml)
    try:
        agent.tick()
        time.sleep(0.2)
        snapshot = agent.tick()
    finally:
        agent.stop()
    assert snapshot.collectors[0].success
    assert snapshot.driver.driver_version
    for gpu in snapshot.gpus:
        assert gpu.up, gpu.error
        assert gpu.identity.uuid.startswith(("GPU-", "MIG-"))
        total = gpu.identity.memory_total_bytes
        assert total is not None
        assert total > 0
        assert gpu.memory_used_bytes is not None
        assert 0 <= gpu.memory_used_bytes <= total
        for ratio in (gpu.utilization_ratio, gpu.sm_active_ratio, gpu.dram_bandwidth_ratio):
            assert ratio is None or 0.0 <= ratio <= 1.0
        if gpu.identity.gpm_supported:
            assert gpu.sm_active_ratio is not None, "GPM supported but no SM activity"


def test_real_gpu_metrics_pass_promtool(real_nvml: Any) -> None:
    agent = real_agent(real_nvml)
    try:
        agent.tick()
        time.sleep(0.2)
        agent.tick()
        text = generate_latest(agent.registry)
    finally:
        agent.stop()
    assert b"gpuwatch_gpu_up" in text
    promtool = require_binary("promtool")
    gpuwatch_only = b"\n".join(line for line in text.splitlines() if b"DCGM_" not in line)
    result = subprocess.run(
        [promtool, "check", "metrics"],
        input=gpuwatch_only + b"\n",
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
