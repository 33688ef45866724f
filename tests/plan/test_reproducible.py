"""The plan is a function of its input (a deterministic work limit, the seed printed)
and never worse than first-fit-decreasing (issue 24, item 5).

The first-fit-decreasing plan here is the test's own reading of `plan/solve/ffd.py`'s
rule: for each candidate model, the units that fit it whole taken largest share first
(memory, compute and bandwidth shares with headroom, as `tests/plan/test_solve.py` reads
the rules) into time-sliced classes (one per replica count, each unit within 1/`replicas`
of each resource, ceil(q / r) GPUs), each class kept only where its units cost more
alone, every other unit alone on its cheapest candidate; the cheapest model's plan.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import cast

from gpuwatch.plan.model import PlanOptions, WorkloadNeed
from gpuwatch.plan.solve import solve
from gpuwatch.sizing import GpuSpec, build_gpu_catalog

from .oracle import CONTEXT_SWITCH, _fits, assert_feasible

CATALOG = build_gpu_catalog()
HEADROOM = PlanOptions().headroom_ratio
TEAM_MODELS = ("H100-SXM-80GB", "A100-SXM-80GB", "L40S-48GB", "L4-24GB")


def one_team(units: int, seed: int) -> list[WorkloadNeed]:
    """`units` small single-GPU units of one namespace: 2-30 % of their GPU's memory,
    1-25 % of its SM activity, 1-20 % of its bandwidth."""
    rng = random.Random(seed)
    fleet = []
    for n in range(units):
        gpu = CATALOG.get(rng.choice(TEAM_MODELS))
        fleet.append(
            WorkloadNeed(
                key=f"GPU-{n:03d}",
                label=f"team/notebook-{n}",
                host=f"node-{n // 8}",
                gpu_uuids=(f"GPU-{n:03d}",),
                current_gpu_id=gpu.id,
                current_usd_per_hour=gpu.rent_usd_per_hour,
                activity="busy",
                memory_bytes=gpu.memory_bytes * rng.uniform(0.02, 0.3),
                memory_basis="observed",
                activity_ratio=rng.uniform(0.01, 0.25),
                bandwidth_bytes_per_second=gpu.memory_bandwidth_bytes_per_second
                * rng.uniform(0.01, 0.2),
                namespace="team",
            )
        )
    # kernel-busy time as SM activity (the least it can be), with no draw of its own
    return [dataclasses.replace(u, kernel_busy_ratio=u.activity_ratio) for u in fleet]


def _candidates(unit: WorkloadNeed) -> list[GpuSpec]:
    """The test's candidates: the team's four models (`PlanOptions.candidate_gpu_ids`)."""
    return [CATALOG.get(model) for model in TEAM_MODELS]


def _shares(unit: WorkloadNeed, gpu: GpuSpec) -> tuple[float, float, float]:
    """A time-sliced unit's shares: kernel-busy time scaled by BF16 plus the allowance."""
    current = CATALOG.get(cast(str, unit.current_gpu_id))
    busy = cast(float, unit.kernel_busy_ratio) * current.bf16_flops_per_second
    return (
        cast(float, unit.memory_bytes) * (1 + HEADROOM) / gpu.memory_bytes,
        (busy / gpu.bf16_flops_per_second + CONTEXT_SWITCH) / (1 - HEADROOM),
        cast(float, unit.bandwidth_bytes_per_second)
        * (1 + HEADROOM)
        / gpu.memory_bandwidth_bytes_per_second,
    )


def _class_fits(shares: list[tuple[float, float, float]], replicas: int) -> bool:
    """The class rule: each unit takes at most 1/replicas of the GPU on every resource."""
    return all(x * replicas <= 1 + 1e-9 for share in shares for x in share)


