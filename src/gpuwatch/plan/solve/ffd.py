"""First-fit-decreasing: the plan every pool starts from and is never worse than.

For each model some of a pool's units may time-slice on, its units are packed
first-fit-decreasing (largest share of any resource first) onto GPUs of that model; a
GPU whose units cost less alone than it does is dropped (they go alone), and so are the
units that do not fit the model. The cheapest of these plans, and of "every unit alone on
its cheapest candidate", is the pool's first-fit plan: `solve_pool` offers it to HiGHS
as a start, and `solve` keeps it where HiGHS's search, stopped at its work limit, ends
above it. No HiGHS here.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.plan.solve.columns import SharedBlock
from gpuwatch.plan.solve.fit import TOLERANCE, Fit, Unit, cheapest_alone, first_fit_decreasing
from gpuwatch.sizing import GpuSpec


@dataclass(frozen=True, slots=True)
class FirstFit:
    """A pool's first-fit plan: time-sliced GPUs of one model (None: every unit alone)."""

    cost: float  # $/h of the whole pool
    gpu: GpuSpec | None
    bins: tuple[tuple[int, ...], ...]  # unit indices per time-sliced GPU (2 or more each)


def first_fit(units: list[Unit], fit: Fit) -> FirstFit:
    """The cheapest first-fit-decreasing plan of `units` (module docstring)."""
    alone = [cheapest_alone(unit, fit).rent_usd_per_hour for unit in units]
    best = FirstFit(sum(alone), None, ())
    seen: dict[str, GpuSpec] = {}
    for unit in units:
        for gpu in unit.candidates:
            seen.setdefault(gpu.id, gpu)
    for gpu in seen.values():
        sizes = {
            i: fit.shared_sizes(unit, gpu)
            for i, unit in enumerate(units)
            if gpu in unit.candidates and fit.whole(unit, gpu)
        }
        if len(sizes) < 2:
            continue
        bins = [
            tuple(members)
            for members in first_fit_decreasing(sizes)
            if len(members) >= 2
            and sum(alone[i] for i in members) > gpu.rent_usd_per_hour * (1 + TOLERANCE)
        ]
        shared = {i for members in bins for i in members}
        cost = gpu.rent_usd_per_hour * len(bins) + sum(
            price for i, price in enumerate(alone) if i not in shared
        )
        if cost < best.cost * (1 - TOLERANCE):
            best = FirstFit(cost, gpu, tuple(bins))
    return best


def first_fit_start(
    plan: FirstFit,
    units: list[Unit],
    alone_column: list[int],
    shared: list[SharedBlock],
    columns: int,
) -> list[float] | None:
    """`plan` as a start for a pool's MILP; None where the MILP lacks one of its GPUs (a
    model left out as dominated, or a leader that cannot pay for its GPU)."""
    start = [0.0] * columns
    placed: set[int] = set()
    if plan.gpu is not None:
        block = next((b for b in shared if b.gpu.id == plan.gpu.id), None)
        if block is None:
            return None
        for members in plan.bins:
            leader = min(members, key=lambda i: (-max(block.sizes[i]), units[i].order))
            if leader not in block.leaders:
                return None
            others = [j for j in members if j != leader]
            if not all((leader, j) in block.members for j in others):
                return None
            start[block.leaders[leader]] = 1.0
            for j in others:
                start[block.members[leader, j]] = 1.0
            placed.update(members)
    for i, column in enumerate(alone_column):
        if i not in placed:
            start[column] = 1.0
    return start
