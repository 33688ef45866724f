"""Slurm jobs on simulated GPUs, end to end: real sbatch jobs on the real one-node cluster,
the `slurm` scenario's stand-in listing their processes as NVML would, the agent's Slurm
collector asking squeue and reading /proc.

A busy job (`--gres=gpu:2`, its processes name their GPUs) and an idle one (`--gres=gpu:1`,
its one process drops SLURM_*_GPUS from its environment: it holds its GRES and runs
nothing), submitted once for the module.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.slurm.config import SlurmConfig
from tests.conftest import scenario_agent, simulated
from tests.slurm.agent_helpers import Jobs, busy_and_idle_jobs, holds, series, tick
from tests.slurm_cluster import SlurmCluster


@pytest.fixture(scope="module")
def jobs(slurm: SlurmCluster) -> Iterator[Jobs]:
    with busy_and_idle_jobs(slurm, busy_gpus=2) as submitted:
        yield submitted


def _minor_of(snapshot: FleetSnapshot, uuid: str) -> int | None:
    return next(g.identity.minor_number for g in snapshot.gpus if g.identity.uuid == uuid)


def test_jobs_hold_the_gpus_slurm_assigned(
    slurm: SlurmCluster, jobs: Jobs, agent: tuple[Agent, ManualClock]
) -> None:
    snapshot = tick(*agent)
    for job_id, account, busy in ((jobs.busy, "physics", True), (jobs.idle, "chem", False)):
        held = holds(snapshot, job_id)
        assigned = slurm.gres_indexes(job_id)
        assert sorted(h.gres_index for h in held) == list(assigned)
        # GRES index g is /dev/nvidia<g>: the stand-in numbers minors in reverse of NVML
        assert all(_minor_of(snapshot, h.uuid) == h.gres_index for h in held)
        assert {(h.job.user, h.job.account, h.job.partition) for h in held} == {
            ("root", account, "debug")
        }
        assert all(h.allocated_idle is (not busy) for h in held), held
        assert all(bool(h.running_pids) is busy for h in held)
    assert snapshot.jobs is not None
    assert snapshot.jobs.jobs_listed == 2
    assert not any(g.unowned_pids for g in snapshot.jobs.gpus)


def test_a_cancelled_job_leaves_its_gpus(
    slurm: SlurmCluster, agent: tuple[Agent, ManualClock]
) -> None:
    job = slurm.sbatch("--gres=gpu:1", "--account=bio", wrap="sleep 600")
    slurm.wait_running(job)
    assert holds(tick(*agent), job)
    slurm.scancel(job)
    slurm.wait_ended(job)
    assert holds(tick(*agent), job) == []


def test_after_the_window_the_join_series_verdict_and_costs(
    slurm: SlurmCluster, jobs: Jobs, agent: tuple[Agent, ManualClock]
) -> None:
    for _ in range(9):  # 90 s of 10 s ticks: past the 60 s window
        snapshot = tick(*agent)
    exposed = series(agent[0])
    info = {(s["uuid"], s["job_id"]): s for s, _ in exposed["gpuwatch_gpu_job_info"]}
    uuid_of = {g.identity.minor_number: g.identity.uuid for g in snapshot.gpus}
    for job_id, account, step in ((jobs.busy, "physics", "batch"), (jobs.idle, "chem", "")):
        for index in slurm.gres_indexes(job_id):
            labels = info.pop((uuid_of[index], job_id))
            assert (labels["user"], labels["account"], labels["partition"]) == (
                "root",
                account,
                "debug",
            )
            assert labels["step"] == step
    assert info == {}, "a series for a GPU no job was given"
    idle = {s["job_id"]: v for s, v in exposed["gpuwatch_gpu_job_allocated_idle"]}
    assert idle == {jobs.busy: 0.0, jobs.idle: 1.0}
    assert exposed["gpuwatch_slurm_stale"] == [({}, 0.0)]
    # the idle job is the only holder of its GPU from the first tick: its account's cost
    # is that GPU's cost, all of it idle (no process, no activity)
    gpu_cost = {s["uuid"]: v for s, v in exposed["gpuwatch_gpu_cost_usd_total"]}
    accounts = {s["account"]: v for s, v in exposed["gpuwatch_slurm_account_cost_usd_total"]}
    idle_costs = {s["account"]: v for s, v in exposed["gpuwatch_slurm_account_idle_cost_usd_total"]}
    (chem_gpu,) = slurm.gres_indexes(jobs.idle)
    assert accounts["chem"] == pytest.approx(gpu_cost[uuid_of[chem_gpu]], rel=1e-12)
    assert accounts["chem"] > 0
    assert idle_costs["chem"] == pytest.approx(accounts["chem"], rel=1e-12)
    physics = sum(gpu_cost[uuid_of[i]] for i in slurm.gres_indexes(jobs.busy))
    assert accounts["physics"] == pytest.approx(physics, rel=1e-12)
    users = {s["user"]: v for s, v in exposed["gpuwatch_slurm_user_cost_usd_total"]}
    assert users == {"root": pytest.approx(accounts["chem"] + accounts["physics"], rel=1e-12)}


def test_the_stand_in_refuses_what_nvml_refuses(jobs: Jobs) -> None:
    nv, _ = simulated("slurm")
    nv.nvmlInit()
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(4)]
    listed = {p.pid for h in handles for p in nv.nvmlDeviceGetComputeRunningProcesses(h)}
    assert listed, "the busy job's processes are GPU processes"
    for pid in listed:
        assert nv.nvmlSystemGetProcessName(pid)
    # a process that names no GPU (the idle job's, this test's) is on no GPU
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlSystemGetProcessName(os.getpid())
    for handle in handles:  # the job processes run no kernel: no utilization sample
        with pytest.raises(pynvml.NVMLError_NotFound):
            nv.nvmlDeviceGetProcessUtilization(handle, 0)
    nv.nvmlShutdown()


def test_without_the_hosts_proc_a_holders_idle_is_unknown_never_1(
    slurm: SlurmCluster, jobs: Jobs, tmp_path: Path
) -> None:
    # an agent whose proc_root has none of NVML's PIDs (a container without the host's
    # /proc): the busy job's processes are on its GPUs but their job cannot be read
    nv, clock = simulated("slurm")
    config = Config(
        agent=AgentConfig(hostname="test-host", interval_seconds=10.0),
        slurm=SlurmConfig(enabled=True, list_interval_seconds=10.0, proc_root=tmp_path),
    )
    agent = scenario_agent(config, nv, clock, environ=slurm.env)
    try:
        snapshot = tick(agent, clock)
    finally:
        agent.stop()
    busy = holds(snapshot, jobs.busy)
    assert busy
    assert {(h.allocated_idle, h.unknown_reason) for h in busy} == {(None, "pid_unmapped")}
    # the idle job's GPU has no process at all: still known to be idle
    assert {h.allocated_idle for h in holds(snapshot, jobs.idle)} == {True}