def first_fit_cost(fleet: Sequence[WorkloadNeed]) -> float:
    """The cheapest first-fit-decreasing plan's $/h (module docstring)."""

    def alone(unit: WorkloadNeed) -> float:
        current = CATALOG.get(cast(str, unit.current_gpu_id))
        return min(
            gpu.rent_usd_per_hour
            for gpu in _candidates(unit)
            if gpu.id == current.id
            or _fits(unit, gpu, 1.0, gpu.memory_bytes, gpu.memory_bandwidth_bytes_per_second)
        )

    best = sum(alone(unit) for unit in fleet)
    for gpu in {g.id: g for u in fleet for g in _candidates(u)}.values():
        fits = [
            u
            for u in fleet
            if gpu in _candidates(u)
            and _fits(u, gpu, 1.0, gpu.memory_bytes, gpu.memory_bandwidth_bytes_per_second)
        ]
        if len(fits) < 2:
            continue
        top = min(
            16,
            *(
                max(
                    n
                    for n in range(len(fits) + 1)
                    if sum(sorted(_shares(u, gpu)[k] for u in fits)[:n]) <= 1 + 1e-9
                )
                for k in range(3)
            ),
        )
        price = gpu.rent_usd_per_hour
        classes: list[tuple[int, list[WorkloadNeed]]] = []
        for unit in sorted(fits, key=lambda u: (-max(_shares(u, gpu)), fleet.index(u))):
            size = _shares(unit, gpu)
            joins = []
            for c, (r, members) in enumerate(classes):
                if _class_fits([*(_shares(m, gpu) for m in members), size], r):
                    q = len(members)
                    joins.append((price * (-(-(q + 1) // r) - -(-q // r)), c))
            best_join = min(joins, default=None)
            if best_join is not None and best_join[0] == 0:
                classes[best_join[1]][1].append(unit)
                continue
            used = {r for r, _ in classes}
            r = min(top, *(int(1 / max(x, 1e-12)) for x in size))
            while r >= 2 and (r in used or r * max(size) > 1 + 1e-9):
                r -= 1
            if r >= 2:
                classes.append((r, [unit]))
            elif best_join is not None and best_join[0] < alone(unit):
                classes[best_join[1]][1].append(unit)
        cost = 0.0
        shared: list[WorkloadNeed] = []
        full = {r for r, members in classes if len(members) >= r}
        for r, members in classes:
            if len(members) < r:
                if len(members) < 2 or len(members) in full:
                    continue
                r = len(members)  # noqa: PLW2901
                full.add(r)
            gpus = price * -(-len(members) // r)
            if sum(alone(u) for u in members) > gpus:
                cost += gpus
                shared.extend(members)
        cost += sum(alone(u) for u in fleet if u not in shared)
        best = min(best, cost)
    return best


def test_a_single_team_is_never_planned_worse_than_first_fit() -> None:
    """One team of small units (the issue's 60-120): before the work limit and the
    first-fit seeding, 60 of them were planned at 21.51 $/h against first-fit-decreasing's
    20.64 $/h (4.2 % worse, 20 s wall-clock limit). Now the plan is at most first-fit's,
    and the same plan comes back on a second solve. Since the time-sliced class rule
    (issue 24 item 2) the root of a 60-unit pool over every data-centre part takes
    minutes on the shared 2-core machine (60 units, the team's four models: 251 s), so
    this runs 24 units on the team's four models."""
    fleet = one_team(24, 3)
    options = PlanOptions(work_limit_nodes=1, candidate_gpu_ids=TEAM_MODELS)
    plan = solve(fleet, CATALOG, options)
    ffd = first_fit_cost(fleet)
    assert plan.usd_per_hour <= ffd + 1e-9
    assert_feasible(plan, fleet)
    assert plan.lower_bound_usd_per_hour <= plan.usd_per_hour
    assert any("seed 0, work limit 1 branch-and-bound node" in note for note in plan.notes)
    again = solve(fleet, CATALOG, options)
    assert again.placements == plan.placements
    assert again.usd_per_hour == plan.usd_per_hour
