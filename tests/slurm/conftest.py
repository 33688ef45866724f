"""One real Slurm cluster for every Slurm test of the session (started once, ~5 s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.slurm_cluster import SlurmCluster


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The running one-node cluster (`Gres=gpu:4`), stopped at the end of the session."""
    cluster = SlurmCluster.start(tmp_path_factory.mktemp("slurm"))
    yield cluster
    cluster.stop()
