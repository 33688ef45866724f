"""The cheapest set of GPUs that holds every workload with headroom: a MILP per pool.

Rules (docs/plan.md says them to users):

- Idle and held units get no GPU (`Plan.reclaimed`).
- A unit fits a part when, per GPU, ``memory x (1 + headroom) <= part memory``,
  ``activity x bf16(current) / bf16(part) <= capacity x (1 - headroom)`` and
  ``bandwidth x (1 + headroom) <= part bandwidth``. A whole GPU has capacity 1; a MIG
  instance ``compute_slices / 7`` of the compute and ``memory_slices / 8`` of the
  bandwidth, with the profile's memory (`gpuwatch.plan.mig`). An unknown activity or
  bandwidth counts as all of the current GPU's (a note says how many units that was).
- A unit alone on a whole GPU of its current model always fits: it runs there today, so
  the plan never asks more of it than the present does.
- Time-slicing: several single-GPU units on one whole GPU when their summed memory,
  scaled activity and bandwidth fit with headroom (an exact assignment to GPUs).
- MIG: a GPU split into one valid profile configuration (`MigTable`), one unit per
  instance. Instances of a profile are interchangeable, so the model counts GPUs per
  (model, configuration) and units per (model, profile): exact, and without symmetry.
- A multi-GPU unit takes `gpu_count` whole GPUs of one model, never shared (a `group`).
  It shares with nothing, so its cheapest model is chosen directly.
- Candidates: `PlanOptions.candidate_gpu_ids`, else right-sizing's rule
  (`CandidateRules`: the current GPU's class). A unit no candidate holds keeps its GPU
  at its current price (`Plan.unplaced`).
- Pools: units of different namespaces never share a GPU unless
  `share_across_namespaces`; units without a namespace form one pool of their own.

Each pool is one HiGHS MILP (minimise the $/h of the GPUs it opens). The whole solve
keeps `time_limit_seconds` (`_Clock`): pools share what is left in proportion to their
units, less the time building the later pools is expected to take; building stops at the
limit, and a pool reached after it keeps each unit alone on its cheapest candidate.
Time-sliced GPUs are modelled by their leader (the unit that comes first, largest first,
among those on one GPU), so no two GPUs of a solution are interchangeable; leaders whose
GPU cannot pay for itself are left out, and so are models that another as cheap and as
large makes redundant (`_prefer_current` then moves a GPU back to its units' current
model where that costs the same). A greedy plan starts the search. The proved bound of a
pool is the larger of HiGHS's dual bound and a fractional bound (each unit's cheapest
share of one resource); `Plan.lower_bound_usd_per_hour` adds the pools' bounds to the
fixed costs (multi-GPU and unplaced units). A pool whose MILP would exceed `MAX_PAIRS`
is solved in parts, and its bound comes from a relaxation of the whole pool
(`_relaxation_bound`).

HiGHS runs with presolve off: on some of these models HiGHS 1.16's presolve neither
stops at the time limit nor keeps the optimum (a start of cost 2.51 became 5.94 in the
reduced space, and 4.24 was reported optimal).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuwatch.core.text import counted
from gpuwatch.install import install_hint
from gpuwatch.plan.mig import MigTable, mig_table
from gpuwatch.plan.model import Placement, PlacementMode, Plan, PlanOptions, WorkloadNeed
from gpuwatch.sizing import GpuCatalog, GpuSpec
from gpuwatch.sizing.candidates import CandidateRules

MAX_PAIRS = 6000
"""Time-sliced (leader, member) pairs in one MILP at most: a pool that would have more is
cut into parts (HiGHS would spend its time on the root of a model that large)."""

_TOLERANCE = 1e-9
"""Relative slack on every capacity test, so that a need computed to fit exactly fits."""

_PREFER = 1e-7
"""Relative premium in the objective on a MIG GPU (once) and a time-sliced GPU (twice):
at equal price a unit stays alone, then gets a MIG instance (isolated), then a share of
a time-sliced GPU. Every bound HiGHS proves is divided by (1 + 2 x this): still a bound.
"""

MIN_HIGHS_SECONDS = 0.02
"""HiGHS is not started with less time than this: the pool keeps its greedy start (HiGHS
takes about this long to stop at its limit, so a smaller limit would not be kept)."""

_GAP_ZERO = 1e-6
"""A plan within this relative distance of its bound reports a gap of 0."""


class SolverMissingError(ImportError):
    """highspy (the optional ``plan`` extra) is not installed."""


def _import_highspy() -> Any:
    try:
        import highspy  # noqa: PLC0415 - optional dependency, loaded when a plan is made
    except ImportError as exc:
        raise SolverMissingError(
            f"gpuwatch plan needs the HiGHS solver (highspy): {install_hint('plan')}"
        ) from exc
    return highspy


@dataclass(frozen=True, slots=True)
class _Unit:
    """A unit to place and what it needs per GPU, headroom included."""

    need: WorkloadNeed
    order: int  # position in the input
    current: GpuSpec
    candidates: tuple[GpuSpec, ...]
    memory: float  # bytes, x (1 + headroom)
    bandwidth: float  # bytes/s, x (1 + headroom)
    activity: float  # on the current GPU, 0-1, before headroom

    def activity_on(self, gpu: GpuSpec) -> float:
        """The share of `gpu`'s dense BF16 FLOP/s this unit uses."""
        return self.activity * self.current.bf16_flops_per_second / gpu.bf16_flops_per_second


