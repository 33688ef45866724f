"""The cheapest set of GPUs that holds every workload with headroom: a MILP per pool.

Rules (docs/plan.md says them to users):

- Idle and held units get no GPU (`Plan.reclaimed`).
- A unit fits a part when, per GPU, ``memory x (1 + headroom) <= part memory``,
  ``activity x bf16(current) / bf16(part) <= capacity x (1 - headroom)`` and
  ``bandwidth x (1 + headroom) <= part bandwidth``. A whole GPU has capacity 1; a MIG
  instance its SMs over the GPU's (`MigProfile.compute_fraction`: published SM counts,
  else ``compute_slices / 7``) of the compute and ``memory_slices / 8`` of the
  bandwidth, with the profile's memory (`gpuwatch.plan.mig`). An unknown activity or
  bandwidth counts as all of the current GPU's (a note says how many units that was).
- A unit alone on a whole GPU of its current model always fits: it runs there today, so
  the plan never asks more of it than the present does.
- Time-slicing, by class (`classes.py`): a class is (pool, model, replicas r >= 2), one
  at most per triple, r <= `classes.MAX_REPLICAS`; its q >= r single-GPU units run on
  ceil(q / r) GPUs, and each takes at most 1/r of the GPU on every resource with
  headroom (`classes.class_fits`), so any r of them fit one GPU: the device plugin
  advertises replicas and the scheduler picks which pods share a GPU (MPS's equal 1/r
  per client holds them too). `unenforceable` counts classes that break it (0).
- MIG: a GPU split into one valid profile configuration (`MigTable`), one unit per
  instance. Instances of a profile are interchangeable, so the model counts GPUs per
  (model, configuration) and units per (model, profile): exact, and without symmetry.
- A multi-GPU unit takes `gpu_count` whole GPUs of one model, never shared (a `group`).
  It shares with nothing, so its cheapest model is chosen directly, among parts that
  keep its interconnect (`fit.keeps_interconnect`: as many GPUs per server, and an
  NVLink domain that joins them all where one does now).
- Candidates: `PlanOptions.candidate_gpu_ids`, else right-sizing's rule
  (`CandidateRules`: the current GPU's class). A unit no candidate holds keeps its GPU
  at its current price (`Plan.unplaced`).
- Pools: units of different namespaces never share a GPU unless
  `share_across_namespaces`; units without a namespace form one pool of their own.
- Policy (`[plan]`): a namespace of `no_time_slicing_namespaces` is never time-sliced
  (a pool of its own even across namespaces); `quotas` are rows of each pool's MILP
  (`milp._quota_rows`; an nvidia.com/gpu limit less the namespace's multi-GPU units).

Each pool is one HiGHS MILP (minimise the $/h of the GPUs it opens), stopped at a
deterministic work limit (`work_limit_nodes` branch-and-bound nodes, `seed`, one thread):
the plan is a function of its input, and its notes say the seed and the limit. Every
pool starts from first-fit-decreasing (`ffd.py`) and keeps that plan where the search
ends above it. An optional wall-clock cap (`time_limit_seconds`, off by default;
`clock.Clock`) shares what is left among pools in proportion to their units; building
stops at it, and a pool reached after it keeps each unit alone on its cheapest
candidate (a note says the plan then depends on the machine's load).
Time-sliced classes are counted (units per class, GPUs per class), so no two GPUs of a
solution are interchangeable; classes whose r dearest units cost no more alone than one
GPU are left out, and so are models that another as cheap and as large makes redundant
(`classes.class_model` then moves a class back to its units' current model where that
costs the same). First-fit's plan, and a greedy MIG fill, start the search. The proved
bound of a pool is the larger of HiGHS's dual bound and a fractional bound (each unit's
cheapest share of one resource); `Plan.lower_bound_usd_per_hour` adds the pools' bounds
to the fixed costs (multi-GPU and unplaced units).

HiGHS runs with presolve off: on some of these models HiGHS 1.16's presolve neither
stops at the time limit nor keeps the optimum (a start of cost 2.51 became 5.94 in the
reduced space, and 4.24 was reported optimal).

The package: `solve` here (pools, notes); `fit.py` the fit rules, `columns.py` the
MILP's model and MIG columns, `classes.py` the time-sliced classes, `greedy.py` the MIG
start, `milp.py` HiGHS and placements, `bounds.py` the fractional bound, `ffd.py`
first-fit-decreasing, `clock.py` the optional wall-clock cap. Nothing here reads
Prometheus or renders.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from gpuwatch.core.text import counted
from gpuwatch.plan.model import Placement, Plan, PlanOptions, WorkloadNeed
from gpuwatch.plan.solve.bounds import fractional_bound
from gpuwatch.plan.solve.classes import class_fits
from gpuwatch.plan.solve.clock import Clock, OutOfTimeError
from gpuwatch.plan.solve.ffd import first_fit
from gpuwatch.plan.solve.fit import Fit, Unit, cheapest_alone, make_unit
from gpuwatch.plan.solve.milp import (
    SolverMissingError,
    alone_result,
    first_fit_result,
    import_highspy,
    solve_pool,
)
from gpuwatch.sizing import GpuCatalog
from gpuwatch.sizing.candidates import CandidateRules

__all__ = ["SolverMissingError", "solve", "unenforceable"]


_GAP_ZERO = 1e-6
"""A plan within this relative distance of its bound reports a gap of 0."""


def solve(
    needs: Sequence[WorkloadNeed], catalog: GpuCatalog, options: PlanOptions | None = None
) -> Plan:
    """The cheapest plan for `needs` under `options` (see the module docstring).

    Raises `SolverMissingError` without highspy, ValueError on duplicate keys or options
    out of range.
    """
    options = options or PlanOptions()
    started = time.perf_counter()
    highspy = import_highspy()
    _check(needs, options)
    fit = Fit(options.headroom_ratio, options.context_switch_ratio)
    rules = CandidateRules(catalog, options.candidate_gpu_ids)

    unplaced: list[WorkloadNeed] = []
    unknown_models = unknown_needs = 0
    single: list[Unit] = []
    multi: list[Unit] = []
    for order, need in enumerate(needs):
        if need.reclaimable:
            continue
        if need.memory_bytes is None:  # sized from nothing it would claim any saving
            unknown_needs += need.memory_error_bytes is None  # errors: the render says
            unplaced.append(need)
            continue
        unit = make_unit(need, order, catalog, rules, options.headroom_ratio)
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
        gpu = cheapest_alone(unit, fit)
        fixed += gpu.rent_usd_per_hour * unit.need.gpu_count
        one = Placement(gpu.id, "whole", gpu.rent_usd_per_hour, (unit.need.key,), group=group)
        placements.extend((unit.order, one) for _ in range(unit.need.gpu_count))

    pools = _pools(single, options.share_across_namespaces, options.no_time_slicing_namespaces)
    quotas = _pool_quotas(multi, options.quotas)
    clock = Clock(started, options.time_limit_seconds, len(single))
    cost = bound = fixed
    timed_out = first_fit_kept = classes = 0
    for pool in pools:
        pool_options = _pool_options(pool, options, quotas)
        pool_bound = 0.0  # past the time limit: no bound but 0
        # first-fit (time-sliced classes, no quota) is the floor where it obeys the
        # pool's policy
        floor = pool_options.time_slicing and not pool_options.quotas
        ffd = None
        try:
            pool_bound = fractional_bound(pool, fit, pool_options, clock)
            ffd = first_fit(pool, fit) if floor else None
            result = solve_pool(pool, fit, pool_options, clock, highspy, ffd=ffd)
        except OutOfTimeError:  # each unit alone on its cheapest GPU
            result = alone_result(pool, fit)
        clock.remaining -= len(pool)
        pool_bound = max(pool_bound, result.bound)
        if ffd is not None and ffd.cost < result.cost * (1 - 1e-9):
            result = first_fit_result(pool, fit, ffd)
            first_fit_kept += 1
        numbered = 0  # class numbers run on across pools
        for first, planned in result.placements:
            numbered = max(numbered, planned.share_class)
            if planned.share_class:
                planned = dataclasses.replace(planned, share_class=planned.share_class + classes)  # noqa: PLW2901
            placements.append((first, planned))
        classes += numbered
        timed_out += result.timed_out
        cost += result.cost
        bound += min(pool_bound, result.cost)

    overflowing = unenforceable([p for _, p in placements], single, fit)
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
            timed_out=timed_out,
            fit=fit,
        )
        + _reproducibility(options, clock, first_fit_kept)
        + _enforcement(overflowing),
    )


def unenforceable(placements: Sequence[Placement], units: Sequence[Unit], fit: Fit) -> int:
    """Time-sliced classes that break the class rule (`classes.py`): GPUs of more than
    one model, more units on a GPU than its replicas, or a unit that takes more than
    1/`replicas` of the GPU (then `replicas` of them may not fit one GPU together).
    `solve` counts them on every plan (a note if any: it should never say one); the
    tests assert 0."""
    by_key = {unit.need.key: unit for unit in units}
    found: dict[int, list[Placement]] = {}
    for placement in placements:
        if placement.mode == "shared":
            found.setdefault(placement.share_class, []).append(placement)
    count = 0
    for number, gpus in found.items():
        replicas = gpus[0].replicas
        hosted = [by_key[key] for p in gpus for key in p.units]
        models = {p.gpu_id for p in gpus}
        if (
            number < 1
            or len(models) > 1
            or replicas < 2
            or any(p.replicas != replicas or len(p.units) > replicas for p in gpus)
            or len(hosted) < replicas
        ):
            count += 1
            continue
        spec = next(g for g in hosted[0].candidates if g.id == gpus[0].gpu_id)
        if not class_fits([fit.shared_sizes(unit, spec) for unit in hosted], replicas):
            count += 1
    return count


def _enforcement(overflowing: int) -> tuple[str, ...]:
    if not overflowing:
        return ()
    return (
        f"{counted(overflowing, 'time-sliced class')} (one pool's units on one GPU model "
        "with one replica count) would overflow a GPU if its largest units landed together: "
        "a solver fault, please report it",
    )


def _past(clock: Clock) -> bool:
    try:
        clock.check()
    except OutOfTimeError:
        return True
    return False


def _reproducibility(options: PlanOptions, clock: Clock, first_fit_kept: int) -> tuple[str, ...]:
    """What makes the plan repeatable: the seed and the work limit, and whether the
    optional wall-clock cap cut the search (then it depends on the machine's load)."""
    notes = [
        f"solver HiGHS, seed {options.seed}, work limit {options.work_limit_nodes:,} "
        "branch-and-bound nodes per model: the same input gives the same plan"
    ]
    if _past(clock):
        notes.append(
            f"the wall-clock cap of {options.time_limit_seconds:g} s was reached: this plan "
            "depends on the machine's load (rerun without --time-limit to repeat it)"
        )
    if first_fit_kept:
        notes.append(
            f"{counted(first_fit_kept, 'pool')} planned first-fit-decreasing: "
            "the search stopped at its work limit above that plan"
        )
    return tuple(notes)


def _check(needs: Sequence[WorkloadNeed], options: PlanOptions) -> None:
    keys = [need.key for need in needs]
    if len(set(keys)) != len(keys):
        raise ValueError("two units have the same key")
    if not 0 <= options.headroom_ratio < 1:
        raise ValueError(f"headroom_ratio must be in [0, 1), not {options.headroom_ratio}")
    if options.time_limit_seconds is not None and not options.time_limit_seconds > 0:
        raise ValueError(f"time_limit_seconds must be > 0, not {options.time_limit_seconds}")
    if not options.work_limit_nodes >= 1:
        raise ValueError(f"work_limit_nodes must be >= 1, not {options.work_limit_nodes}")
    if not options.relative_gap >= 0:
        raise ValueError(f"relative_gap must be >= 0, not {options.relative_gap}")


def _pools(units: list[Unit], across: bool, solo: frozenset[str]) -> list[list[Unit]]:
    """Units that may share GPUs, by namespace (None is a pool of its own), in order;
    with `across`, one pool but for the namespaces never time-sliced (`solo`)."""
    by_namespace: dict[str | None, list[Unit]] = {}
    for unit in units:
        namespace = unit.need.namespace
        by_namespace.setdefault(namespace if not across or namespace in solo else "", []).append(
            unit
        )
    if across:
        shared = by_namespace.pop("", [])
        rest = [by_namespace[ns] for ns in sorted(by_namespace, key=lambda ns: ns or "")]
        return [shared, *rest] if shared else rest
    return [by_namespace[ns] for ns in sorted(by_namespace, key=lambda ns: (ns is None, ns or ""))]


def _pool_quotas(
    multi: list[Unit], quotas: tuple[tuple[str, str, int], ...]
) -> tuple[tuple[str, str, int], ...]:
    """The quotas left to a namespace's single-GPU units: nvidia.com/gpu less what its
    multi-GPU units request (whole GPUs, outside the pools)."""
    held: dict[str | None, int] = {}
    for unit in multi:
        held[unit.need.namespace] = held.get(unit.need.namespace, 0) + unit.need.gpu_count
    return tuple(
        (ns, resource, max(0, limit - held.get(ns, 0)) if resource == "nvidia.com/gpu" else limit)
        for ns, resource, limit in quotas
    )


def _pool_options(
    pool: list[Unit], options: PlanOptions, quotas: tuple[tuple[str, str, int], ...]
) -> PlanOptions:
    """`options` for one pool: no time-slicing where a namespace forbids it, its quotas."""
    namespaces = {unit.need.namespace for unit in pool}
    forbidden = any(ns in options.no_time_slicing_namespaces for ns in namespaces)
    mine = tuple(quota for quota in quotas if quota[0] in namespaces)
    if not forbidden and not mine and not options.quotas:
        return options
    return dataclasses.replace(
        options, time_slicing=options.time_slicing and not forbidden, quotas=mine
    )


def _notes(
    *,
    single: list[Unit],
    multi: list[Unit],
    unplaced: list[WorkloadNeed],
    unknown_models: int,
    unknown_needs: int,
    timed_out: int,
    fit: Fit,
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
    errors = sum(need.memory_error_bytes is not None for need in unplaced)
    if len(unplaced) > unknown_needs + errors:
        no_home = len(unplaced) - unknown_needs - errors
        notes.append(
            f"{counted(no_home, 'unit')} "
            + (
                "keeps its current GPU: no candidate holds it"
                if no_home == 1
                else "keep their current GPU: no candidate holds them"
            )
            + (f" ({unknown_models} on a GPU the catalog lacks)" if unknown_models else "")
        )
    if timed_out:
        notes.append(
            f"the solver stopped at its work limit in {counted(timed_out, 'pool')} "
            "(the gap says how far from proved optimal)"
        )
    return tuple(notes)
