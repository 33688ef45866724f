"""The whole solve's optional wall-clock cap (`Clock`) and the exception that stops a
pool's Python work once it has passed. Nothing else.

By default there is no cap (`PlanOptions.time_limit_seconds` None): HiGHS stops at its
deterministic work limit and the plan is a function of its input. A cap makes the plan
depend on the machine's load; `solve` says so in a note when it was reached."""

from __future__ import annotations

import math
import time


class OutOfTimeError(Exception):
    """The solve's time limit passed while a pool was being built or bounded."""


class Clock:
    """The whole solve's time limit: HiGHS's share of it per pool, and the checks that
    stop Python's own work (bounds, models, greedy starts) once it has passed."""

    def __init__(self, started: float, limit: float | None, units: int) -> None:
        self.started = started
        self.deadline = math.inf if limit is None else started + limit
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
        (Python's seconds per unit so far, times the units after it); inf without a cap."""
        if math.isinf(self.deadline):
            return math.inf
        now = time.perf_counter()
        python = (now - self.started - self.solver_seconds) / max(self.units_built, 1)
        reserve = python * max(self.remaining - units, 0)
        return (self.deadline - now - reserve) * units / max(self.remaining, 1)