def _within(value: float, limit: float) -> bool:
    return value <= limit * (1 + _TOLERANCE) + 1e-12


class _Fit:
    """The fit tests of one headroom."""

    def __init__(self, headroom: float) -> None:
        self.headroom = headroom
        self.compute = 1.0 - headroom

    def whole(self, unit: _Unit, gpu: GpuSpec) -> bool:
        """`unit` fits a whole `gpu` with headroom (alone or sharing it)."""
        return (
            _within(unit.memory, gpu.memory_bytes)
            and _within(unit.activity_on(gpu), self.compute)
            and _within(unit.bandwidth, gpu.memory_bandwidth_bytes_per_second)
        )

    def alone(self, unit: _Unit, gpu: GpuSpec) -> bool:
        """`unit` may have `gpu` to itself: it fits, or it is the model it runs on."""
        return gpu.id == unit.current.id or self.whole(unit, gpu)

    def profile(self, unit: _Unit, gpu: GpuSpec, table: MigTable, index: int) -> bool:
        """`unit` fits one instance of `table.profiles[index]` on `gpu`."""
        profile = table.profiles[index]
        return (
            _within(unit.memory, profile.memory_bytes)
            and _within(unit.activity_on(gpu), profile.compute_fraction * self.compute)
            and _within(
                unit.bandwidth, gpu.memory_bandwidth_bytes_per_second * profile.memory_fraction
            )
        )

    def sizes(self, unit: _Unit, gpu: GpuSpec) -> tuple[float, float, float]:
        """Memory, compute and bandwidth shares of `gpu` that `unit` takes when sharing."""
        return (
            unit.memory / gpu.memory_bytes,
            unit.activity_on(gpu) / self.compute,
            unit.bandwidth / gpu.memory_bandwidth_bytes_per_second,
        )


@dataclass(slots=True)
class _Result:
    placements: list[tuple[int, Placement]]  # (order of its first unit, placement)
    cost: float
    bound: float
    timed_out: bool = False


class _OutOfTimeError(Exception):
    """The solve's time limit passed while a pool was being built or bounded."""


class _Clock:
    """The whole solve's time limit: HiGHS's share of it per pool, and the checks that
    stop Python's own work (bounds, models, greedy starts) once it has passed."""

    def __init__(self, started: float, limit: float, units: int) -> None:
        self.started = started
        self.deadline = started + limit
        self.solver_seconds = 0.0  # inside HiGHS so far
        self.units_built = 0  # units whose pool model was built so far
        self.remaining = units  # units whose pool is not solved yet

    def check(self) -> None:
        """Raise _OutOfTimeError once the time limit has passed."""
        if time.perf_counter() >= self.deadline:
            raise _OutOfTimeError

    def budget(self, units: int) -> float:
        """HiGHS's seconds for a model of `units` of the units not solved yet: their
        share of the time left, less what building the pools after it will take
        (Python's seconds per unit so far, times the units after it)."""
        now = time.perf_counter()
        python = (now - self.started - self.solver_seconds) / max(self.units_built, 1)
        reserve = python * max(self.remaining - units, 0)
        return (self.deadline - now - reserve) * units / max(self.remaining, 1)


def solve(
    needs: Sequence[WorkloadNeed], catalog: GpuCatalog, options: PlanOptions | None = None
) -> Plan:
    """The cheapest plan for `needs` under `options` (see the module docstring).

    Raises `SolverMissingError` without highspy, ValueError on duplicate keys or options
    out of range.
    """
    options = options or PlanOptions()
    started = time.perf_counter()
    highspy = _import_highspy()
    _check(needs, options)
    fit = _Fit(options.headroom_ratio)
    rules = CandidateRules(catalog, options.candidate_gpu_ids)

    unplaced: list[WorkloadNeed] = []
    unknown_models = unknown_needs = 0
    single: list[_Unit] = []
    multi: list[_Unit] = []
    for order, need in enumerate(needs):
        if need.reclaimable:
            continue
        if need.memory_bytes is None:  # sized from nothing it would claim any saving
            unknown_needs += 1
            unplaced.append(need)
            continue
        unit = _unit(need, order, catalog, rules, options.headroom_ratio)
        unknown_models += unit is None
        if unit is None or not any(fit.alone(unit, gpu) for gpu in unit.candidates):
            unplaced.append(need)
        elif need.gpu_count > 1:
            multi.append(unit)
        else:
            single.append(unit)

    placements: list[tuple[int, Placement]] = []
    fixed = sum(need.current_usd_per_hour for need in unplaced)
    for group, unit in enumerate(multi, start=1):
        gpu = _cheapest_alone(unit, fit)
        fixed += gpu.rent_usd_per_hour * unit.need.gpu_count
        one = Placement(gpu.id, "whole", gpu.rent_usd_per_hour, (unit.need.key,), group=group)
        placements.extend((unit.order, one) for _ in range(unit.need.gpu_count))

    pools = _pools(single, options.share_across_namespaces)
    clock = _Clock(started, options.time_limit_seconds, len(single))
    cost = bound = fixed
    timed_out = chunked = 0
    for pool in pools:
        pieces, pool_bound = [pool], 0.0  # past the time limit: no bound but 0
        try:
            pieces = _chunks(pool, fit, options)
            pool_bound = _fractional_bound(pool, fit, options, clock)
        except _OutOfTimeError:
            pass
        relaxed: _Result | None = None
        if len(pieces) > 1:  # the whole pool relaxed first, with a third of its time
            chunked += 1
            try:
                relaxed_bound, relaxed = _relaxation(pool, fit, options, clock, highspy)
                pool_bound = max(pool_bound, relaxed_bound)
            except _OutOfTimeError:
                pass
        results = []
        for piece in pieces:
            try:
                results.append(_solve_pool(piece, fit, options, clock, highspy))
            except _OutOfTimeError:  # each unit alone on its cheapest GPU
                results.append(_alone_result(piece, fit))
            clock.remaining -= len(piece)
        if len(pieces) == 1:
            pool_bound = max(pool_bound, results[0].bound)
        pool_cost = sum(result.cost for result in results)
        if relaxed is not None and relaxed.cost < pool_cost:
            results, pool_cost = [relaxed], relaxed.cost
        for result in results:
            placements.extend(result.placements)
            timed_out += result.timed_out
        cost += pool_cost
        bound += min(pool_bound, pool_cost)

    gap: float | None = None
    if placements:
        gap = 0.0 if cost - bound <= _GAP_ZERO * cost else (cost - bound) / cost
    placements.sort(key=lambda item: item[0])
    return Plan(
        placements=tuple(placement for _, placement in placements),
        current_usd_per_hour=sum(need.current_usd_per_hour for need in needs),
        usd_per_hour=cost,
        lower_bound_usd_per_hour=min(bound, cost),
        gap_ratio=gap,
        reclaimed=tuple(need.key for need in needs if need.reclaimable),
        unplaced=tuple(need.key for need in unplaced),
        solver="highs",
        solve_seconds=time.perf_counter() - started,
        notes=_notes(
            single=single,
            multi=multi,
            unplaced=unplaced,
            unknown_models=unknown_models,
            unknown_needs=unknown_needs,
            chunked=chunked,
            timed_out=timed_out,
            fit=fit,
        ),
    )


