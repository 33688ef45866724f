"""First-fit-decreasing: the plan every pool starts from and is never worse than.

It obeys the time-sliced class rule (`classes.py`). For each model some of a pool's
units may time-slice on (the MILP's undominated models), its units are taken largest
share first; each joins the open class of that model where it adds no GPU and it takes
at most 1/`replicas` of the GPU (`class_fits`); else it opens a class with the most replicas
its share allows (at most `MAX_REPLICAS`, one class per replica count); else it joins the
open class where it adds a GPU that costs less than it does alone; else it stays alone.
Then a class of fewer units than replicas becomes the class of as many replicas as
units (where that count is free), and a class whose GPUs cost at least its units alone
is dropped (they go alone). Beside it, per model, the cheapest split of the same order
into units alone and runs of consecutive units, each run a class with more replicas
than the run before (`_bands`, a dynamic programme; a run fits where its first, largest
unit does). The cheapest of these plans, and
of "every unit alone on its cheapest candidate", is the pool's first-fit plan:
`solve_pool` offers it to HiGHS as a start, and `solve` keeps it where HiGHS's search,
stopped at its work limit, ends above it. No HiGHS here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwatch.plan.solve.classes import (
    ClassBlock,
    Sizes,
    class_fits,
    class_options,
    class_values,
    largest_first,
    most_replicas,
)
from gpuwatch.plan.solve.fit import TOLERANCE, Fit, Unit, cheapest_alone, within
from gpuwatch.sizing import GpuSpec


@dataclass(frozen=True, slots=True)
class FirstFitClass:
    """One time-sliced class of a first-fit plan."""

    gpu: GpuSpec
    replicas: int
    members: tuple[int, ...]  # unit indices, at least `replicas`


@dataclass(frozen=True, slots=True)
class FirstFit:
    """A pool's first-fit plan: its time-sliced classes (none: every unit alone)."""

    cost: float  # $/h of the whole pool
    classes: tuple[FirstFitClass, ...]


def first_fit(units: list[Unit], fit: Fit) -> FirstFit:
    """The cheapest first-fit-decreasing plan of `units` (module docstring)."""
    alone = [cheapest_alone(unit, fit).rent_usd_per_hour for unit in units]
    best = FirstFit(sum(alone), ())
    for gpu, sizes in class_options(units, fit):
        for classes in (_pack(gpu, sizes, alone, units), _bands(gpu, sizes, alone, units)):
            shared = {i for c in classes for i in c.members}
            cost = sum(
                gpu.rent_usd_per_hour * math.ceil(len(c.members) / c.replicas) for c in classes
            ) + sum(price for i, price in enumerate(alone) if i not in shared)
            if cost < best.cost * (1 - TOLERANCE):
                best = FirstFit(cost, tuple(classes))
    return best


def _bands(
    gpu: GpuSpec, sizes: dict[int, Sizes], alone: list[float], units: list[Unit]
) -> list[FirstFitClass]:
    """One model's classes as bands of the units taken largest share first: the
    cheapest split of that order into units alone and runs of consecutive units, each
    run a class whose replicas grow from run to run (a dynamic programme over (position,
    last replicas), exact for plans of that shape)."""
    order = largest_first(list(sizes), sizes, units)
    n = len(order)
    if n < 2:
        return []
    top = most_replicas(list(sizes.values()))
    price = gpu.rent_usd_per_hour
    # reach[i][r]: the end of the longest run from i that may form a class of r: the
    # order is largest share first, so a run fits where its first unit does
    reach = [
        [n if class_fits([sizes[order[i]]], r) else i for r in range(top + 1)] for i in range(n)
    ]
    inf = math.inf
    best = [[0.0] * (top + 1) for _ in range(n + 1)]  # best[i][last]: cost of order[i:]
    step: list[list[tuple[int, int]]] = [[(0, 0)] * (top + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for last in range(top + 1):
            cost, choice = alone[order[i]] + best[i + 1][last], (i + 1, 0)
            for r in range(max(last + 1, 2), top + 1):
                end = reach[i][r]
                ends = {*range(i + r, end + 1, r), end} if end - i >= r else set()
                for j in sorted(ends):
                    value = price * math.ceil((j - i) / r) + best[j][r]
                    if value < cost * (1 - TOLERANCE):
                        cost, choice = value, (j, r)
            best[i][last] = cost if cost < inf else inf
            step[i][last] = choice
    out = []
    i, last = 0, 0
    while i < n:
        j, r = step[i][last]
        if r:
            out.append(FirstFitClass(gpu, r, tuple(order[i:j])))
            last = r
        i = j
    return out


def _pack(
    gpu: GpuSpec, sizes: dict[int, Sizes], alone: list[float], units: list[Unit]
) -> list[FirstFitClass]:
    """One model's classes, first-fit-decreasing (module docstring)."""
    if len(sizes) < 2:
        return []
    top = most_replicas(list(sizes.values()))
    price = gpu.rent_usd_per_hour
    classes: list[tuple[int, list[int]]] = []  # (replicas, members)
    for i in largest_first(list(sizes), sizes, units):
        joins: list[tuple[float, int]] = []
        for c, (replicas, members) in enumerate(classes):
            if class_fits([sizes[i]], replicas):
                q = len(members)
                joins.append((price * (math.ceil((q + 1) / replicas) - math.ceil(q / replicas)), c))
        best = min(joins, default=None)
        if best is not None and best[0] == 0:
            classes[best[1]][1].append(i)
            continue
        used = {replicas for replicas, _ in classes}
        most = min(top, *(int(1 / max(size, 1e-12)) for size in sizes[i]))
        while most >= 2 and (most in used or not within(most * max(sizes[i]), 1.0)):
            most -= 1
        if most >= 2:
            classes.append((most, [i]))
        elif best is not None and best[0] < alone[i] * (1 - TOLERANCE):
            classes[best[1]][1].append(i)
    out = []
    used = {replicas for replicas, members in classes if len(members) >= replicas}
    for opened, members in classes:
        replicas = opened
        if len(members) < opened:
            if len(members) < 2 or len(members) in used:
                continue
            replicas = len(members)
            used.add(replicas)
        cost = price * math.ceil(len(members) / replicas)
        if sum(alone[i] for i in members) > cost * (1 + TOLERANCE):
            out.append(FirstFitClass(gpu, replicas, tuple(members)))
    return out


def first_fit_start(
    plan: FirstFit, alone_column: list[int], blocks: list[ClassBlock], columns: int
) -> list[float] | None:
    """`plan` as a start for a pool's MILP; None where the MILP lacks one of its classes
    or members (it should not: first-fit keeps to the classes the MILP may use)."""
    start = [0.0] * columns
    placed: set[int] = set()
    for found in plan.classes:
        block = next(
            (b for b in blocks if b.gpu.id == found.gpu.id and b.replicas == found.replicas),
            None,
        )
        if block is None or not all(i in block.chosen for i in found.members):
            return None
        class_values(block, found.members, start)
        placed.update(found.members)
    for i, column in enumerate(alone_column):
        if i not in placed:
            start[column] = 1.0
    return start
