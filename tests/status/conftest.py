"""Status documents from simulated fleets, built the way an agent builds them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.export.status_json import encode, status_document
from gpuwatch.simulate import SimulatedNvml, load_scenario
from gpuwatch.simulate.services import ScenarioServices
from gpuwatch.status.local import replay
from tests.conftest import scenario_agent

HOSTILE_NAME = "\x1b[31mEVIL\x1b[0m\x1b]0;pwned\x07 [bold]markup[/bold] \u202eevil\nline2 :smile:"
LONG_COMMAND = (
    "/opt/conda/envs/research-2024/bin/python3.11 -u /home/someone/projects/"
    "a-very-long-project-name/experiments/train_with_a_really_long_script_name_v2_final.py "
    "--config configs/an/extremely/long/path/to/a/config/file.yaml --learning-rate 0.0001 "
    "--batch-size 64 --gradient-accumulation-steps 16 --output-dir /scratch/runs/2024-11-21"
)
HOSTILE_SCENARIO = f"""
name = "hostile"

[[gpus]]
preset = "h100-sxm"

[gpus.activity]
levels = {{ util = 0.97, sm = 0.9 }}

[[gpus.processes]]
pid = 4242
name = {json.dumps(LONG_COMMAND)}
memory = "70 GiB"

[[gpus.processes]]
pid = 4343
name = {json.dumps(HOSTILE_NAME)}
memory = "1 GiB"

[[gpus]]
preset = "l4"
"""


def write_hostile(directory: Path) -> Path:
    """The hostile scenario (a long command line, a name full of escapes) as a file."""
    path = directory / "hostile.toml"
    path.write_text(HOSTILE_SCENARIO, encoding="utf-8")
    return path


def replayed_document(scenario: str | Path, at: float, *, hostname: str = "test-host") -> Any:
    """The status document of `scenario` replayed to `at` seconds, through JSON, its
    inference servers read as `gpuwatch status --simulate` reads them."""
    clock = ManualClock()
    nv = SimulatedNvml(
        load_scenario(scenario), clock=clock, sleep=lambda s: time.sleep(min(s, 0.01))
    )
    config = Config(agent=AgentConfig(hostname=hostname))
    services = ScenarioServices(nv, clock, cluster=False)
    services.start()
    agent = scenario_agent(config, nv, clock, services=services)
    try:
        snapshot = replay(agent, clock, at)
    finally:
        agent.stop()
    return json.loads(encode(status_document(snapshot, source="simulation")))
