"""Reclaim's credits in the history: `JobRollup` sets (never adds) each cancel's $ on
the row of its job, GPU and hour, however many snapshots repeat it, keeps a stored row's
credit under this run's, and fills a row the job had not yet in that hour."""

from __future__ import annotations

from gpuwatch.core.jobs import JobAttribution, JobReclaim, JobRef
from gpuwatch.core.snapshot import DriverInfo, FleetSnapshot
from gpuwatch.history.job_rollup import JobRollup
from gpuwatch.history.schema import JOB_COLUMNS

BOB = JobRef("8", "bob", "chem", "gpu")
HOUR = 1_800_000_000 - 1_800_000_000 % 3600


def snapshot(at: float, credits: tuple[JobReclaim, ...], *, stale: bool = False) -> FleetSnapshot:
    """No GPU held any more (the job is gone): only the credits ride along."""
    return FleetSnapshot(
        at,
        DriverInfo(None, None, None),
        (),
        hostname="node-1",
        jobs=JobAttribution(at, 0, (), stale=stale, reclaimed=credits),
    )


def test_a_credit_is_set_once_on_the_cancels_hour_however_often_it_is_repeated() -> None:
    credits = (JobReclaim(BOB, "G0", HOUR + 100.0, 7.5), JobReclaim(BOB, "G1", HOUR + 100.0, 2.5))
    rollup = JobRollup()
    for at in (HOUR + 110.0, HOUR + 120.0, HOUR + 3700.0):  # the last one in the next hour
        rollup.add(snapshot(at, credits, stale=at > HOUR + 115.0))  # stale: credits kept
    rows = {r["uuid"]: r for r in rollup.take_dirty()}
    assert {u: r["reclaimed_usd"] for u, r in rows.items()} == {"G0": 7.5, "G1": 2.5}
    row = rows["G0"]
    assert row["hour_start"] == HOUR
    assert (row["user"], row["account"], row["partition"], row["host"]) == (
        "bob",
        "chem",
        "gpu",
        "node-1",
    )
    assert row["first_seconds"] == row["last_seconds"] == HOUR + 100.0
    assert (row["held_seconds"], row["cost_usd"]) == (0.0, 0.0)
    assert set(row) == set(JOB_COLUMNS)
    rollup.add(snapshot(HOUR + 3710.0, credits))
    assert rollup.take_dirty() == []  # unchanged: nothing to write again
    rollup.forget_before(HOUR + 3600)  # the hour is written and forgotten
    rollup.add(snapshot(HOUR + 3720.0, credits))
    assert rollup.take_dirty() == [], "no blank row over the stored one"


def test_a_stored_rows_credit_is_the_base_of_this_runs() -> None:
    stored = JobRollup()
    stored.add(snapshot(HOUR + 10.0, (JobReclaim(BOB, "G0", HOUR + 5.0, 4.0),)))
    (base,) = stored.take_dirty()
    restarted = JobRollup([base])
    restarted.add(snapshot(HOUR + 900.0, (JobReclaim(BOB, "G0", HOUR + 800.0, 1.25),)))
    (row,) = restarted.take_dirty()
    assert row["reclaimed_usd"] == 5.25
    assert row["first_seconds"] == HOUR + 5.0  # the stored row's
    assert row["user"] == "bob"
