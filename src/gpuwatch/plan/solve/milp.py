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
from gpuwatch.plan.solve.clock import Clock
from gpuwatch.plan.solve.columns import (
    MigBlock,
    Model,
    SharedBlock,
    add_mig,
    shared_leaders,
    shared_options,
    undominated,
)
from gpuwatch.plan.solve.ffd import FirstFit, first_fit, first_fit_start
from gpuwatch.plan.solve.fit import (
    PREFER,
    Fit,
    Unit,
    cheapest_alone,
    first_fit_decreasing,
    most_items,
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
    lp.integrality_ = [highspy.HighsVarType.kInteger] * len(model.cost)
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

    def add(self, gpu: GpuSpec, members: list[int], profiles: list[int] | None) -> None:
        """One GPU: `profiles` (indices) per member on MIG, None time-sliced or whole."""
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
            mode: PlacementMode = "whole" if len(members) == 1 else "shared"
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


def first_fit_result(units: list[Unit], fit: Fit, plan: FirstFit | None = None) -> Result:
    """The pool's first-fit-decreasing plan (`ffd.first_fit`) as placements."""
    plan = plan or first_fit(units, fit)
    result = Collector(units, fit, Result(placements=[], cost=0.0, bound=0.0))
    shared = {i for members in plan.bins for i in members}
    for i, unit in enumerate(units):
        if i not in shared:
            result.add(cheapest_alone(unit, fit), [i], None)
    for members in plan.bins:
        assert plan.gpu is not None  # bins only with a model
        result.add(plan.gpu, list(members), None)
    return result.result


def _cost(model: Model, values: list[float]) -> float:
    return sum(c * v for c, v in zip(model.cost, values, strict=True))


def solve_pool(
    units: list[Unit],
    fit: Fit,
    options: PlanOptions,
    clock: Clock,
    highspy: Any,
) -> Result:
    """One MILP: each unit alone, time-sliced on a GPU, or on a MIG instance."""
    model = Model()
    alone = [cheapest_alone(unit, fit) for unit in units]
    alone_column = [model.column(gpu.rent_usd_per_hour, 1) for gpu in alone]
    choices: list[list[int]] = [[column] for column in alone_column]

    # Time-slicing, one GPU per leader: the unit that comes first in the model's order
    # (largest first) among those on it. No two GPUs of a solution are interchangeable.
    shared: list[SharedBlock] = []
    if options.time_slicing:
        worth = {i: gpu.rent_usd_per_hour for i, gpu in enumerate(alone)}
        for option in undominated(shared_options(units, fit)):
            clock.check()
            gpu = option.gpu
            sizes = {i: fit.shared_sizes(units[i], gpu) for i in option.eligible[0]}
            block = SharedBlock(gpu, sizes, {}, {})
            eligible = sorted(option.eligible[0])
            for i, after in shared_leaders(
                units, eligible, sizes, gpu.rent_usd_per_hour, worth
            ).items():
                lead = block.leaders[i] = model.column(gpu.rent_usd_per_hour * (1 + 2 * PREFER), 1)
                follow = [model.column(0.0, 1) for _ in after]
                block.members.update(((i, j), c) for j, c in zip(after, follow, strict=True))
                choices[i].append(lead)
                for j, c in zip(after, follow, strict=True):
                    choices[j].append(c)
                for k in range(3):
                    loads = [sizes[j][k] for j in after]
                    model.row([*follow, lead], [*loads, sizes[i][k] - 1.0], -math.inf, 0.0)
                model.row([*follow, lead], [1.0] * len(follow) + [-1.0], 0.0, math.inf)
                most = min(
                    most_items([sizes[j][k] for j in after], 1.0 - sizes[i][k]) for k in range(3)
                )
                if most < len(after):
                    model.row([*follow, lead], [1.0] * len(follow) + [-float(most)], -math.inf, 0.0)
                for c in follow:
                    model.row([c, lead], [1.0, -1.0], -math.inf, 0.0)
            if block.leaders:
                # An optimum packs the units it puts on this model into as few GPUs as
                # they need, never more than first-fit-decreasing needs for all of them.
                most = len(first_fit_decreasing(sizes))
                if most < len(block.leaders):
                    leads = list(block.leaders.values())
                    model.row(leads, [1.0] * len(leads), 0.0, float(most))
                shared.append(block)

    mig = add_mig(model, units, fit, choices, clock) if options.mig else []
    _quota_rows(model, units, mig, options)

    for row in choices:
        model.row(row, [1.0] * len(row), 1.0, 1.0)

    start = greedy_start(alone, alone_column, shared, mig, len(model.cost), clock=clock)
    if options.time_slicing and time.perf_counter() < clock.deadline:  # first-fit's plan
        ffd = first_fit_start(first_fit(units, fit), units, alone_column, shared, len(model.cost))
        if ffd is not None and _cost(model, ffd) < _cost(model, start):
            start = ffd
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
    for block in shared:
        for i, column in block.leaders.items():
            if on(column):
                members = [j for (lead, j), c in block.members.items() if lead == i and on(c)]
                plan.add(block.gpu, [i, *members], None)
    for mblock in mig:
        add_mig_gpus(plan, mblock, values)
    return plan.result
