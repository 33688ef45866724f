"""The sampler's driver outage: one ERROR line when it starts, DEBUG lines for the retries,
one INFO line when NVML is back, and retries 1, 2, 4, 8, ... s apart (at most
`retry_max_seconds`), the schedule `gpuwatch.core.health.backoff_seconds` gives."""

from __future__ import annotations

import contextlib
import itertools
import logging
from typing import Any

import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.core.health import backoff_seconds
from gpuwatch.nvml import NvmlSampler
from tests.conftest import simulated

START = 1_767_225_600.0


class _InitTimes:
    """The stand-in, recording when nvmlInit is called (simulated seconds)."""

    def __init__(self, inner: Any, clock: ManualClock) -> None:
        self._inner = inner
        self._clock = clock
        self.inits: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def nvmlInit(self) -> None:
        self.inits.append(self._clock.time() - START)
        self._inner.nvmlInit()


def _outage(retry_max: float) -> tuple[list[float], list[tuple[int, str]]]:
    nv, clock = simulated("faults")
    recorder = _InitTimes(nv, clock)
    sampler = NvmlSampler(recorder, clock, retry_max_seconds=retry_max)
    sampler.open()
    records: list[tuple[int, str]] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append((record.levelno, record.getMessage()))  # type: ignore[method-assign]
    logger = logging.getLogger("gpuwatch.nvml.sampler")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        while clock.time() - START < 400:
            clock.advance(1.0)
            with contextlib.suppress(Exception):  # the outage is what is asserted
                sampler.sample()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        sampler.close()
    return recorder.inits, records


@pytest.mark.parametrize("retry_max", [60.0, 4.0])
def test_retries_follow_the_backoff_schedule(retry_max: float) -> None:
    inits, _ = _outage(retry_max)
    retries = inits[1:]  # the first is open()
    assert retries[0] == 300.0 + backoff_seconds(0, 1.0, retry_max)  # failed at 300 s
    gaps = [b - a for a, b in itertools.pairwise(retries)]
    assert gaps == [backoff_seconds(attempt, 1.0, retry_max) for attempt in range(1, len(retries))]
    assert retries[-1] >= 330.0  # the driver is back at 330 s: the last retry succeeds


def test_one_error_line_per_outage_and_one_recovery_line() -> None:
    _, records = _outage(60.0)
    loud = [(level, text) for level, text in records if level >= logging.INFO]
    failed = [text for level, text in loud if text.startswith("NVML failed")]
    assert [level for level, text in loud if text.startswith("NVML failed")] == [logging.ERROR]
    assert failed[0].startswith("NVML failed, retrying in 1 s: ")
    quiet = [text for level, text in records if level == logging.DEBUG and "retrying" in text]
    assert [text.split(":")[0] for text in quiet] == [
        "NVML failed, retrying in 2 s",
        "NVML failed, retrying in 4 s",
        "NVML failed, retrying in 8 s",
        "NVML failed, retrying in 16 s",
    ]
    assert [text for _, text in loud].count("NVML recovered") == 1
