"""Time-sliced classes: the rule Kubernetes can enforce, its MILP columns, and its GPUs.

The device plugin advertises `replicas` shares per GPU of a node and the scheduler
chooses which pods share a GPU, with no memory isolation. So the plan time-slices by
class: a class is (pool, GPU model, replicas r >= 2), one at most per triple. Its q units
run on ceil(q / r) GPUs of that model on nodes labelled for the class, and any r of them
may land on one GPU: per resource (memory, compute, bandwidth: `Fit.sizes`), the sum of
the r largest shares of its units is at most 1 (`top_fits`). A class holds at least r
units (one of fewer is the class of r = its count). `MAX_REPLICAS` caps r.

The MILP counts, so no two solutions differ by a permutation of GPUs: per class a binary
x[i] per unit that may join it, an integer n (its GPUs), a binary o (open), rows
``sum x - r n <= 0``, ``sum x - r o >= 0``, ``n <= U o``, and per resource k whose r
largest shares could exceed 1 the top-r sum linearised with continuous columns (the
top-r sum of v is min over t of ``r t + sum max(0, v_i - t)``):
``r t_k + sum u_ik <= 1``, ``u_ik >= s_ik x_i - t_k``, u, t >= 0. Exact for the rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwatch.plan.solve.clock import Clock
from gpuwatch.plan.solve.columns import Model, shared_options, undominated
from gpuwatch.plan.solve.fit import PREFER, TOLERANCE, Fit, Unit, most_items, within
from gpuwatch.sizing import GpuSpec

MAX_REPLICAS = 16
"""The most replicas a time-sliced class advertises per GPU: 16 contexts time-sliced on
one GPU is already past what a latency-bound workload tolerates, and the cap keeps the
MILP's classes per model at 15."""

Sizes = tuple[float, float, float]


def top_fits(sizes: Sequence[Sizes], replicas: int) -> bool:
    """Any `replicas` of units with these shares fit one GPU together (module docstring)."""
    return all(
        within(sum(sorted((size[k] for size in sizes), reverse=True)[:replicas]), 1.0)
        for k in range(3)
    )


def most_replicas(sizes: Sequence[Sizes]) -> int:
    """The largest r any class of these units can have: the most that fit one GPU by
    their smallest shares, capped at `MAX_REPLICAS`."""
    return min(MAX_REPLICAS, *(most_items([size[k] for size in sizes], 1.0) for k in range(3)))


def class_members(sizes: dict[int, Sizes], replicas: int) -> list[int]:
    """The units that may belong to a class of `replicas` on this model: each fits beside
    the `replicas` - 1 smallest shares of the others, per resource (repeated until no unit
    drops: a member of a class of at least `replicas` units passes)."""
    members = sorted(sizes)
    while True:
        ascending = [sorted((sizes[i][k], i) for i in members) for k in range(3)]
        kept = []
        for i in members:
            ok = True
            for k in range(3):
                others = [v for v, j in ascending[k] if j != i][: replicas - 1]
                if not within(sizes[i][k] + sum(others), 1.0):
                    ok = False
                    break
            if ok:
                kept.append(i)
        if len(kept) == len(members):
            return members
        members = kept


@dataclass(frozen=True, slots=True)
class ClassBlock:
    """The columns of one time-sliced class (model, replicas) in a pool's MILP."""

    gpu: GpuSpec
    replicas: int
    sizes: dict[int, Sizes]  # unit -> its shares of the GPU, every unit that may join
    chosen: dict[int, int]  # unit -> column: the unit is in the class
    gpus: int  # column: the class's GPUs
    opened: int  # column: the class is used
    tops: dict[int, tuple[int, dict[int, int]]]  # resource -> (t column, unit -> u column)


def class_options(units: list[Unit], fit: Fit) -> list[tuple[GpuSpec, dict[int, Sizes]]]:
    """The models a pool's units may time-slice on (undominated), with the shares of the
    units that fit each whole."""
    return [
        (option.gpu, {i: fit.sizes(units[i], option.gpu) for i in sorted(option.eligible[0])})
        for option in undominated(shared_options(units, fit))
    ]


def paying_classes(
    gpu: GpuSpec, sizes: dict[int, Sizes], worth: Sequence[float]
) -> list[tuple[int, list[int]]]:
    """(replicas, members) of the classes on `gpu` that can pay: at least `replicas`
    members, and the `replicas` dearest of them cost more alone than one GPU (else no
    GPU of the class saves anything)."""
    if len(sizes) < 2:
        return []
    out = []
    for replicas in range(2, most_replicas(list(sizes.values())) + 1):
        members = class_members(sizes, replicas)
        if len(members) < replicas:
            continue
        dearest = sorted((worth[i] for i in members), reverse=True)[:replicas]
        if sum(dearest) > gpu.rent_usd_per_hour * (1 + TOLERANCE):
            out.append((replicas, members))
    return out


