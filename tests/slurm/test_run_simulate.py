"""`gpuwatch run --simulate slurm` as a real process: the scenario turns `[slurm]` on, the
agent finds the cluster through SLURM_CONF as Slurm's commands do, and a job's series
start with it and end when it is cancelled."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.agent_process import fetch, start_agent
from tests.conftest import free_port
from tests.slurm_cluster import SlurmCluster


def _job_series(port: int) -> dict[str, dict[str, str]]:
    text = fetch(f"http://127.0.0.1:{port}/metrics")
    return {
        s.labels["job_id"]: s.labels
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "gpuwatch_gpu_job_info"
    }


def _wait(port: int, present: bool, job_id: str) -> dict[str, dict[str, str]]:
    """Until the job's series is there with its account (a job seen in its processes'
    environment before the next squeue has empty user, account and partition), or gone."""
    deadline = time.monotonic() + 20
    while True:
        series = _job_series(port)
        if present and series.get(job_id, {}).get("account"):
            return series
        if not present and job_id not in series:
            return series
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} {'never appeared' if present else 'stayed'}: {series}")
        time.sleep(0.2)


def test_run_simulate_slurm_serves_a_jobs_series_until_it_ends(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[agent]\nstate_dir = "{tmp_path}"\n\n[slurm]\nlist_interval_seconds = 1.0\n'
    )
    job = slurm.sbatch("--gres=gpu:1", "--account=astro", "--partition=debug", wrap="sleep 600")
    port = free_port()
    proc = start_agent(["--simulate", "slurm", "--config", str(config)], port)
    try:
        slurm.wait_running(job)
        labels = _wait(port, True, job)[job]
        assert (labels["user"], labels["account"], labels["partition"]) == (
            "root",
            "astro",
            "debug",
        )
        slurm.scancel(job)
        slurm.wait_ended(job)
        _wait(port, False, job)
    finally:
        slurm.run(["scancel", job], check=False)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err.decode()
