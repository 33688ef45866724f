"""One pool's exact MILP (`solve_pool`), HiGHS loaded and run (`run_highs`), and a
solution turned into placements (`Collector`). Bounds that need no exact model live in
`bounds.py`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from gpuwatch.core.install import install_hint
from gpuwatch.plan.model import Placement, PlacementMode, PlanOptions
from gpuwatch.plan.solve.classes import (
    ClassBlock,
    add_classes,
    class_model,
    largest_first,
)
from gpuwatch.plan.solve.clock import Clock
from gpuwatch.plan.solve.columns import MigBlock, Model, add_mig
from gpuwatch.plan.solve.ffd import FirstFit, first_fit_start
from gpuwatch.plan.solve.fit import (
    PREFER,
    Fit,
    Unit,
    cheapest_alone,
    prefer_current,
    smallest_profiles,
)
from gpuwatch.plan.solve.greedy import greedy_start
from gpuwatch.sizing import GpuSpec


class SolverMissingError(ImportError):
    """highspy (the optional ``plan`` extra) is not installed."""


def import_highspy() -> Any:
    try:
        # lazy: highspy is the optional `plan` extra, loaded when a plan is made
        import highspy  # noqa: PLC0415
    except ImportError as exc:
        raise SolverMissingError(
            f"gpuwatch plan needs the HiGHS solver (highspy): {install_hint('plan')}"
        ) from exc
    return highspy


MIN_HIGHS_SECONDS = 0.02
"""HiGHS is not started with less time than this: the pool keeps its greedy start (HiGHS
takes about this long to stop at its limit, so a smaller limit would not be kept)."""


def run_highs(
    model: Model,
    highspy: Any,
    options: PlanOptions,
    budget: float,
    *,
    start: list[float],
    clock: Clock,
) -> tuple[list[float] | None, float, bool]:
    """(column values or None, proved bound, stopped by the time limit); HiGHS does not
    run when `budget` is below `MIN_HIGHS_SECONDS` (None, 0, stopped)."""
    if budget < MIN_HIGHS_SECONDS:
        return None, 0.0, True
    lp = highspy.HighsLp()
    lp.num_col_ = len(model.cost)
    lp.num_row_ = len(model.rows)
    lp.col_cost_ = model.cost
    lp.col_lower_ = [0.0] * len(model.cost)
    lp.col_upper_ = model.upper
    lp.row_lower_ = [row[2] for row in model.rows]
    lp.row_upper_ = [row[3] for row in model.rows]
    starts, index, value = [0], [], []
    for row_index, row_value, _, _ in model.rows:
        index.extend(row_index)
        value.extend(row_value)
        starts.append(len(index))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = lp.num_col_
    lp.a_matrix_.num_row_ = lp.num_row_
    lp.a_matrix_.start_ = starts
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = value
    kinds = (highspy.HighsVarType.kContinuous, highspy.HighsVarType.kInteger)
    lp.integrality_ = [kinds[integer] for integer in model.integer]
    # highspy.Highs() prints a banner before any option can be set; _Highs does not.
    solver = getattr(highspy, "_Highs", highspy.Highs)()
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("presolve", "off")
    if math.isfinite(budget):  # the optional wall-clock cap: the plan then depends on load
        solver.setOptionValue("time_limit", float(budget))
    solver.setOptionValue("mip_max_nodes", int(options.work_limit_nodes))
    solver.setOptionValue("mip_rel_gap", float(options.relative_gap))
    solver.setOptionValue("random_seed", int(options.seed))
    solver.setOptionValue("threads", 1)
    if solver.passModel(lp) == highspy.HighsStatus.kError:
        raise RuntimeError("HiGHS rejected the plan's model")
    solution = highspy.HighsSolution()
    solution.col_value = start
    solver.setSolution(solution)
    ran = time.perf_counter()
    solver.run()
    clock.solver_seconds += time.perf_counter() - ran
    status = solver.getModelStatus()
    info = solver.getInfo()
    timed_out = status != highspy.HighsModelStatus.kOptimal
    bound = info.mip_dual_bound / (1 + 2 * PREFER)
    if not math.isfinite(bound):
        bound = 0.0
    if info.primal_solution_status != 2:  # kSolutionStatusFeasible
        return None, bound, timed_out
    return list(solver.getSolution().col_value), bound, timed_out


def _order(unit: Unit) -> int:
    return unit.order


@dataclass(slots=True)
class Result:
    placements: list[tuple[int, Placement]]  # (order of its first unit, placement)
    cost: float
    bound: float
    timed_out: bool = False


class Collector:
    """Turns a pool's solution into placements (`result`), GPU by GPU."""

    def __init__(self, units: list[Unit], fit: Fit, result: Result, shrink: bool = True) -> None:
        self.units = units
        self.fit = fit
        self.result = result
        self.shrink = shrink  # off under a MIG quota: the solver's profiles stand
        self.classes = 0  # time-sliced classes so far (their numbers, from 1, per result)

    def add_class(self, gpu: GpuSpec, members: list[int], replicas: int) -> None:
        """A time-sliced class: its units `replicas` per GPU, largest first."""
        hosted = [self.units[i] for i in members]
        gpu = class_model(gpu, hosted, replicas, self.fit)
        sizes = {i: self.fit.shared_sizes(self.units[i], gpu) for i in members}
        ordered = largest_first(members, sizes, self.units)
        self.classes += 1
        for start in range(0, len(ordered), replicas):
            on = sorted((self.units[i] for i in ordered[start : start + replicas]), key=_order)
            placement = Placement(
                gpu.id,
                "shared",
                gpu.rent_usd_per_hour,
                tuple(unit.need.key for unit in on),
                replicas=replicas,
                share_class=self.classes,
            )
            self.result.placements.append((on[0].order, placement))
            self.result.cost += gpu.rent_usd_per_hour

    def add(self, gpu: GpuSpec, members: list[int], profiles: list[int] | None) -> None:
        """One GPU: `profiles` (indices) per member on MIG, None whole (one member)."""
        order = sorted(range(len(members)), key=lambda n: self.units[members[n]].order)
        hosted = [self.units[members[n]] for n in order]
        if profiles is not None:
            profiles = [profiles[n] for n in order]
        if len(members) == 1:
            profiles = None
        gpu, table = prefer_current(gpu, hosted, profiles, self.fit)
        if profiles is not None and table is not None and self.shrink:
            profiles = smallest_profiles(table, gpu, hosted, profiles, self.fit)
        if profiles is None or table is None:
            mode: PlacementMode = "whole"
            names: tuple[str, ...] = ()
        else:
            mode, names = "mig", tuple(table.profiles[k].name for k in profiles)
        keys = tuple(unit.need.key for unit in hosted)
        placement = Placement(gpu.id, mode, gpu.rent_usd_per_hour, keys, names)
        self.result.placements.append((hosted[0].order, placement))
        self.result.cost += gpu.rent_usd_per_hour