def _check(needs: Sequence[WorkloadNeed], options: PlanOptions) -> None:
    keys = [need.key for need in needs]
    if len(set(keys)) != len(keys):
        raise ValueError("two units have the same key")
    if not 0 <= options.headroom_ratio < 1:
        raise ValueError(f"headroom_ratio must be in [0, 1), not {options.headroom_ratio}")
    if not options.time_limit_seconds > 0:
        raise ValueError(f"time_limit_seconds must be > 0, not {options.time_limit_seconds}")
    if not options.relative_gap >= 0:
        raise ValueError(f"relative_gap must be >= 0, not {options.relative_gap}")


def _unit(
    need: WorkloadNeed, order: int, catalog: GpuCatalog, rules: CandidateRules, headroom: float
) -> _Unit | None:
    """The unit's needs with headroom; None where its current GPU is not in the catalog."""
    if (
        need.current_gpu_id is None
        or need.current_gpu_id not in catalog
        or need.memory_bytes is None
    ):
        return None
    current = catalog.get(need.current_gpu_id)
    candidates, _rule = rules.candidates(current)
    bandwidth = need.bandwidth_bytes_per_second
    if bandwidth is None:
        bandwidth = current.memory_bandwidth_bytes_per_second
    return _Unit(
        need=need,
        order=order,
        current=current,
        candidates=tuple(candidates),
        memory=need.memory_bytes * (1 + headroom),
        bandwidth=bandwidth * (1 + headroom),
        activity=1.0 if need.activity_ratio is None else need.activity_ratio,
    )


def _cheapest_alone(unit: _Unit, fit: _Fit) -> GpuSpec:
    """The cheapest candidate `unit` may have to itself; ties keep its current model."""
    allowed = [gpu for gpu in unit.candidates if fit.alone(unit, gpu)]
    return min(allowed, key=lambda gpu: (gpu.rent_usd_per_hour, gpu.id != unit.current.id))


def _pools(units: list[_Unit], across: bool) -> list[list[_Unit]]:
    """Units that may share GPUs, by namespace (None is a pool of its own), in order."""
    if across:
        return [units] if units else []
    by_namespace: dict[str | None, list[_Unit]] = {}
    for unit in units:
        by_namespace.setdefault(unit.need.namespace, []).append(unit)
    return [by_namespace[ns] for ns in sorted(by_namespace, key=lambda ns: (ns is None, ns or ""))]


def _chunks(pool: list[_Unit], fit: _Fit, options: PlanOptions) -> list[list[_Unit]]:
    """The pool in parts whose MILPs have at most about MAX_PAIRS time-sliced (leader,
    member) pairs, alike units together; one part where it is small enough."""
    pairs = 0
    if options.time_slicing:
        for option in _undominated(_shared_options(pool, fit)):
            pairs += len(option.eligible[0]) * (len(option.eligible[0]) - 1) // 2
    parts = max(1, math.ceil(math.sqrt(pairs / MAX_PAIRS)))
    if parts == 1:
        return [pool]
    ordered = sorted(pool, key=lambda u: (u.need.namespace or "", u.current.id, -u.memory, u.order))
    size = math.ceil(len(ordered) / parts)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def _fractional_bound(
    units: Sequence[_Unit], fit: _Fit, options: PlanOptions, clock: _Clock
) -> float:
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
            cheapest = _cheapest_alone(unit, fit).rent_usd_per_hour
            for gpu in unit.candidates:
                price = gpu.rent_usd_per_hour
                if options.time_slicing and fit.whole(unit, gpu):
                    cheapest = min(cheapest, price * fit.sizes(unit, gpu)[k])
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


