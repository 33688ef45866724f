"""One real Slurm cluster for every Slurm test of the session (started once, ~4 s), and
the agent on the `slurm` scenario against it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuwatch.agent import Agent
from gpuwatch.analysis.config import AnalysisConfig
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.slurm.config import SlurmConfig
from tests.conftest import scenario_agent, simulated
from tests.slurm_cluster import SlurmCluster


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The running one-node cluster (`Gres=gpu:4`), stopped at the end of the session."""
    cluster = SlurmCluster.start(tmp_path_factory.mktemp("slurm"))
    yield cluster
    cluster.stop()


@pytest.fixture
def agent(slurm: SlurmCluster) -> Iterator[tuple[Agent, ManualClock]]:
    """An opened agent on the `slurm` scenario with `[slurm]` on against the cluster: 10 s
    ticks (`agent_helpers.tick`), a 60 s window, squeue every 10 s."""
    nv, clock = simulated("slurm")
    config = Config(
        agent=AgentConfig(hostname="test-host", interval_seconds=10.0),
        analysis=AnalysisConfig(window_seconds=60.0),
        slurm=SlurmConfig(enabled=True, list_interval_seconds=10.0),
    )
    agent = scenario_agent(config, nv, clock, environ=slurm.env)
    yield agent, clock
    agent.stop()
