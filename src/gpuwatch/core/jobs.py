"""Slurm jobs on GPUs: the records the Slurm collector puts in each snapshot.

The same verdict as a pod's hold (`hold_allocated_idle`, shared with pods' holds): a job that holds
a GPU (its GRES) and runs no process on it is allocated-idle. No I/O, no logic beyond it.
"""

from __future__ import annotations

from dataclasses import dataclass

WINDOW_IDLE_STATES = frozenset({"idle"})
"""GPU verdicts (over the analysis window) under which a holding job that runs nothing
there is allocated-idle (`gpuwatch_gpu_job_allocated_idle`, and reclaim's candidates)."""


def hold_allocated_idle(
    running_pids: tuple[int, ...], works_alone: bool, unknown_reason: str | None
) -> bool | None:
    """The one allocated-idle rule of a hold (a pod's or a Slurm job's): False when it runs
    a process on the GPU or holds it alone while it works, None when that is unknown,
    else True."""
    if running_pids or works_alone:
        return False
    return None if unknown_reason is not None else True


@dataclass(frozen=True, slots=True)
class JobRef:
    """A Slurm job: user, account and partition as slurmctld lists them ("" until the
    next listing for a job seen only in its processes' environment)."""

    job_id: str
    user: str
    account: str
    partition: str


@dataclass(frozen=True, slots=True)
class JobAllocationSample:
    """One job's hold on one GPU (its GRES index there). `steps`: the steps of its
    processes on the GPU (sorted; empty when none runs); `running_pids` those processes;
    `works_alone`: the only holder of the GPU, which shows activity this tick."""

    gpu_index: int
    uuid: str
    job: JobRef
    gres_index: int
    steps: tuple[str, ...]
    running_pids: tuple[int, ...]
    unknown_reason: str | None = None
    works_alone: bool = False

    @property
    def allocated_idle(self) -> bool | None:
        """True: the job holds the GPU and runs nothing on it; None: unknown."""
        return hold_allocated_idle(self.running_pids, self.works_alone, self.unknown_reason)


@dataclass(frozen=True, slots=True)
class GpuJobs:
    """The jobs holding one GPU, and the GPU processes in no job holding it."""

    gpu_index: int
    uuid: str
    allocations: tuple[JobAllocationSample, ...] = ()
    unowned_pids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class JobReclaim:
    """Reclaim's credit for cancelling a job (enforce), one GPU's part: the GPU's $/h share
    times the hours left of the job's time limit (USD), at the snapshot time that decided
    the cancel (epoch s)."""

    job: JobRef
    uuid: str
    at_seconds: float
    usd: float


@dataclass(frozen=True, slots=True)
class JobAttribution:
    """One tick's view of the Slurm jobs on this node's GPUs. `reclaimed`: reclaim's
    credits of recent cancels (repeated in every snapshot for a while, so the history
    misses none; it sets them, never adds them)."""

    listed_at_seconds: float | None  # epoch s of the squeue listing used; None: none yet
    jobs_listed: int
    gpus: tuple[GpuJobs, ...] = ()
    stale: bool = False
    reclaimed: tuple[JobReclaim, ...] = ()