def _notes(
    *,
    single: list[_Unit],
    multi: list[_Unit],
    unplaced: list[WorkloadNeed],
    unknown_models: int,
    unknown_needs: int,
    chunked: int,
    timed_out: int,
    fit: _Fit,
) -> tuple[str, ...]:
    notes = []
    placed = [*single, *multi]
    unknown_activity = sum(unit.need.activity_ratio is None for unit in placed)
    unknown_bandwidth = sum(unit.need.bandwidth_bytes_per_second is None for unit in placed)
    if unknown_activity:
        notes.append(
            f"{counted(unknown_activity, 'unit')} without SM activity: assumed to use all of "
            "their current GPU's compute"
        )
    if unknown_bandwidth:
        notes.append(
            f"{counted(unknown_bandwidth, 'unit')} without DRAM bandwidth: assumed to use all of "
            "their current GPU's bandwidth"
        )
    stay = sum(not any(fit.whole(u, gpu) for gpu in u.candidates) for u in placed)
    if stay:
        notes.append(
            f"{counted(stay, 'unit')} {'fits' if stay == 1 else 'fit'} no candidate with "
            f"{fit.headroom:.0%} headroom: each stays "
            "alone on a GPU of its current model"
        )
    if unknown_needs:
        notes.append(
            f"{counted(unknown_needs, 'unit')} "
            + (
                "keeps its current GPU: need unknown"
                if unknown_needs == 1
                else "keep their current GPU: need unknown"
            )
            + " (no memory need or memory used in the lookback)"
        )
    if len(unplaced) > unknown_needs:
        no_home = len(unplaced) - unknown_needs
        notes.append(
            f"{counted(no_home, 'unit')} "
            + (
                "keeps its current GPU: no candidate holds it"
                if no_home == 1
                else "keep their current GPU: no candidate holds them"
            )
            + (f" ({unknown_models} on a GPU the catalog lacks)" if unknown_models else "")
        )
    if chunked:
        notes.append(
            f"{counted(chunked, 'pool')} too large for one exact model: planned in parts, or "
            "from a relaxation that pools each GPU model's capacity (also their bound)"
        )
    if timed_out:
        notes.append(f"the solver stopped at its time limit in {counted(timed_out, 'pool')}")
    return tuple(notes)


