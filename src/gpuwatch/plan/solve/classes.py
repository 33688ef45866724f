"""Time-sliced classes: the rule Kubernetes can enforce, its MILP columns, and its GPUs.

The device plugin advertises `replicas` shares per GPU of a node and the scheduler
chooses which pods share a GPU, with no memory isolation. So the plan time-slices by
class: a class is (pool, GPU model, replicas r >= 2), one at most per triple. Its q units
run on ceil(q / r) GPUs of that model on nodes labelled for the class, and each of them
takes at most 1/r of the GPU on every resource (memory, compute as kernel-busy time plus
the context-switch allowance, bandwidth: `Fit.shared_sizes`, headroom included:
`class_fits`). Then any r of them fit one GPU together, whichever the scheduler puts
there (what Kubernetes needs), and the device plugin's MPS, which gives each
of r clients 1/r of the memory and of the SMs, holds them too. A class holds at least r
units (one of fewer is the class of r = its count). `MAX_REPLICAS` caps r.

The rule is stricter than "the r largest fit together" (a class of one 60 % unit among
20 % ones passes that, not this): it is what both sharing mechanisms enforce, and it
keeps the MILP a counting model whose relaxation is tight (issue 24 item 5: the exact
"r largest" rule, linearised, made HiGHS's root 10-100x slower and its bound weak;
docs/benchmarks.md). The MILP counts, so no two solutions differ by a permutation of
GPUs: per class a binary x[i] per unit that may join it, an integer n (its GPUs), a
binary o (open), rows ``sum x - r n <= 0``, ``sum x - r o >= 0``, ``n <= U o``, and
``x_i <= o`` (implied; it tightens the relaxation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwatch.plan.solve.clock import Clock
from gpuwatch.plan.solve.columns import Model, shared_options, undominated
from gpuwatch.plan.solve.fit import PREFER, TOLERANCE, Fit, Unit, fewest_moves, most_items, within
from gpuwatch.sizing import GpuSpec

MAX_REPLICAS = 16
"""The most replicas a time-sliced class advertises per GPU: 16 contexts time-sliced on
one GPU is already past what a latency-bound workload tolerates, and the cap keeps the
MILP's classes per model at 15."""

Sizes = tuple[float, float, float]


def class_fits(sizes: Sequence[Sizes], replicas: int) -> bool:
    """Units with these shares may form a class of `replicas`: each takes at most
    1/`replicas` of the GPU on every resource (module docstring)."""
    return all(within(share * replicas, 1.0) for size in sizes for share in size)


def most_replicas(sizes: Sequence[Sizes]) -> int:
    """The largest r any class of these units can have: the most that fit one GPU by
    their smallest shares, capped at `MAX_REPLICAS`."""
    return min(MAX_REPLICAS, *(most_items([size[k] for size in sizes], 1.0) for k in range(3)))


def class_members(sizes: dict[int, Sizes], replicas: int) -> list[int]:
    """The units that may belong to a class of `replicas` on this model (`class_fits`)."""
    return [i for i in sorted(sizes) if class_fits([sizes[i]], replicas)]


@dataclass(frozen=True, slots=True)
class ClassBlock:
    """The columns of one time-sliced class (model, replicas) in a pool's MILP."""

    gpu: GpuSpec
    replicas: int
    sizes: dict[int, Sizes]  # unit -> its shares of the GPU, every unit that may join
    chosen: dict[int, int]  # unit -> column: the unit is in the class
    gpus: int  # column: the class's GPUs
    opened: int  # column: the class is used


def class_options(units: list[Unit], fit: Fit) -> list[tuple[GpuSpec, dict[int, Sizes]]]:
    """The models a pool's units may time-slice on (undominated), with the shares of the
    units that fit each whole."""
    return [
        (
            option.gpu,
            {i: fit.shared_sizes(units[i], option.gpu) for i in sorted(option.eligible[0])},
        )
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
            for x in xs:  # implied too: a unit joins an open class (tightens the relaxation)
                model.row([x, opened], [1.0, -1.0], -math.inf, 0.0)
            for i, column in chosen.items():
                choices[i].append(column)
            mine = {i: sizes[i] for i in members}
            blocks.append(ClassBlock(gpu, replicas, mine, chosen, gpus, opened))
    return blocks


def class_values(block: ClassBlock, members: Sequence[int], values: list[float]) -> None:
    """Set `members` as the class's units in a solution vector `values` (and its GPUs)."""
    for i in members:
        values[block.chosen[i]] = 1.0
    values[block.gpus] = float(math.ceil(len(members) / block.replicas))
    values[block.opened] = 1.0 if members else 0.0


def largest_first(members: Sequence[int], sizes: dict[int, Sizes], units: list[Unit]) -> list[int]:
    """A class's units in the order they fill its GPUs: largest share first."""
    return sorted(members, key=lambda i: (-max(sizes[i]), units[i].order))


def class_model(gpu: GpuSpec, hosted: list[Unit], replicas: int, fit: Fit) -> GpuSpec:
    """`gpu`, or a model at the same price that holds the class as well (every unit whole,
    each within 1/`replicas` of it) and that more of them run on now (fewer moves)."""

    def holds(other: GpuSpec) -> bool:
        return all(other in u.candidates and fit.whole(u, other) for u in hosted) and class_fits(
            [fit.shared_sizes(u, other) for u in hosted], replicas
        )

    return fewest_moves(gpu, hosted, holds)
