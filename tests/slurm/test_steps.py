"""An srun step's processes name the GPUs of the step (SLURM_STEP_GPUS), the batch shell
and srun the job's (SLURM_JOB_GPUS): a job's step label is per GPU. Its own module, so the
job's two GPUs are free (tests/slurm/test_jobs.py's jobs hold three of the four)."""

from __future__ import annotations

import time

from gpuwatch.agent import Agent
from gpuwatch.core.clock import ManualClock
from tests.slurm.agent_helpers import holds, tick
from tests.slurm_cluster import SlurmCluster


def test_an_srun_step_is_labelled_on_the_gpu_it_was_given(
    slurm: SlurmCluster, agent: tuple[Agent, ManualClock]
) -> None:
    # the batch shell and srun name both GPUs (SLURM_JOB_GPUS), the step's sleep one
    # (SLURM_STEP_GPUS): the step shows on that GPU only
    job = slurm.sbatch("--gres=gpu:2", "--account=bio", wrap="srun --gres=gpu:1 sleep 600")
    try:
        slurm.wait_running(job)
        deadline = time.monotonic() + 20
        while True:
            steps = {h.gres_index: h.steps for h in holds(tick(*agent), job)}
            if ("0", "batch") in steps.values() or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert sorted(steps.values()) == [("0", "batch"), ("batch",)], steps
        assert sorted(steps) == list(slurm.gres_indexes(job))
    finally:
        slurm.scancel(job)
    slurm.wait_ended(job)