class _Model:
    """A MILP being written: columns, and rows as sparse (index, value) lists."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.rows: list[tuple[list[int], list[float], float, float]] = []

    def column(self, cost: float, upper: float) -> int:
        """A new integer column in [0, upper]; its index."""
        self.cost.append(cost)
        self.upper.append(upper)
        return len(self.cost) - 1

    def row(self, index: list[int], value: list[float], lower: float, upper: float) -> None:
        self.rows.append((index, value, lower, upper))

    def solve(
        self, highspy: Any, options: PlanOptions, budget: float, start: list[float], clock: _Clock
    ) -> tuple[list[float] | None, float, bool]:
        """(column values or None, proved bound, stopped by the time limit); HiGHS does not
        run when `budget` is below `MIN_HIGHS_SECONDS` (None, 0, stopped)."""
        if budget < MIN_HIGHS_SECONDS:
            return None, 0.0, True
        lp = highspy.HighsLp()
        lp.num_col_ = len(self.cost)
        lp.num_row_ = len(self.rows)
        lp.col_cost_ = self.cost
        lp.col_lower_ = [0.0] * len(self.cost)
        lp.col_upper_ = self.upper
        lp.row_lower_ = [row[2] for row in self.rows]
        lp.row_upper_ = [row[3] for row in self.rows]
        starts, index, value = [0], [], []
        for row_index, row_value, _, _ in self.rows:
            index.extend(row_index)
            value.extend(row_value)
            starts.append(len(index))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.num_col_ = lp.num_col_
        lp.a_matrix_.num_row_ = lp.num_row_
        lp.a_matrix_.start_ = starts
        lp.a_matrix_.index_ = index
        lp.a_matrix_.value_ = value
        lp.integrality_ = [highspy.HighsVarType.kInteger] * len(self.cost)
        # highspy.Highs() prints a banner before any option can be set; _Highs does not.
        solver = getattr(highspy, "_Highs", highspy.Highs)()
        solver.setOptionValue("output_flag", False)
        solver.setOptionValue("presolve", "off")
        solver.setOptionValue("time_limit", float(budget))
        solver.setOptionValue("mip_rel_gap", float(options.relative_gap))
        solver.setOptionValue("random_seed", 0)
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
        bound = info.mip_dual_bound / (1 + 2 * _PREFER)
        if not math.isfinite(bound):
            bound = 0.0
        if info.primal_solution_status != 2:  # kSolutionStatusFeasible
            return None, bound, timed_out
        return list(solver.getSolution().col_value), bound, timed_out


def _prefer_current(
    gpu: GpuSpec, hosted: list[_Unit], profiles: list[int] | None, fit: _Fit
) -> tuple[GpuSpec, MigTable | None]:
    """`gpu`, or a model at the same price that holds the same units the same way and
    that more of them run on now (fewer moves), with its MIG table."""
    table = mig_table(gpu.id)
    layout = None if table is None else _layout(table)

    def holds(other: GpuSpec) -> bool:
        if not all(other in unit.candidates for unit in hosted):
            return False
        if profiles is None:
            if len(hosted) == 1:
                return fit.alone(hosted[0], other)
            sizes = [fit.sizes(unit, other) for unit in hosted]
            return all(fit.whole(unit, other) for unit in hosted) and all(
                _within(sum(size[k] for size in sizes), 1.0) for k in range(3)
            )
        other_table = mig_table(other.id)
        if other_table is None or _layout(other_table) != layout:
            return False
        return all(
            fit.profile(unit, other, other_table, k)
            for unit, k in zip(hosted, profiles, strict=True)
        )

    def moves(model: GpuSpec) -> int:
        return sum(unit.current.id != model.id for unit in hosted)

    best, best_table = gpu, table
    for unit in hosted:
        other = unit.current
        if (
            other.id != best.id
            and abs(other.rent_usd_per_hour - gpu.rent_usd_per_hour) <= _TOLERANCE
            and moves(other) < moves(best)
            and holds(other)
        ):
            best, best_table = other, mig_table(other.id)
    return best, best_table


def _smallest_profiles(
    table: MigTable, gpu: GpuSpec, hosted: list[_Unit], profiles: list[int], fit: _Fit
) -> list[int]:
    """Each unit on the smallest profile that holds it, where that is a valid
    configuration (it leaves the most of the GPU free); else `profiles` as they are."""
    smallest = []
    for unit, given in zip(hosted, profiles, strict=True):
        smallest.append(next(k for k in range(given + 1) if fit.profile(unit, gpu, table, k)))
    counts: dict[str, int] = {}
    for k in smallest:
        counts[table.profiles[k].name] = counts.get(table.profiles[k].name, 0) + 1
    return smallest if table.is_valid(counts) else profiles


def _first_fit_decreasing(sizes: dict[int, tuple[float, float, float]]) -> list[list[int]]:
    """Items (memory, compute, bandwidth shares) packed first-fit-decreasing: the GPUs."""
    loads: list[list[float]] = []
    gpus: list[list[int]] = []
    for i in sorted(sizes, key=lambda i: (-max(sizes[i]), i)):
        size = sizes[i]
        for load, gpu in zip(loads, gpus, strict=True):
            if all(_within(a + b, 1.0) for a, b in zip(load, size, strict=True)):
                for k in range(3):
                    load[k] += size[k]
                gpu.append(i)
                break
        else:
            loads.append(list(size))
            gpus.append([i])
    return gpus


@dataclass(frozen=True, slots=True)
class _Option:
    """A model that some units may use (sharing it, or as MIG), for dominance tests."""

    gpu: GpuSpec
    eligible: tuple[frozenset[int], ...]  # per slot (profile), the units that fit it
    specs: tuple[float, ...]  # larger is better, each


def _undominated(options: list[_Option]) -> list[_Option]:
    """The options no other option beats: none as cheap with every spec at least as
    large and every unit it holds held too (ties keep the first). Keeping fewer models
    keeps the MILP small and less symmetric; `_prefer_current` moves a GPU back to a
    unit's current model where that costs the same."""

    def beats(a: _Option, b: _Option, a_first: bool) -> bool:
        if a.gpu.rent_usd_per_hour > b.gpu.rent_usd_per_hour:
            return False
        if any(x < y for x, y in zip(a.specs, b.specs, strict=True)):
            return False
        if not all(y <= x for x, y in zip(a.eligible, b.eligible, strict=True)):
            return False
        strictly = (
            a.gpu.rent_usd_per_hour < b.gpu.rent_usd_per_hour
            or any(x > y for x, y in zip(a.specs, b.specs, strict=True))
            or any(y < x for x, y in zip(a.eligible, b.eligible, strict=True))
        )
        return strictly or a_first

    return [
        b
        for j, b in enumerate(options)
        if not any(i != j and beats(a, b, i < j) for i, a in enumerate(options))
    ]


def _models(units: list[_Unit]) -> list[GpuSpec]:
    """The candidate models of any unit of the pool, each once, in first-seen order."""
    seen: dict[str, GpuSpec] = {}
    for unit in units:
        for gpu in unit.candidates:
            seen.setdefault(gpu.id, gpu)
    return list(seen.values())


def _shared_options(units: list[_Unit], fit: _Fit) -> list[_Option]:
    options = []
    for gpu in _models(units):
        eligible = frozenset(
            i for i, unit in enumerate(units) if gpu in unit.candidates and fit.whole(unit, gpu)
        )
        if len(eligible) >= 2:
            specs = (
                float(gpu.memory_bytes),
                gpu.memory_bandwidth_bytes_per_second,
                gpu.bf16_flops_per_second,
            )
            options.append(_Option(gpu, (eligible,), specs))
    return options


def _mig_options(units: list[_Unit], fit: _Fit) -> list[tuple[_Option, MigTable]]:
    found = []
    for gpu in _models(units):
        table = mig_table(gpu.id)
        if table is None:
            continue
        eligible = tuple(
            frozenset(
                i
                for i, unit in enumerate(units)
                if gpu in unit.candidates and fit.profile(unit, gpu, table, index)
            )
            for index in range(len(table.profiles) - 1)  # the full-GPU profile: "whole"
        )
        if any(eligible):
            specs = (
                gpu.memory_bandwidth_bytes_per_second,
                gpu.bf16_flops_per_second,
                *(float(profile.memory_bytes) for profile in table.profiles),
            )
            found.append((_Option(gpu, eligible, specs), table))
    return found


