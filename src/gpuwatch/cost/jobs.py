"""Each GPU's cost split among the Slurm jobs on it, totalled per account and per user.

The pods' rule (`gpuwatch.cost.pods.split_among`): the busy part goes to the jobs whose
processes run on the GPU, by their processes' SM utilization (else memory, else count);
the idle part to the jobs holding the GPU (its GRES), one share each. A job's whole share
of a tick at which it holds the GPU and runs nothing on it (allocated-idle at that tick) is
also its held cost, as the history's `job_hours.held_cost_usd`. Totals are kept per
account and per user, never per job, so a year of jobs adds no series; they live as long as
the agent (a counter per account and user that ever ran here). A tick without a fresh job
view (squeue failing for 3 intervals) is charged to nobody. A job seen only in its
processes' environment (started since the last squeue: no user yet) is kept pending and
moved to its account and user when squeue names it, as the history files its rows under
the name it learns later; a job that leaves before squeue ever names it is charged to
account "" and user "". No I/O here.
"""

from __future__ import annotations

from gpuwatch.core.costs import GpuPrice, GroupCost
from gpuwatch.core.jobs import GpuJobs, JobAttribution, JobRef
from gpuwatch.core.snapshot import GpuSample
from gpuwatch.core.verdict import GpuVerdict
from gpuwatch.cost.ledger import tick_cost_usd
from gpuwatch.cost.pods import HolderSplit, split_among

JobKey = tuple[str]  # (job_id,)


def split_gpu_jobs(gpu: GpuSample, jobs: GpuJobs | None, tick_cost: float) -> HolderSplit[JobKey]:
    """One GPU's tick cost among the jobs holding or running on it."""
    allocations = () if jobs is None else jobs.allocations
    by_pid = {pid: (a.job.job_id,) for a in allocations for pid in a.running_pids}
    holding: dict[JobKey | None, float] = {(a.job.job_id,): 1.0 for a in allocations}
    return split_among(gpu, lambda p: by_pid.get(p.pid), holding, tick_cost)


class JobLedger:
    """Cost, idle cost and held cost per Slurm account and per user since the agent
    started (USD)."""

    def __init__(self) -> None:
        self._accounts: dict[str, list[float]] = {}
        self._users: dict[str, list[float]] = {}
        self._pending: dict[str, list[float]] = {}  # unnamed job -> [cost, idle, held]

    def observe(
        self,
        gpus: tuple[GpuSample, ...],
        verdicts: tuple[GpuVerdict, ...],
        prices: dict[str, GpuPrice],
        jobs: JobAttribution | None,
    ) -> None:
        """Charge one tick (each GPU's cost as the ledger charged it) to accounts and users."""
        if jobs is None or jobs.stale:
            return
        samples = {g.identity.uuid: g for g in gpus}
        on_gpu = {g.uuid: g for g in jobs.gpus}
        present = {a.job.job_id: a.job for g in jobs.gpus for a in g.allocations}
        for job_id in [j for j in self._pending if j not in present]:  # left unnamed
            self._charge(JobRef(job_id, "", "", ""), self._pending.pop(job_id))
        for job_id, ref in present.items():
            if ref.user and job_id in self._pending:  # squeue names it now
                self._charge(ref, self._pending.pop(job_id))
        for verdict in verdicts:
            gpu = samples.get(verdict.uuid)
            held = on_gpu.get(verdict.uuid)
            if gpu is None or held is None or not held.allocations:
                continue
            cost = tick_cost_usd(prices.get(verdict.uuid), verdict.tick_seconds)
            holding_idle = {a.job.job_id for a in held.allocations if a.allocated_idle}
            for (job_id,), (busy, idle) in split_gpu_jobs(gpu, held, cost).shares.items():
                charge = [busy + idle, idle, busy + idle if job_id in holding_idle else 0.0]
                ref = present.get(job_id, JobRef(job_id, "", "", ""))
                if ref.user:
                    self._charge(ref, charge)
                else:
                    pending = self._pending.setdefault(job_id, [0.0, 0.0, 0.0])
                    for i, value in enumerate(charge):
                        pending[i] += value

    def _charge(self, ref: JobRef, charge: list[float]) -> None:
        """Add [cost, idle, held] (USD) to the job's account and user."""
        for totals in (
            self._accounts.setdefault(ref.account, [0.0, 0.0, 0.0]),
            self._users.setdefault(ref.user, [0.0, 0.0, 0.0]),
        ):
            for i, value in enumerate(charge):
                totals[i] += value

    def accounts(self) -> tuple[GroupCost, ...]:
        """Every account charged so far, by name."""
        return tuple(GroupCost(k, *self._accounts[k]) for k in sorted(self._accounts))

    def users(self) -> tuple[GroupCost, ...]:
        """Every user charged so far, by name."""
        return tuple(GroupCost(k, *self._users[k]) for k in sorted(self._users))