def add_classes(
    model: Model,
    units: list[Unit],
    fit: Fit,
    choices: list[list[int]],
    *,
    worth: Sequence[float],
    clock: Clock,
) -> list[ClassBlock]:
    """The time-sliced classes' columns and rows (module docstring); `worth` is each
    unit's $/h alone."""
    blocks = []
    for gpu, sizes in class_options(units, fit):
        clock.check()
        for replicas, members in paying_classes(gpu, sizes, worth):
            chosen = {i: model.column(0.0, 1) for i in members}
            most = math.ceil(len(members) / replicas)
            price = gpu.rent_usd_per_hour * (1 + 2 * PREFER)
            gpus = model.column(price, most)
            opened = model.column(0.0, 1)
            xs = list(chosen.values())
            ones = [1.0] * len(xs)
            model.row([*xs, gpus], [*ones, -float(replicas)], -math.inf, 0.0)
            model.row([*xs, opened], [*ones, -float(replicas)], 0.0, math.inf)
            model.row([gpus, opened], [1.0, -float(most)], -math.inf, 0.0)
            tops: dict[int, tuple[int, dict[int, int]]] = {}
            for k in range(3):  # implied, for the relaxation: the units fill n GPUs at most
                model.row([*xs, gpus], [*(sizes[i][k] for i in members), -1.0], -math.inf, 0.0)
            for x in xs:  # implied too: a unit joins an open class (tightens the relaxation)
                model.row([x, opened], [1.0, -1.0], -math.inf, 0.0)
            for k in range(3):
                largest = sorted((sizes[i][k] for i in members), reverse=True)[:replicas]
                if within(sum(largest), 1.0):
                    continue  # any `replicas` of them fit on this resource
                t = model.column(0.0, largest[0], integer=False)
                u = {i: model.column(0.0, sizes[i][k], integer=False) for i in members}
                # top-r sum <= o (o = 1 when open): the perspective, tighter relaxed
                model.row(
                    [t, *u.values(), opened],
                    [float(replicas), *([1.0] * len(u)), -1.0],
                    -math.inf,
                    0.0,
                )
                for i in members:
                    model.row([u[i], chosen[i], t], [1.0, -sizes[i][k], 1.0], 0.0, math.inf)
                tops[k] = (t, u)
            for i, column in chosen.items():
                choices[i].append(column)
            mine = {i: sizes[i] for i in members}
            blocks.append(ClassBlock(gpu, replicas, mine, chosen, gpus, opened, tops))
    return blocks


def class_values(block: ClassBlock, members: Sequence[int], values: list[float]) -> None:
    """Set `members` as the class's units in a solution vector `values` (its GPUs, and
    the top-r columns at their tightest: t the r-th largest share, u the excess)."""
    for i in members:
        values[block.chosen[i]] = 1.0
    values[block.gpus] = float(math.ceil(len(members) / block.replicas))
    values[block.opened] = 1.0 if members else 0.0
    for k, (t, u) in block.tops.items():
        shares = sorted((block.sizes[i][k] for i in members), reverse=True)
        level = shares[block.replicas - 1] if len(shares) >= block.replicas else 0.0
        values[t] = level
        for i in members:
            values[u[i]] = max(0.0, block.sizes[i][k] - level)


def largest_first(members: Sequence[int], sizes: dict[int, Sizes], units: list[Unit]) -> list[int]:
    """A class's units in the order they fill its GPUs: largest share first."""
    return sorted(members, key=lambda i: (-max(sizes[i]), units[i].order))


def class_model(gpu: GpuSpec, hosted: list[Unit], replicas: int, fit: Fit) -> GpuSpec:
    """`gpu`, or a model at the same price that holds the class as well (every unit whole,
    any `replicas` of them on one GPU) and that more of them run on now (fewer moves)."""

    def holds(other: GpuSpec) -> bool:
        return all(other in u.candidates and fit.whole(u, other) for u in hosted) and top_fits(
            [fit.sizes(u, other) for u in hosted], replicas
        )

    def moves(model: GpuSpec) -> int:
        return sum(unit.current.id != model.id for unit in hosted)

    best = gpu
    for unit in hosted:
        other = unit.current
        if (
            other.id != best.id
            and abs(other.rent_usd_per_hour - gpu.rent_usd_per_hour) <= TOLERANCE
            and moves(other) < moves(best)
            and holds(other)
        ):
            best = other
    return best
