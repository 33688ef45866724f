"""`gpuwatch run --simulate slurm --speed 120` posting to a loopback Slack: a real sbatch
job that holds a GPU and runs nothing on it is named in the idle GPU's alert with its
user and account, next to the GPU's $/h; a busy job is never said to run nothing."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent_process import start_agent
from tests.alerts.conftest import FakeSlack
from tests.conftest import free_port
from tests.slurm.agent_helpers import busy_and_idle_jobs
from tests.slurm_cluster import SlurmCluster

DEADLINE_SECONDS = 60


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    yield fake
    fake.close()


def test_an_allocated_idle_job_is_named_in_the_slack_alert(
    slurm: SlurmCluster, slack: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    monkeypatch.setenv("GPUWATCH_SLACK_WEBHOOK_URL", slack.url)
    monkeypatch.setenv("GPUWATCH_ANALYSIS__EVALUATION_INTERVAL_SECONDS", "10")
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[agent]\nstate_dir = "{tmp_path}"\n\n[slurm]\nlist_interval_seconds = 1.0\n'
    )
    with busy_and_idle_jobs(slurm) as jobs:
        proc = start_agent(
            ["--simulate", "slurm", "--speed", "120", "--config", str(config)], free_port()
        )
        try:
            (idle_gpu,) = slurm.gres_indexes(jobs.idle)
            wanted = f"job `{jobs.idle}` of `root` (account `chem`) (holds it, runs nothing)"
            deadline = time.monotonic() + DEADLINE_SECONDS
            bodies = ""
            while time.monotonic() < deadline and wanted not in bodies:
                time.sleep(0.5)
                bodies = json.dumps([p.body for p in slack.delivered()])
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err.decode()
    assert wanted in bodies, bodies
    assert f"GPU {idle_gpu} (" in bodies
    assert "/h" in bodies, "the alert carries the GPU's price"
    assert f"job `{jobs.busy}` of `root` (account `physics`) (holds it" not in bodies, (
        "a job whose process runs on its GPU is never said to run nothing"
    )