def add_mig_gpus(plan: Collector, block: MigBlock, values: list[float]) -> None:
    """The MIG GPUs of `block` in a solution, each unit on an instance of its profile."""
    free: list[dict[int, int]] = []
    for config, column in zip(block.configs, block.counts, strict=True):
        for _ in range(round(values[column])):
            free.append({k: config[slot] for slot, k in enumerate(block.used)})
    hosted: list[dict[int, int]] = [{} for _ in free]
    for (i, k), column in sorted(block.assigned.items(), key=lambda item: -item[0][1]):
        if values[column] > 0.5:
            g = next(g for g, left in enumerate(free) if left[k] > 0)
            free[g][k] -= 1
            hosted[g][i] = k
    for instances in hosted:
        if instances:
            plan.add(block.gpu, list(instances), list(instances.values()))


def alone_result(units: list[Unit], fit: Fit) -> Result:
    """Each unit alone on its cheapest candidate (a pool reached past the time limit)."""
    plan = Collector(units, fit, Result(placements=[], cost=0.0, bound=0.0, timed_out=True))
    for i, unit in enumerate(units):
        plan.add(cheapest_alone(unit, fit), [i], None)
    return plan.result


def _quota_rows(model: Model, units: list[Unit], mig: list[MigBlock], options: PlanOptions) -> None:
    """`[plan]` quotas as rows: at most `limit` units of the namespace on a MIG profile's
    instances, or at most `limit` of them not on MIG (each requests one nvidia.com/gpu)."""
    for namespace, resource, limit in options.quotas:
        members = {i for i, unit in enumerate(units) if unit.need.namespace == namespace}
        if not members:
            continue
        profile = resource.removeprefix("nvidia.com/mig-")
        columns = [
            column
            for block in mig
            for (i, k), column in block.assigned.items()
            if i in members and (profile == resource or block.table.profiles[k].name == profile)
        ]
        if profile == resource:  # nvidia.com/gpu: enough units on MIG
            if len(members) > limit:
                model.row(columns, [1.0] * len(columns), float(len(members) - limit), math.inf)
        elif len(columns) > limit:
            model.row(columns, [1.0] * len(columns), -math.inf, float(limit))


