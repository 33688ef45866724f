"""Lower bounds on a pool's cost: the fractional bound (each unit's cheapest share of
one resource) and, for a pool too large for one exact MILP, the relaxation that pools
each GPU model's capacity (also a plan)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpuwatch.plan.mig import mig_table
from gpuwatch.plan.model import PlanOptions
from gpuwatch.plan.solve.clock import Clock
from gpuwatch.plan.solve.columns import Model, add_mig, shared_options, undominated
from gpuwatch.plan.solve.fit import (
    PREFER,
    Fit,
    Unit,
    cheapest_alone,
    first_fit_decreasing,
    most_items,
)
from gpuwatch.plan.solve.milp import Collector, Result, add_mig_gpus, run_highs
from gpuwatch.sizing import GpuSpec


def fractional_bound(units: Sequence[Unit], fit: Fit, options: PlanOptions, clock: Clock) -> float:
    """A lower bound on a pool's cost: each unit's cheapest share of one resource.

    For a fixed resource (memory, compute or bandwidth), the units on one GPU take at most
    all of it, so the GPU costs at least the sum over its units of price x share. A unit
    alone pays the whole price; in a MIG instance its share is the profile's fraction.
    Each resource gives a valid bound; this is the largest of the three.
    """
    best = 0.0
    for k in range(3):
        total = 0.0
        for unit in units:
            clock.check()
            cheapest = cheapest_alone(unit, fit).rent_usd_per_hour
            for gpu in unit.candidates:
                price = gpu.rent_usd_per_hour
                if options.time_slicing and fit.whole(unit, gpu):
                    cheapest = min(cheapest, price * fit.shared_sizes(unit, gpu)[k])
                table = mig_table(gpu.id) if options.mig else None
                for index, profile in enumerate(table.profiles if table else ()):
                    if table is not None and fit.profile(unit, gpu, table, index):
                        # memory, compute, bandwidth (memory_slices / 8 of it)
                        fraction = (
                            profile.memory_fraction,
                            profile.compute_fraction,
                            profile.memory_fraction,
                        )[k]
                        cheapest = min(cheapest, price * fraction)
            total += cheapest
        best = max(best, total)
    return best


def relaxation(
    units: list[Unit],
    fit: Fit,
    options: PlanOptions,
    clock: Clock,
    highspy: Any,
) -> tuple[float, Result | None]:
    """For a pool too large for one exact MILP: (a lower bound, a plan or None).

    The MILP is `solve_pool`'s, except that time-sliced units only count against the
    capacity of all GPUs of a model together, not GPU by GPU: a relaxation, so its bound
    holds for the pool. Its solution, each model's units packed first-fit-decreasing,
    is a plan (optimal where the packing needs no more GPUs than the relaxation opened:
    likely with many small units, those that make a pool too large).
    """
    model = Model()
    alone = [cheapest_alone(unit, fit) for unit in units]
    alone_column = [model.column(gpu.rent_usd_per_hour, 1) for gpu in alone]
    choices: list[list[int]] = [[column] for column in alone_column]
    shared: list[tuple[GpuSpec, dict[int, tuple[float, float, float]], dict[int, int]]] = []
    if options.time_slicing:
        for option in undominated(shared_options(units, fit)):
            clock.check()
            gpu = option.gpu
            eligible = sorted(option.eligible[0])
            sizes = {i: fit.shared_sizes(units[i], gpu) for i in eligible}
            most_gpus = len(first_fit_decreasing(sizes))
            gpus = model.column(gpu.rent_usd_per_hour * (1 + 2 * PREFER), most_gpus)
            on = {i: model.column(0.0, 1) for i in eligible}
            for i, column in on.items():
                choices[i].append(column)
            columns = [*on.values(), gpus]
            for k in range(3):
                loads = [sizes[i][k] for i in eligible]
                model.row(columns, [*loads, -1.0], -math.inf, 0.0)
            most = min(most_items([sizes[i][k] for i in eligible], 1.0) for k in range(3))
            model.row(columns, [1.0] * len(on) + [-float(most)], -math.inf, 0.0)
            model.row(columns, [1.0] * len(on) + [-2.0], 0.0, math.inf)
            shared.append((gpu, sizes, on))
    mig = add_mig(model, units, fit, choices, clock) if options.mig else []
    for row in choices:
        model.row(row, [1.0] * len(row), 1.0, 1.0)
    start = [0.0] * len(model.cost)
    for column in alone_column:
        start[column] = 1.0
    budget = clock.budget(len(units)) / 3  # a third of the pool's time
    values, bound, timed_out = run_highs(model, highspy, options, budget, start=start, clock=clock)
    if values is None:
        return bound, None
    plan = Collector(units, fit, Result(placements=[], cost=0.0, bound=bound, timed_out=timed_out))
    for i, column in enumerate(alone_column):
        if values[column] > 0.5:
            plan.add(alone[i], [i], None)
    for gpu, sizes, on in shared:
        chosen = {i: sizes[i] for i, column in on.items() if values[column] > 0.5}
        for members in first_fit_decreasing(chosen):
            plan.add(gpu, members, None)
    for block in mig:
        add_mig_gpus(plan, block, values)
    return bound, plan.result
