"""GPUs renumbered inside device cgroups: with `proctrack/cgroup`, `task/cgroup` and
`ConstrainDevices=yes` a job sees only its GPUs and `CUDA_VISIBLE_DEVICES` counts from 0
(a job given GRES 1-2 reads `0,1`); the agent still puts it on the GPUs Slurm assigned,
from the global indexes. Its own cluster, started for this module (job IDs from 1000)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwatch.config import AgentConfig, Config
from gpuwatch.slurm.config import SlurmConfig
from gpuwatch.slurm.evidence import parse_job_cgroup
from tests.conftest import scenario_agent, simulated
from tests.slurm.agent_helpers import holds, tick
from tests.slurm_cluster import SlurmCluster


@pytest.fixture(scope="module")
def constrained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    cluster = SlurmCluster.start(tmp_path_factory.mktemp("slurm-cgroup"), cgroups=True)
    yield cluster
    cluster.stop()


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode() for k, v in pairs}


def test_renumbered_gpus_are_attributed_by_global_index(constrained: SlurmCluster) -> None:
    first = constrained.sbatch("--gres=gpu:1", wrap="sleep 600")
    job = constrained.sbatch("--gres=gpu:2", "--account=geo", wrap="sleep 600")
    nv, clock = simulated("slurm")
    config = Config(
        agent=AgentConfig(hostname="test-host", interval_seconds=10.0),
        slurm=SlurmConfig(enabled=True, list_interval_seconds=10.0),
    )
    agent = scenario_agent(config, nv, clock, environ=constrained.env)
    try:
        constrained.wait_running(first)
        constrained.wait_running(job)
        assigned = constrained.gres_indexes(job)
        assert assigned != (0, 1), "the second job should not be given GRES 0"
        pid = constrained.job_pids(job)[0]
        env = _environ(pid)
        assert env["CUDA_VISIBLE_DEVICES"] == "0,1"  # renumbered inside its device cgroup
        cgroup = parse_job_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
        assert cgroup is not None
        assert cgroup.job_id == job
        snapshot = tick(agent, clock)
        held = holds(snapshot, job)
        assert sorted(h.gres_index for h in held) == list(assigned)
        minors = {
            g.identity.uuid: g.identity.minor_number
            for g in snapshot.gpus
            if g.identity.minor_number is not None
        }
        assert sorted(minors[h.uuid] for h in held) == list(assigned)
        assert all(h.running_pids and h.job.account == "geo" for h in held)
    finally:
        agent.stop()
        for j in (first, job):
            constrained.run(["scancel", j], check=False)
        for j in (first, job):
            constrained.wait_ended(j)
