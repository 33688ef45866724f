"""The whole solve's time limit (`Clock`) and the exception that stops a pool's Python
work once it has passed. Nothing else."""

from __future__ import annotations

import time


class OutOfTimeError(Exception):
    """The solve's time limit passed while a pool was being built or bounded."""


class Clock:
    """The whole solve's time limit: HiGHS's share of it per pool, and the checks that
    stop Python's own work (bounds, models, greedy starts) once it has passed."""

    def __init__(self, started: float, limit: float, units: int) -> None:
        self.started = started
        self.deadline = started + limit
        self.solver_seconds = 0.0  # inside HiGHS so far
        self.units_built = 0  # units whose pool model was built so far
        self.remaining = units  # units whose pool is not solved yet

    def check(self) -> None:
        """Raise OutOfTimeError once the time limit has passed."""
        if time.perf_counter() >= self.deadline:
            raise OutOfTimeError

    def budget(self, units: int) -> float:
        """HiGHS's seconds for a model of `units` of the units not solved yet: their
        share of the time left, less what building the pools after it will take
        (Python's seconds per unit so far, times the units after it)."""
        now = time.perf_counter()
        python = (now - self.started - self.solver_seconds) / max(self.units_built, 1)
        reserve = python * max(self.remaining - units, 0)
        return (self.deadline - now - reserve) * units / max(self.remaining, 1)
