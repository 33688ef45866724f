"""A job seen in its processes' environment before squeue names it: the per-account and
per-user counters keep its charges pending and move them to its account and user when
squeue names it (as the history files its rows under the name it learns later); a job
that leaves before squeue ever names it is charged to account "" and user "".

The agent is the real one on the `slurm` scenario; the jobs are real processes whose
environment names GPUs (the stand-in lists them as NVML would list CUDA processes); squeue
is a real subprocess answering a file this test writes. In tests/slurm so that no other
test's Slurm processes run beside it (one worker runs the folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwatch.agent import Agent
from gpuwatch.analysis.config import AnalysisConfig
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.simulate.slurm_node import RESCAN_SECONDS
from gpuwatch.slurm.config import SlurmConfig
from tests.conftest import scenario_agent, simulated
from tests.slurm.agent_helpers import series, tick

NAMED, UNNAMED = "977001", "977002"


def _job_process(job_id: str, gres: str) -> subprocess.Popen[bytes]:
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": job_id, "SLURM_JOB_GPUS": gres}
    return subprocess.Popen(["sleep", "120"], env=env)


@pytest.fixture
def processes() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    procs = {NAMED: _job_process(NAMED, "0"), UNNAMED: _job_process(UNNAMED, "1")}
    try:
        yield procs
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


def _agent(tmp_path: Path, answer: Path) -> tuple[Agent, ManualClock]:
    nv, clock = simulated("slurm")
    config = Config(
        agent=AgentConfig(hostname="test-host", interval_seconds=10.0),
        analysis=AnalysisConfig(window_seconds=60.0),
        slurm=SlurmConfig(
            enabled=True,
            slurm_conf=str(tmp_path / "slurm.conf"),
            squeue_command=f"sh -c 'cat {answer}' squeue",
            list_interval_seconds=10.0,
        ),
    )
    return scenario_agent(config, nv, clock), clock


def _gpu_cost(agent: Agent, snapshot: FleetSnapshot, minor: int) -> float:
    (uuid,) = [g.identity.uuid for g in snapshot.gpus if g.identity.minor_number == minor]
    (cost,) = [v for s, v in series(agent)["gpuwatch_gpu_cost_usd_total"] if s["uuid"] == uuid]
    return cost


def _by(agent: Agent, kind: str) -> dict[str, float]:
    found = series(agent).get(f"gpuwatch_slurm_{kind}_cost_usd_total", [])
    return {s[kind]: v for s, v in found}


def test_charges_wait_for_the_name_and_an_unnamed_job_goes_to_empty(
    tmp_path: Path, processes: dict[str, subprocess.Popen[bytes]]
) -> None:
    answer = tmp_path / "squeue.json"
    answer.write_text(json.dumps({"jobs": []}))
    agent, clock = _agent(tmp_path, answer)
    try:
        for _ in range(3):  # squeue lists nothing: both jobs are known by environment only
            snapshot = tick(agent, clock)
        assert snapshot.jobs is not None
        held = {a.job.job_id: a.job for g in snapshot.jobs.gpus for a in g.allocations}
        assert {j: r.user for j, r in held.items()} == {NAMED: "", UNNAMED: ""}
        assert _by(agent, "account") == {}, "nothing charged to a name not known yet"
        processes[UNNAMED].kill()
        processes[UNNAMED].wait()
        time.sleep(2 * RESCAN_SECONDS)  # the stand-in's next scan misses it
        unnamed_cost = _gpu_cost(agent, snapshot, 1)
        answer.write_text(
            json.dumps(
                {
                    "jobs": [
                        {
                            "job_id": int(NAMED),
                            "user_name": "ann",
                            "account": "physics",
                            "partition": "gpu",
                            "job_state": ["RUNNING"],
                            "gres_detail": ["gpu:1(IDX:0)"],
                        }
                    ]
                }
            )
        )
        snapshot = tick(agent, clock)
        accounts, users = _by(agent, "account"), _by(agent, "user")
        # the named job ran alone on minor 0 from the first tick: its GPU's whole cost
        assert accounts["physics"] == pytest.approx(_gpu_cost(agent, snapshot, 0), rel=1e-12)
        assert users["ann"] == pytest.approx(accounts["physics"], rel=1e-12)
        # the unnamed one left before squeue named it: its three ticks, to "" ("" is data)
        assert accounts[""] == pytest.approx(unnamed_cost, rel=1e-12)
        assert users[""] == pytest.approx(unnamed_cost, rel=1e-12)
        assert unnamed_cost > 0
        assert set(accounts) == {"physics", ""}
    finally:
        agent.stop()