def _layout(table: MigTable) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
    return tuple((p.compute_slices, p.memory_slices, p.placements) for p in table.profiles)


def _mig_configurations(table: MigTable, used: list[int]) -> list[tuple[int, ...]]:
    """The maximal valid configurations, counted on the profiles in `used` only."""
    projected = {tuple(config.counts[k] for k in used) for config in table.maximal_configurations}
    projected.discard(tuple(0 for _ in used))

    def inside(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
        return small != big and all(a <= b for a, b in zip(small, big, strict=True))

    return sorted(c for c in projected if not any(inside(c, o) for o in projected))


@dataclass(frozen=True, slots=True)
class _SharedBlock:
    """The columns of one time-sliced model in a pool's MILP."""

    gpu: GpuSpec
    sizes: dict[int, tuple[float, float, float]]  # unit -> its shares of the GPU
    leaders: dict[int, int]  # unit -> column: a GPU with this unit first
    members: dict[tuple[int, int], int]  # (leader, unit) -> column: the unit on it


def _shared_leaders(
    units: list[_Unit],
    eligible: list[int],
    sizes: dict[int, tuple[float, float, float]],
    price: float,
    worth: dict[int, float],
) -> dict[int, list[int]]:
    """Each leader of one model and the units that may join it, those that pay off only.

    Units are ordered largest first; a GPU's leader is the first of its units in that
    order, so a member comes after its leader and fits beside it. A leader whose GPU
    cannot hold units that cost more alone than the GPU does (a fractional-knapsack
    bound on each resource) is left out: such a GPU never beats whole-GPU placements.
    """
    ordered = sorted(eligible, key=lambda i: (-max(sizes[i]), units[i].order))
    leaders: dict[int, list[int]] = {}
    for rank, i in enumerate(ordered):
        room = [1.0 - size for size in sizes[i]]
        after = [
            j
            for j in ordered[rank + 1 :]
            if all(_within(s, r) for s, r in zip(sizes[j], room, strict=True))
        ]
        if after and worth[i] + min(
            _knapsack(after, sizes, worth, k, room[k]) for k in range(3)
        ) > price * (1 + _TOLERANCE):
            leaders[i] = after
    return leaders


def _most_items(sizes: list[float], room: float) -> int:
    """How many of these items fit in `room` at most (the smallest first)."""
    count = 0
    for size in sorted(sizes):
        if not _within(size, room):
            break
        room -= size
        count += 1
    return count


def _knapsack(
    items: list[int],
    sizes: dict[int, tuple[float, float, float]],
    worth: dict[int, float],
    k: int,
    room: float,
) -> float:
    """The most worth items fit in `room` of resource `k`, items divisible (an upper bound)."""
    total = 0.0
    for i in sorted(items, key=lambda i: -worth[i] / max(sizes[i][k], 1e-12)):
        take = min(1.0, room / sizes[i][k]) if sizes[i][k] > 0 else 1.0
        total += worth[i] * take
        room -= sizes[i][k] * take
        if room <= 0:
            break
    return total


@dataclass(frozen=True, slots=True)
class _MigBlock:
    """The columns of one MIG model in a pool's MILP."""

    gpu: GpuSpec
    table: MigTable
    used: list[int]  # profile indices some unit fits
    configs: list[tuple[int, ...]]  # counts on `used`
    counts: list[int]  # column: GPUs in each configuration
    assigned: dict[tuple[int, int], int]  # (unit, profile index) -> column


def _greedy_start(
    alone: list[GpuSpec],
    alone_column: list[int],
    shared: list[_SharedBlock],
    mig: list[_MigBlock],
    columns: int,
    *,
    clock: _Clock,
) -> list[float]:
    """A first solution for the MILP: while some GPU saves money (and the time limit has
    not passed), open the one that saves most (time-sliced or MIG, filled greedily);
    every other unit alone."""
    worth = [gpu.rent_usd_per_hour for gpu in alone]
    free = set(range(len(alone)))
    start = [0.0] * columns
    while time.perf_counter() < clock.deadline:
        best: tuple[float, Callable[[], list[int]] | None] = (_TOLERANCE, None)
        for block in shared:
            price = block.gpu.rent_usd_per_hour
            pool = [i for i in block.sizes if i in free]
            for key in (
                lambda i: -worth[i] / max(block.sizes[i]),  # noqa: B023 - used in this loop
                lambda i: -worth[i],
            ):
                load = [0.0, 0.0, 0.0]
                chosen = []
                for i in sorted(pool, key=key):
                    size = block.sizes[i]
                    if all(_within(load[k] + size[k], 1.0) for k in range(3)):
                        chosen.append(i)
                        load = [load[k] + size[k] for k in range(3)]
                saving = sum(worth[i] for i in chosen) - price
                if len(chosen) >= 2 and saving > best[0]:
                    opening = functools.partial(_open_shared, block, chosen, start, alone_column)
                    best = (saving, opening)
        for mblock in mig:
            fits = {k: {i for (i, kk) in mblock.assigned if kk == k} for k in mblock.used}
            pool = sorted({i for i, _ in mblock.assigned if i in free}, key=lambda i: -worth[i])
            for c, config in enumerate(mblock.configs):
                left = dict(zip(mblock.used, config, strict=True))
                placed: dict[int, int] = {}
                for i in pool:
                    k = next((k for k in mblock.used if left[k] and i in fits[k]), None)
                    if k is not None:
                        left[k] -= 1
                        placed[i] = k
                saving = sum(worth[i] for i in placed) - mblock.gpu.rent_usd_per_hour
                if saving > best[0]:
                    best = (saving, functools.partial(_open_mig, mblock, c, placed, start))
        if best[1] is None:
            break
        free.difference_update(best[1]())
    for i in free:
        start[alone_column[i]] = 1.0
    return start


def _open_shared(
    block: _SharedBlock, chosen: list[int], start: list[float], alone_column: list[int]
) -> list[int]:
    """Put `chosen` on one time-sliced GPU of `block` in `start` (alone where the model
    lacks that GPU's columns); the units placed."""
    order = sorted(block.leaders, key=lambda i: (-max(block.sizes[i]), i))
    rank = {i: r for r, i in enumerate(order)}
    leader = min(chosen, key=lambda i: (rank.get(i, math.inf), i))
    others = [j for j in chosen if j != leader]
    if leader in block.leaders and all((leader, j) in block.members for j in others):
        start[block.leaders[leader]] = 1.0
        for j in others:
            start[block.members[leader, j]] = 1.0
    else:
        for i in chosen:
            start[alone_column[i]] = 1.0
    return chosen


def _open_mig(
    block: _MigBlock, config: int, placed: dict[int, int], start: list[float]
) -> list[int]:
    """One GPU of `block` in configuration `config` in `start`, `placed` units on it."""
    start[block.counts[config]] += 1.0
    for i, k in placed.items():
        start[block.assigned[i, k]] = 1.0
    return list(placed)


def _add_mig(
    model: _Model, units: list[_Unit], fit: _Fit, choices: list[list[int]], clock: _Clock
) -> list[_MigBlock]:
    """MIG columns: GPUs per (model, configuration), units per (model, profile)."""
    found = _mig_options(units, fit)
    kept: list[tuple[_Option, MigTable]] = []
    for layout in {_layout(table) for _, table in found}:
        group = [(o, t) for o, t in found if _layout(t) == layout]
        survivors = {id(o) for o in _undominated([o for o, _ in group])}
        kept.extend((o, t) for o, t in group if id(o) in survivors)
    order = [o.gpu.id for o, _ in found]
    kept.sort(key=lambda item: order.index(item[0].gpu.id))
    blocks = []
    for option, table in kept:
        clock.check()
        used = [k for k, eligible in enumerate(option.eligible) if eligible]
        configs = _mig_configurations(table, used)
        price = option.gpu.rent_usd_per_hour * (1 + _PREFER)
        counts = [model.column(price, len(units)) for _ in configs]
        assigned: dict[tuple[int, int], int] = {}
        for slot, k in enumerate(used):
            columns = []
            for i in sorted(option.eligible[k]):
                assigned[i, k] = model.column(0.0, 1)
                choices[i].append(assigned[i, k])
                columns.append(assigned[i, k])
            have = [float(-config[slot]) for config in configs]
            model.row([*columns, *counts], [1.0] * len(columns) + have, -math.inf, 0.0)
        blocks.append(_MigBlock(option.gpu, table, used, configs, counts, assigned))
    return blocks


def _relaxation(
    units: list[_Unit],
    fit: _Fit,
    options: PlanOptions,
    clock: _Clock,
    highspy: Any,
) -> tuple[float, _Result | None]:
    """For a pool too large for one exact MILP: (a lower bound, a plan or None).

    The MILP is `_solve_pool`'s, except that time-sliced units only count against the
    capacity of all GPUs of a model together, not GPU by GPU: a relaxation, so its bound
    holds for the pool. Its solution, each model's units packed first-fit-decreasing,
    is a plan (optimal where the packing needs no more GPUs than the relaxation opened:
    likely with many small units, those that make a pool too large).
    """
    model = _Model()
    alone = [_cheapest_alone(unit, fit) for unit in units]
    alone_column = [model.column(gpu.rent_usd_per_hour, 1) for gpu in alone]
    choices: list[list[int]] = [[column] for column in alone_column]
    shared: list[tuple[GpuSpec, dict[int, tuple[float, float, float]], dict[int, int]]] = []
    if options.time_slicing:
        for option in _undominated(_shared_options(units, fit)):
            clock.check()
            gpu = option.gpu
            eligible = sorted(option.eligible[0])
            sizes = {i: fit.sizes(units[i], gpu) for i in eligible}
            most_gpus = len(_first_fit_decreasing(sizes))
            gpus = model.column(gpu.rent_usd_per_hour * (1 + 2 * _PREFER), most_gpus)
            on = {i: model.column(0.0, 1) for i in eligible}
            for i, column in on.items():
                choices[i].append(column)
            columns = [*on.values(), gpus]
            for k in range(3):
                loads = [sizes[i][k] for i in eligible]
                model.row(columns, [*loads, -1.0], -math.inf, 0.0)
            most = min(_most_items([sizes[i][k] for i in eligible], 1.0) for k in range(3))
            model.row(columns, [1.0] * len(on) + [-float(most)], -math.inf, 0.0)
            model.row(columns, [1.0] * len(on) + [-2.0], 0.0, math.inf)
            shared.append((gpu, sizes, on))
    mig = _add_mig(model, units, fit, choices, clock) if options.mig else []
    for row in choices:
        model.row(row, [1.0] * len(row), 1.0, 1.0)
    start = [0.0] * len(model.cost)
    for column in alone_column:
        start[column] = 1.0
    budget = clock.budget(len(units)) / 3  # a third of the pool's time
    values, bound, timed_out = model.solve(highspy, options, budget, start, clock)
    if values is None:
        return bound, None
    plan = _Collector(
        units, fit, _Result(placements=[], cost=0.0, bound=bound, timed_out=timed_out)
    )
    for i, column in enumerate(alone_column):
        if values[column] > 0.5:
            plan.add(alone[i], [i], None)
    for gpu, sizes, on in shared:
        chosen = {i: sizes[i] for i, column in on.items() if values[column] > 0.5}
        for members in _first_fit_decreasing(chosen):
            plan.add(gpu, members, None)
    for block in mig:
        _add_mig_gpus(plan, block, values)
    return bound, plan.result


class _Collector:
    """Turns a pool's solution into placements (`result`), GPU by GPU."""

    def __init__(self, units: list[_Unit], fit: _Fit, result: _Result) -> None:
        self.units = units
        self.fit = fit
        self.result = result

    def add(self, gpu: GpuSpec, members: list[int], profiles: list[int] | None) -> None:
        """One GPU: `profiles` (indices) per member on MIG, None time-sliced or whole."""
        order = sorted(range(len(members)), key=lambda n: self.units[members[n]].order)
        hosted = [self.units[members[n]] for n in order]
        if profiles is not None:
            profiles = [profiles[n] for n in order]
        if len(members) == 1:
            profiles = None
        gpu, table = _prefer_current(gpu, hosted, profiles, self.fit)
        if profiles is not None and table is not None:
            profiles = _smallest_profiles(table, gpu, hosted, profiles, self.fit)
        if profiles is None or table is None:
            mode: PlacementMode = "whole" if len(members) == 1 else "shared"
            names: tuple[str, ...] = ()
        else:
            mode, names = "mig", tuple(table.profiles[k].name for k in profiles)
        keys = tuple(unit.need.key for unit in hosted)
        placement = Placement(gpu.id, mode, gpu.rent_usd_per_hour, keys, names)
        self.result.placements.append((hosted[0].order, placement))
        self.result.cost += gpu.rent_usd_per_hour


def _add_mig_gpus(plan: _Collector, block: _MigBlock, values: list[float]) -> None:
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


def _alone_result(units: list[_Unit], fit: _Fit) -> _Result:
    """Each unit alone on its cheapest candidate (a pool reached past the time limit)."""
    plan = _Collector(units, fit, _Result(placements=[], cost=0.0, bound=0.0, timed_out=True))
    for i, unit in enumerate(units):
        plan.add(_cheapest_alone(unit, fit), [i], None)
    return plan.result


def _solve_pool(
    units: list[_Unit],
    fit: _Fit,
    options: PlanOptions,
    clock: _Clock,
    highspy: Any,
) -> _Result:
    """One MILP: each unit alone, time-sliced on a GPU, or on a MIG instance."""
    model = _Model()
    alone = [_cheapest_alone(unit, fit) for unit in units]
    alone_column = [model.column(gpu.rent_usd_per_hour, 1) for gpu in alone]
    choices: list[list[int]] = [[column] for column in alone_column]

    # Time-slicing, one GPU per leader: the unit that comes first in the model's order
    # (largest first) among those on it. No two GPUs of a solution are interchangeable.
    shared: list[_SharedBlock] = []
    if options.time_slicing:
        worth = {i: gpu.rent_usd_per_hour for i, gpu in enumerate(alone)}
        for option in _undominated(_shared_options(units, fit)):
            clock.check()
            gpu = option.gpu
            sizes = {i: fit.sizes(units[i], gpu) for i in option.eligible[0]}
            block = _SharedBlock(gpu, sizes, {}, {})
            eligible = sorted(option.eligible[0])
            for i, after in _shared_leaders(
                units, eligible, sizes, gpu.rent_usd_per_hour, worth
            ).items():
                lead = block.leaders[i] = model.column(gpu.rent_usd_per_hour * (1 + 2 * _PREFER), 1)
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
                    _most_items([sizes[j][k] for j in after], 1.0 - sizes[i][k]) for k in range(3)
                )
                if most < len(after):
                    model.row([*follow, lead], [1.0] * len(follow) + [-float(most)], -math.inf, 0.0)
                for c in follow:
                    model.row([c, lead], [1.0, -1.0], -math.inf, 0.0)
            if block.leaders:
                # An optimum packs the units it puts on this model into as few GPUs as
                # they need, never more than first-fit-decreasing needs for all of them.
                most = len(_first_fit_decreasing(sizes))
                if most < len(block.leaders):
                    leads = list(block.leaders.values())
                    model.row(leads, [1.0] * len(leads), 0.0, float(most))
                shared.append(block)

    mig = _add_mig(model, units, fit, choices, clock) if options.mig else []

    for row in choices:
        model.row(row, [1.0] * len(row), 1.0, 1.0)

    start = _greedy_start(alone, alone_column, shared, mig, len(model.cost), clock=clock)
    clock.units_built += len(units)
    budget = clock.budget(len(units))
    values, bound, timed_out = model.solve(highspy, options, budget, start, clock)
    if values is None:
        values = start

    def on(column: int) -> bool:
        return values[column] > 0.5

    plan = _Collector(
        units, fit, _Result(placements=[], cost=0.0, bound=bound, timed_out=timed_out)
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
        _add_mig_gpus(plan, mblock, values)
    return plan.result
