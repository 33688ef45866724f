"""What the Slurm tests read of an agent on the `slurm` scenario (`agent` in conftest.py)."""

from __future__ import annotations

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.agent import Agent
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.jobs import JobAllocationSample
from gpuwatch.core.snapshot import FleetSnapshot


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
