"""`IntervalJob`: the agent's periodic jobs (what APScheduler's interval jobs with
`max_instances=1, coalesce=True` did): a fixed rate, no overlap, missed slots skipped,
failures logged without ending the job, `stop()` waiting for a call in flight."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from gpuwatch.agent.periodic import IntervalJob


def test_first_call_after_one_interval_then_at_a_fixed_rate() -> None:
    calls: list[float] = []
    job = IntervalJob("count", 0.05, lambda: calls.append(time.monotonic()))
    started = time.monotonic()
    job.start()
    time.sleep(0.53)
    job.stop()
    assert calls[0] - started >= 0.045
    assert 8 <= len(calls) <= 11  # ten slots in 0.53 s (a loaded machine may miss one)
    count = len(calls)
    time.sleep(0.15)
    assert len(calls) == count  # stopped


def test_an_overrunning_call_is_not_doubled_up() -> None:
    running = 0
    most = 0
    calls = 0
    lock = threading.Lock()

    def slow() -> None:
        nonlocal running, most, calls
        with lock:
            running += 1
            most = max(most, running)
            calls += 1
        time.sleep(0.12)  # 2.4 intervals
        with lock:
            running -= 1

    job = IntervalJob("slow", 0.05, slow)
    job.start()
    time.sleep(0.6)
    job.stop()
    assert most == 1
    assert calls <= 5  # about one per 0.15 s: the missed slots were skipped, not caught up


def test_a_failing_call_is_logged_and_the_job_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    def broken() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("bug")

    job = IntervalJob("broken", 0.03, broken)
    with caplog.at_level(logging.ERROR, logger="gpuwatch.periodic"):
        job.start()
        time.sleep(0.2)
        job.stop()
    assert calls >= 3
    assert "job broken raised an exception" in caplog.text


def test_stop_waits_for_the_call_in_flight() -> None:
    entered = threading.Event()
    finished = threading.Event()

    def slow() -> None:
        entered.set()
        time.sleep(0.2)
        finished.set()

    job = IntervalJob("slow", 0.01, slow)
    job.start()
    assert entered.wait(5)
    job.stop()
    assert finished.is_set()


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        IntervalJob("x", 0.0, lambda: None)
