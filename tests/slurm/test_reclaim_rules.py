"""Reclaim's rules on literal snapshots: which jobs are candidates, when the clock
restarts, and a failing scancel (the real `false` command) reclaims nothing."""

from __future__ import annotations

from pathlib import Path

from gpuwatch.core.costs import CostSummary, GpuCost, GpuPrice
from gpuwatch.core.jobs import GpuJobs, JobAllocationSample, JobAttribution, JobRef
from gpuwatch.core.snapshot import DriverInfo, FleetSnapshot
from gpuwatch.core.verdict import GpuVerdict
from gpuwatch.slurm.config import SlurmConfig
from gpuwatch.slurm.evidence import SlurmJob
from gpuwatch.slurm.reclaim import RECLAIM_KEEP_SECONDS, Reclaimer, idle_jobs

Holds = dict[str, list[tuple[JobRef, tuple[int, ...], str | None]]]
"""GPUs by uuid -> (job, its running PIDs there, unknown reason)."""

ANN = JobRef("7", "ann", "physics", "gpu")
BOB = JobRef("8", "bob", "chem", "gpu")


def snapshot(at: float, holds: Holds) -> FleetSnapshot:
    """Each GPU of `holds` idle over the window and $10/h."""
    gpus = tuple(
        GpuJobs(i, uuid, tuple(JobAllocationSample(i, uuid, j, i, (), p, r) for j, p, r in held))
        for i, (uuid, held) in enumerate(sorted(holds.items()))
    )
    return FleetSnapshot(
        at,
        DriverInfo(None, None, None),
        (),
        verdicts=tuple(GpuVerdict(g.gpu_index, g.uuid, "idle", 0.0, 0.0, 0.0, None) for g in gpus),
        jobs=JobAttribution(at, 2, gpus),
        cost=CostSummary(
            gpus=tuple(
                GpuCost(g.gpu_index, g.uuid, GpuPrice(10.0, "static"), 0.0, 0.0, 0.0, 0.0)
                for g in gpus
            )
        ),
    )


def test_a_job_is_a_candidate_only_when_idle_on_every_gpu_it_holds() -> None:
    snap = snapshot(
        0.0,
        {
            "G0": [(ANN, (), None), (BOB, (), None)],  # shared: $5/h each
            "G1": [(ANN, (), None)],
            "G2": [(BOB, (42,), None)],  # bob runs a process here
        },
    )
    found = idle_jobs(snap)
    assert set(found) == {"7"}
    assert (found["7"].gpus, found["7"].usd_per_hour) == (2, 15.0)
    unknown = snapshot(0.0, {"G0": [(ANN, (), "pid_unmapped")]})
    assert idle_jobs(unknown) == {}


def test_the_clock_restarts_when_a_review_does_not_see_the_job_idle() -> None:
    config = SlurmConfig(
        reclaim_mode="dry-run",
        reclaim_warn_after_seconds=60.0,
        reclaim_cancel_after_seconds=120.0,
    )
    reclaimer = Reclaimer(config, Path("/nonexistent"), {})
    listing = {"7": SlurmJob("7", "ann", "physics", "gpu", (0,))}
    idle: Holds = {"G0": [(ANN, (), None)]}
    busy: Holds = {"G0": [(ANN, (9,), None)]}
    for at, holds in ((0.0, idle), (50.0, idle), (100.0, busy), (150.0, idle), (200.0, idle)):
        reclaimer.review(snapshot(at, holds), listing)
    counts = {s.labels["action"]: s.value for f in reclaimer.families() for s in f.samples}
    assert counts["warn"] == 0.0  # idle 0-50 s, then 150-200 s: never 60 s in a row
    reclaimer.review(snapshot(210.0, idle), listing)
    reclaimer.review(snapshot(270.0, idle), listing)
    counts = {s.labels["action"]: s.value for f in reclaimer.families() for s in f.samples}
    assert (counts["warn"], counts["cancel"]) == (1.0, 1.0)  # 150 -> 270 s: both, once
    reclaimer.review(snapshot(400.0, idle), listing)
    counts = {s.labels["action"]: s.value for f in reclaimer.families() for s in f.samples}
    assert (counts["warn"], counts["cancel"]) == (1.0, 1.0)
    # a job squeue no longer lists is never acted on
    reclaimer.review(snapshot(500.0, idle), {})
    reclaimer.review(snapshot(900.0, idle), {})
    counts = {s.labels["action"]: s.value for f in reclaimer.families() for s in f.samples}
    assert counts["cancel"] == 1.0


def test_a_failing_scancel_is_counted_and_reclaims_nothing() -> None:
    config = SlurmConfig(
        reclaim_mode="enforce",
        reclaim_warn_after_seconds=60.0,
        reclaim_cancel_after_seconds=120.0,
        scontrol_command="true",
        scancel_command="false",
    )
    reclaimer = Reclaimer(config, Path("/nonexistent"), {"PATH": "/usr/bin:/bin"})
    listing = {"7": SlurmJob("7", "ann", "physics", "gpu", (0,), 4e9)}
    for at in (0.0, 60.0, 120.0):
        reclaimer.review(snapshot(at, {"G0": [(ANN, (), None)]}), listing)
    samples = [s for f in reclaimer.families() for s in f.samples]
    counts = {s.labels["action"]: s.value for s in samples if "action" in s.labels}
    assert counts == {"warn": 1.0, "cancel": 0.0, "warn_failed": 0.0, "cancel_failed": 1.0}
    assert not [s for s in samples if "account" in s.labels]


def test_a_cancel_credits_each_gpu_its_share_for_the_history() -> None:
    """Enforce (`true` as scancel): the counter's $ split per GPU by its $/h share, at the
    reviewed snapshot's time, in `recent()` until RECLAIM_KEEP_SECONDS later."""
    config = SlurmConfig(
        reclaim_mode="enforce",
        reclaim_warn_after_seconds=60.0,
        reclaim_cancel_after_seconds=120.0,
        scontrol_command="true",
        scancel_command="true",
    )
    now = 1_800_000_000.0
    reclaimer = Reclaimer(
        config, Path("/nonexistent"), {"PATH": "/usr/bin:/bin"}, wall_time=lambda: now
    )
    listing = {"7": SlurmJob("7", "ann", "physics", "gpu", (0, 1), now + 1800.0)}
    holds: Holds = {"G0": [(ANN, (), None), (BOB, (), None)], "G1": [(ANN, (), None)]}
    for at in (0.0, 60.0, 120.0):
        reclaimer.review(snapshot(at, holds), listing)
    credits = reclaimer.recent(120.0)
    # G0 $10/h shared with bob: $5/h for ann; G1 $10/h; 0.5 h left of the time limit
    assert {(c.uuid, c.job.job_id, c.at_seconds, c.usd) for c in credits} == {
        ("G0", "7", 120.0, 2.5),
        ("G1", "7", 120.0, 5.0),
    }
    (usd,) = [
        s.value for f in reclaimer.families() for s in f.samples if s.labels.get("user") == "ann"
    ]
    assert usd == sum(c.usd for c in credits) == 7.5
    assert reclaimer.recent(120.0 + RECLAIM_KEEP_SECONDS) == credits
    assert reclaimer.recent(120.0 + RECLAIM_KEEP_SECONDS + 1.0) == ()
