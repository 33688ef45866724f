"""News, dedup and cooldown: which GPUs deserve a Slack message now.

Pure and O(GPUs): `decide()` compares each GPU's verdict with what was last said about
that GPU (`AlertMemory`, keyed by uuid) and returns the events to send plus the memory
changes to persist. No I/O, no clock: "now" is the snapshot's timestamp.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

from gpuwatch.core.jobs import JobRef
from gpuwatch.core.snapshot import FleetSnapshot, GpuSample, PodRef
from gpuwatch.core.verdict import GpuVerdict

EventKind = Literal["new", "changed", "reminder", "resolved"]


@dataclass(frozen=True, slots=True)
class AlertMemory:
    """The last alert sent (queued) about one GPU."""

    condition: str  # an AlertCondition
    alerted_at_seconds: float  # epoch seconds of that alert


@dataclass(frozen=True, slots=True)
class PodOnGpu:
    """A pod that holds an allocation of the GPU or runs a process on it."""

    pod: PodRef
    running: bool  # runs a process on the GPU this tick (False: holds it, runs nothing)


@dataclass(frozen=True, slots=True)
class JobOnGpu:
    """A Slurm job that holds the GPU (its GRES); `running`: a process of it is on the GPU."""

    job: JobRef
    running: bool


@dataclass(frozen=True, slots=True)
class AlertEvent:
    """One GPU's news in one evaluation."""

    kind: EventKind
    condition: str  # the condition alerted; for "resolved" the one that ended
    previous: str | None  # for "changed": the condition before
    verdict: GpuVerdict
    gpu: GpuSample | None  # None when the snapshot has no sample for the GPU
    pods: tuple[PodOnGpu, ...] = ()  # Kubernetes attribution on: who holds or uses it
    jobs: tuple[JobOnGpu, ...] = ()  # Slurm attribution on: the jobs holding it


def jobs_on_gpu(snapshot: FleetSnapshot, uuid: str) -> tuple[JobOnGpu, ...]:
    """The Slurm jobs holding one GPU, running ones first, then by job ID."""
    if snapshot.jobs is None:
        return ()
    jobs = {
        a.job.job_id: JobOnGpu(a.job, bool(a.running_pids))
        for attributed in snapshot.jobs.gpus
        if attributed.uuid == uuid
        for a in attributed.allocations
    }
    return tuple(sorted(jobs.values(), key=lambda j: (not j.running, j.job.job_id)))


def pods_on_gpu(snapshot: FleetSnapshot, uuid: str, gpu: GpuSample | None) -> tuple[PodOnGpu, ...]:
    """The pods holding or running on one GPU (by namespace, pod), running ones first."""
    running = {p.pod for p in (gpu.processes or ()) if p.pod is not None} if gpu else set()
    holders = set()
    if snapshot.attribution is not None:
        for attributed in snapshot.attribution.gpus:
            if attributed.uuid == uuid:
                holders |= {a.pod for a in attributed.allocations}
    if gpu is not None and gpu.pod is not None:
        holders.add(gpu.pod)
    pods = {(p.namespace, p.pod): PodOnGpu(p, False) for p in holders}
    pods |= {(p.namespace, p.pod): PodOnGpu(p, True) for p in running}
    return tuple(sorted(pods.values(), key=lambda p: (not p.running, p.pod.namespace, p.pod.pod)))


@dataclass(frozen=True, slots=True)
class Decision:
    """What one evaluation found: events to send, memory rows to write or delete."""

    events: tuple[AlertEvent, ...]
    updates: Mapping[str, AlertMemory | None]  # uuid -> new memory, or None to forget
    clock_went_back_seconds: float = 0.0  # the largest alert time found in the future


def alertable_condition(verdict: GpuVerdict, states: Collection[str]) -> str | None:
    """The GPU's condition worth alerting on, or None.

    Its waste state when listed in `states` (idle/held/underutilized) comes first, then
    "overprovisioned" when the verdict says so and it is listed.
    """
    if verdict.state in states and verdict.state != "busy":
        return verdict.state
    if verdict.overprovisioned and "overprovisioned" in states:
        return "overprovisioned"
    return None


def decide(
    snapshot: FleetSnapshot,
    memory: Mapping[str, AlertMemory],
    *,
    states: Collection[str],
    cooldown_seconds: float,
    resolve: bool = True,
) -> Decision:
    """Compare every verdict with `memory`; GPUs without a verdict are left as they were.

    - entering a condition: "new"; a different condition: "changed", at once;
    - the same condition: nothing until `cooldown_seconds` passed since the last alert,
      then a "reminder";
    - no condition any more (typically busy again): one "resolved" (unless `resolve` is
      False) and the GPU is forgotten;
    - `pending` (no evidence yet, e.g. just after a restart): nothing, either way.

    A remembered alert time later than now means the wall clock went back (NTP, a VM
    restored from a snapshot): it is taken as now (the cooldown restarts now instead of
    muting reminders for the size of the step as well), the memory rewritten, and the
    step reported in `clock_went_back_seconds` for the caller to log.
    """
    now = snapshot.timestamp_seconds
    samples = {gpu.identity.uuid: gpu for gpu in snapshot.gpus}
    events: list[AlertEvent] = []
    updates: dict[str, AlertMemory | None] = {}
    went_back = 0.0
    for verdict in sorted(snapshot.verdicts, key=lambda v: v.gpu_index):
        uuid = verdict.uuid
        if verdict.state == "pending":
            continue  # no evidence: neither a new condition nor a resolution
        gpu = samples.get(uuid)
        condition = alertable_condition(verdict, states)
        last = memory.get(uuid)
        if last is not None and last.alerted_at_seconds > now:
            went_back = max(went_back, last.alerted_at_seconds - now)
            last = AlertMemory(last.condition, now)
            updates[uuid] = last
        if condition is None:
            if last is not None:
                updates[uuid] = None
                if resolve:
                    events.append(
                        AlertEvent(
                            "resolved",
                            last.condition,
                            None,
                            verdict,
                            gpu,
                            pods_on_gpu(snapshot, uuid, gpu),
                            jobs_on_gpu(snapshot, uuid),
                        )
                    )
            continue
        if last is None:
            kind: EventKind = "new"
        elif last.condition != condition:
            kind = "changed"
        elif now - last.alerted_at_seconds >= cooldown_seconds:
            kind = "reminder"
        else:
            continue
        previous = last.condition if last is not None and kind == "changed" else None
        pods = pods_on_gpu(snapshot, uuid, gpu)
        jobs = jobs_on_gpu(snapshot, uuid)
        events.append(AlertEvent(kind, condition, previous, verdict, gpu, pods, jobs))
        updates[uuid] = AlertMemory(condition, now)
    return Decision(tuple(events), updates, went_back)
