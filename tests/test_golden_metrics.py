"""The whole /metrics of the demo fleet at a fixed simulated time, against a golden file.

Regenerate after an intended change with:  GPUWATCH_UPDATE_GOLDEN=1 pytest tests/test_golden_metrics.py
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from prometheus_client.exposition import generate_latest

from tests.conftest import make_agent, require_binary

GOLDEN = Path(__file__).parent / "golden" / "demo_metrics.txt"
SIMULATED_SECONDS = 300


def render_demo() -> str:
    agent, clock = make_agent("demo", dcgm_compat=True, per_process_metrics=True)
    try:
        for _ in range(SIMULATED_SECONDS):
            clock.advance(1.0)
            agent.tick()
        return generate_latest(agent.registry).decode()
    finally:
        agent.stop()


def test_demo_metrics_match_golden_file() -> None:
    text = render_demo()
    if os.environ.get("GPUWATCH_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), "no golden file: run with GPUWATCH_UPDATE_GOLDEN=1"
    assert text == GOLDEN.read_text(), "demo /metrics changed: review, then regenerate"


def test_rendering_is_deterministic() -> None:
    assert render_demo() == render_demo()


def test_golden_file_passes_promtool_check_metrics() -> None:
    promtool = require_binary("promtool")
    result = subprocess.run(
        [promtool, "check", "metrics"],
        input=GOLDEN.read_bytes(),
        capture_output=True,
        check=False,
    )
    findings = (result.stdout + result.stderr).decode()
    assert result.returncode == 0, findings
    assert findings.strip() == "", findings