def first_fit_result(units: list[Unit], fit: Fit, plan: FirstFit) -> Result:
    """The pool's first-fit-decreasing plan (`ffd.first_fit`) as placements."""
    result = Collector(units, fit, Result(placements=[], cost=0.0, bound=0.0))
    shared = {i for found in plan.classes for i in found.members}
    for i, unit in enumerate(units):
        if i not in shared:
            result.add(cheapest_alone(unit, fit), [i], None)
    for found in plan.classes:
        result.add_class(found.gpu, list(found.members), found.replicas)
    return result.result


def _cost(model: Model, values: list[float]) -> float:
    return sum(c * v for c, v in zip(model.cost, values, strict=True))


def solve_pool(
    units: list[Unit],
    fit: Fit,
    options: PlanOptions,
    clock: Clock,
    highspy: Any,
    *,
    ffd: FirstFit | None = None,
) -> Result:
    """One MILP: each unit alone, in a time-sliced class, or on a MIG instance; `ffd`
    (the pool's first-fit plan, with time-slicing) is offered as a start."""
    model = Model()
    alone = [cheapest_alone(unit, fit) for unit in units]
    worth = [gpu.rent_usd_per_hour for gpu in alone]
    alone_column = [model.column(price, 1) for price in worth]
    choices: list[list[int]] = [[column] for column in alone_column]
    classes: list[ClassBlock] = []
    if options.time_slicing:
        classes = add_classes(model, units, fit, choices, worth=worth, clock=clock)
    mig = add_mig(model, units, fit, choices, clock) if options.mig else []
    _quota_rows(model, units, mig, options)
    for row in choices:
        model.row(row, [1.0] * len(row), 1.0, 1.0)

    everyone = [0.0] * len(model.cost)
    for column in alone_column:
        everyone[column] = 1.0
    start = greedy_start(worth, alone_column, mig, everyone, clock=clock)
    if ffd is not None and ffd.classes and time.perf_counter() < clock.deadline:
        seeded = first_fit_start(ffd, alone_column, classes, len(model.cost))
        if seeded is not None:
            seeded = greedy_start(worth, alone_column, mig, seeded, clock=clock)
            if _cost(model, seeded) < _cost(model, start):
                start = seeded
    clock.units_built += len(units)
    budget = clock.budget(len(units))
    values, bound, timed_out = run_highs(model, highspy, options, budget, start=start, clock=clock)
    if values is None:
        values = start

    def on(column: int) -> bool:
        return values[column] > 0.5

    plan = Collector(
        units,
        fit,
        Result(placements=[], cost=0.0, bound=bound, timed_out=timed_out),
        shrink=not any(resource != "nvidia.com/gpu" for _, resource, _ in options.quotas),
    )
    for i, column in enumerate(alone_column):
        if on(column):
            plan.add(alone[i], [i], None)
    for block in classes:
        members = [i for i, column in block.chosen.items() if on(column)]
        if members:
            plan.add_class(block.gpu, members, block.replicas)
    for mblock in mig:
        add_mig_gpus(plan, mblock, values)
    return plan.result
