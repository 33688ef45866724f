"""What the Slurm tests read of an agent on the `slurm` scenario (`agent` in conftest.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.agent import Agent
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.jobs import JobAllocationSample
from gpuwatch.core.snapshot import FleetSnapshot
from tests.slurm_cluster import SlurmCluster


def tick(agent: Agent, clock: ManualClock) -> FleetSnapshot:
    agent.refresh_jobs()
    clock.advance(10.0)
    return agent.tick()


def series(agent: Agent) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = generate_latest(agent.registry).decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def holds(snapshot: FleetSnapshot, job_id: str) -> list[JobAllocationSample]:
    assert snapshot.jobs is not None
    return [a for g in snapshot.jobs.gpus for a in g.allocations if a.job.job_id == job_id]


IDLE_WRAP = "exec env -u SLURM_JOB_GPUS -u SLURM_STEP_GPUS sleep 600"
"""An sbatch --wrap whose one process drops SLURM_*_GPUS: it holds its GRES, runs nothing."""


@dataclass(frozen=True)
class Jobs:
    """A busy job (account physics; its process names its GPUs) and an idle one (chem)."""

    busy: str
    idle: str


@contextmanager
def busy_and_idle_jobs(
    slurm: SlurmCluster, *, busy_gpus: int = 1, idle_args: tuple[str, ...] = ()
) -> Iterator[Jobs]:
    """Submit both (the idle one with `idle_args` too), wait until they run, yield them;
    cancel both and wait until they have ended."""
    busy = slurm.sbatch(f"--gres=gpu:{busy_gpus}", "--account=physics", wrap="sleep 600")
    idle = slurm.sbatch("--gres=gpu:1", "--account=chem", *idle_args, wrap=IDLE_WRAP)
    try:
        slurm.wait_running(busy)
        slurm.wait_running(idle)
        yield Jobs(busy, idle)
    finally:
        for job in (busy, idle):
            slurm.run(["scancel", job], check=False)
        for job in (busy, idle):
            slurm.wait_ended(job)


def job_rows(history: Path, job_id: str) -> list[dict[str, Any]]:
    """The job's `job_hours` rows in the history file, as dicts."""
    conn = sqlite3.connect(history)
    conn.row_factory = sqlite3.Row
    try:
        return [
            dict(r) for r in conn.execute("SELECT * FROM job_hours WHERE job_id = ?", (job_id,))
        ]
    finally:
        conn.close()
