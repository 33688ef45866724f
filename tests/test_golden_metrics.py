"""The whole /metrics of the demo fleet at a fixed simulated time, against golden files.

Three files: the gpuwatch families (per-process series on), which must pass
`promtool check metrics` with zero findings, and the dcgm-exporter-compatible families in
its classic and its 4.9 naming set (`[exporter] dcgm_naming`), whose only findings may be
promtool's lints on DCGM's own names, kept as they are so dcgm dashboards work unchanged:
camelCase label names (`modelName`, `UUID`, `Hostname`) and the type word in
`DCGM_FI_DEV_PCIE_REPLAY_COUNTER`.

Regenerate after an intended change with:  UPDATE_GOLDEN=1 pytest tests/test_golden_metrics.py
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest

from gpuwatch.export.collector import SnapshotCollector, build_registry
from gpuwatch.export.families import ExportOptions
from tests.conftest import make_agent, require_binary

GOLDEN_DIR = Path(__file__).parent / "golden"
SIMULATED_SECONDS = 2000  # past the 30-minute window: idle, held, overprovisioned


def render_demo() -> tuple[str, str, str]:
    """(gpuwatch families, DCGM families classic, DCGM families 4.9) after
    SIMULATED_SECONDS of 1 s ticks, the demo's vLLM server scraped as due (its token
    counters and KV cache use). The 4.9 set is the same snapshot through the agent's own
    collector with `dcgm_naming = "4.9"`."""
    agent, clock = make_agent("demo", dcgm_compat=True, per_process_metrics=True, servers=True)
    try:
        for _ in range(SIMULATED_SECONDS):
            clock.advance(1.0)
            agent.tokens.scrape_due(inline=True)
            agent.tick()
        text = generate_latest(agent.registry).decode()
        collector = SnapshotCollector(
            agent.store, ExportOptions(), dcgm_compat=True, dcgm_naming="4.9", hostname="test-host"
        )
        current = generate_latest(build_registry(collector)).decode()
    finally:
        agent.stop()
    dcgm_start = text.index("# HELP DCGM_")
    return text[:dcgm_start], text[dcgm_start:], current[current.index("# HELP DCGM_") :]


FILES = ("demo_metrics.txt", "demo_dcgm_metrics.txt", "demo_dcgm49_metrics.txt")


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return dict(zip(FILES, render_demo(), strict=True))


@pytest.mark.parametrize("name", FILES)
def test_demo_metrics_match_golden_file(rendered: dict[str, str], name: str) -> None:
    golden = GOLDEN_DIR / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(rendered[name])
    assert golden.exists(), "no golden file: run with UPDATE_GOLDEN=1"
    assert rendered[name] == golden.read_text(), f"{name} changed: review, then regenerate"


def test_rendering_is_deterministic(rendered: dict[str, str]) -> None:
    assert render_demo() == tuple(rendered[name] for name in FILES)


def promtool_check(text: bytes) -> tuple[int, list[str]]:
    result = subprocess.run(
        [require_binary("promtool"), "check", "metrics"],
        input=text,
        capture_output=True,
        check=False,
    )
    return result.returncode, (result.stdout + result.stderr).decode().splitlines()


def test_gpuwatch_golden_file_has_zero_promtool_findings() -> None:
    returncode, findings = promtool_check((GOLDEN_DIR / "demo_metrics.txt").read_bytes())
    assert findings == []
    assert returncode == 0


@pytest.mark.parametrize("name", FILES[1:])
def test_dcgm_golden_file_parses_and_only_dcgm_label_names_are_linted(name: str) -> None:
    returncode, findings = promtool_check((GOLDEN_DIR / name).read_bytes())
    assert returncode in (0, 3), findings  # 1 would be a parse error
    dcgm_own = (
        "label names should be written in 'snake_case'",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'",
    )
    unexpected = [f for f in findings if not any(lint in f for lint in dcgm_own)]
    assert unexpected == []
