"""Slurm families, rendered from `FleetSnapshot.jobs` and the cost summary.

One per-job series only: `gpuwatch_gpu_job_info{gpu, uuid, job_id, user, account,
partition, step}`, the join from a GPU to the job holding it (dashboards and rules join
on `uuid`); `gpuwatch_gpu_job_allocated_idle{gpu, uuid, job_id}` for the verdict; both
end when the job leaves the node (squeue no longer lists it and no process of it runs).
Cost counters are per account and per user, never per job. Label values are data:
prometheus_client escapes them in the exposition. Absent while `[slurm]` is off.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.core.costs import GroupCost
from gpuwatch.core.jobs import WINDOW_IDLE_STATES
from gpuwatch.core.snapshot import FleetSnapshot

_GPU = ("gpu", "uuid")


def slurm_families(snapshot: FleetSnapshot) -> Iterator[Metric]:
    """The Slurm families of one snapshot (none while `[slurm]` is off)."""
    jobs = snapshot.jobs
    if jobs is None:
        return
    listed = GaugeMetricFamily(
        "gpuwatch_slurm_jobs", "Jobs running on this node in the newest squeue listing."
    )
    listed.add_metric([], float(jobs.jobs_listed))
    yield listed
    stale = GaugeMetricFamily(
        "gpuwatch_slurm_stale",
        "1 while no squeue listing younger than 3 list intervals is in use (none yet, or "
        "squeue failing): the last listing's holds are kept, no tick is charged to jobs.",
    )
    stale.add_metric([], 1.0 if jobs.stale or jobs.listed_at_seconds is None else 0.0)
    yield stale
    if jobs.listed_at_seconds is not None:
        at = GaugeMetricFamily(
            "gpuwatch_slurm_listed_timestamp_seconds",
            "When the squeue listing in use was taken (Unix time).",
        )
        at.add_metric([], jobs.listed_at_seconds)
        yield at
    info = InfoMetricFamily(
        "gpuwatch_gpu_job",
        "A Slurm job holds this GPU (its GRES): one series per job and GPU; join on uuid. "
        "step: the steps of its processes on the GPU (comma-separated; empty: none runs).",
        labels=(*_GPU, "job_id", "user", "account", "partition", "step"),
    )
    idle = GaugeMetricFamily(
        "gpuwatch_gpu_job_allocated_idle",
        "1 when the job holds this GPU, runs no process on it and the GPU was idle over "
        "the analysis window; 0 otherwise; absent while the window is pending or unknown.",
        labels=(*_GPU, "job_id"),
    )
    states = {v.uuid: v.state for v in snapshot.verdicts}
    for gpu in jobs.gpus:
        values = [str(gpu.gpu_index), gpu.uuid]
        for hold in gpu.allocations:
            job = hold.job
            info.add_metric(
                [*values, job.job_id],
                {
                    "user": job.user,
                    "account": job.account,
                    "partition": job.partition,
                    "step": ",".join(hold.steps),
                },
            )
            allocated_idle = hold.allocated_idle
            state = states.get(gpu.uuid, "pending")
            if allocated_idle is None or state == "pending":
                continue
            window_idle = allocated_idle and state in WINDOW_IDLE_STATES
            idle.add_metric([*values, job.job_id], 1.0 if window_idle else 0.0)
    for family in (info, idle):
        if family.samples:
            yield family
    yield from _group_costs("account", snapshot.cost.slurm_accounts)
    yield from _group_costs("user", snapshot.cost.slurm_users)


def _group_costs(label: str, groups: tuple[GroupCost, ...]) -> Iterator[Metric]:
    cost = CounterMetricFamily(
        f"gpuwatch_slurm_{label}_cost_usd",
        f"Cost charged to the Slurm {label}'s jobs on this node since the agent started, "
        "in USD: their processes' share of the GPUs' active time plus their idle cost.",
        labels=(label,),
    )
    idle = CounterMetricFamily(
        f"gpuwatch_slurm_{label}_idle_cost_usd",
        f"The idle part of the Slurm {label}'s cost, in USD: the unused fraction of the "
        "GPUs its jobs hold, split among their holders.",
        labels=(label,),
    )
    held = CounterMetricFamily(
        f"gpuwatch_slurm_{label}_held_cost_usd",
        f"The held part of the Slurm {label}'s cost, in USD: its jobs' whole share of "
        "each tick at which they held a GPU and ran nothing on it.",
        labels=(label,),
    )
    for group in groups:
        cost.add_metric([group.name], group.cost_usd_total)
        idle.add_metric([group.name], group.idle_cost_usd_total)
        held.add_metric([group.name], group.held_cost_usd_total)
    if cost.samples:
        yield cost
        yield idle
        yield held


SLURM_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gpuwatch_slurm_jobs", "gauge"),
    ("gpuwatch_slurm_stale", "gauge"),
    ("gpuwatch_slurm_listed_timestamp_seconds", "gauge"),
    ("gpuwatch_gpu_job", "info"),
    ("gpuwatch_gpu_job_allocated_idle", "gauge"),
    ("gpuwatch_slurm_account_cost_usd", "counter"),
    ("gpuwatch_slurm_account_idle_cost_usd", "counter"),
    ("gpuwatch_slurm_account_held_cost_usd", "counter"),
    ("gpuwatch_slurm_user_cost_usd", "counter"),
    ("gpuwatch_slurm_user_idle_cost_usd", "counter"),
    ("gpuwatch_slurm_user_held_cost_usd", "counter"),
)
"""Every family `slurm_families` may yield (name, type)."""
