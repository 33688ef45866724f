"""The listing half the attribution and Slurm sources share: the last good listing kept,
success per refresh, one log decision per change of failure reason."""

from __future__ import annotations

from gpuwatch.collectors.listing import FailureReason, Listings
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.failures import CollectorFailedError


def test_a_failed_refresh_keeps_the_last_good_listing() -> None:
    answers: list[str | None] = [None, "one", None, "two"]

    def list_() -> str:
        answer = answers.pop(0)
        if answer is None:
            raise CollectorFailedError("down")
        return answer

    listings = Listings("src", ManualClock(), list_)
    assert listings.current() is None
    assert (listings.result.name, listings.result.success) == ("src", False)
    seen = []
    for _ in range(4):
        listings.refresh()
        seen.append((listings.current(), listings.result.success))
    assert seen == [(None, False), ("one", True), ("one", False), ("two", True)]


def test_failure_reason_logs_each_change_once_and_the_recovery() -> None:
    reason: FailureReason[str] = FailureReason()
    assert not reason.succeed()
    assert reason.fail("timeout")
    assert not reason.fail("timeout")
    assert reason.fail("exit_1")
    assert reason.current == "exit_1"
    assert reason.succeed()
    assert not reason.succeed()
    assert reason.current is None
    assert reason.fail("exit_1")
