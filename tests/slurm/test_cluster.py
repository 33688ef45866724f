"""The fixture itself: a `--gres=gpu:N` job runs with the GPUs Slurm assigned in its env."""

from __future__ import annotations

from pathlib import Path

from tests.slurm_cluster import SlurmCluster


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode() for k, v in pairs}


def test_a_gpu_job_carries_its_gres_indexes(slurm: SlurmCluster) -> None:
    job = slurm.sbatch("--gres=gpu:2", "--account=physics", wrap="sleep 300")
    try:
        slurm.wait_running(job)
        indexes = slurm.gres_indexes(job)
        assert len(indexes) == 2
        envs = [_environ(pid) for pid in slurm.job_pids(job)]
        sleeper = next(e for e in envs if e.get("SLURM_JOB_ID") == job)
        gpus = tuple(int(i) for i in sleeper["SLURM_JOB_GPUS"].split(","))
        assert gpus == indexes
        assert "Account=physics" in slurm.show_job(job)
    finally:
        slurm.scancel(job)
    slurm.wait_ended(job)
