"""Policy a team states in `[plan]`, applied around the solver (`solve` applies the
rest: no time-slicing for some namespaces, quotas as MILP rows).

- `min_saving`: a planned GPU (or multi-GPU job) that saves less than the minimum per
  month is no move: its units keep their GPUs at today's price.
- `quota_notes`: the quotas a plan still exceeds (a namespace that exceeds one today,
  or whose units no candidate holds otherwise), one sentence each.
- `with_extra_cost`: a plan with costs added after the solve (spare GPUs of whole
  nodes); its proved bound stays a bound, its gap grows.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from gpuwatch.core.text import counted, usd
from gpuwatch.core.units import HOURS_PER_MONTH
from gpuwatch.plan.model import Placement, Plan, WorkloadNeed

GPU_RESOURCE = "nvidia.com/gpu"


def _gap(cost: float, bound: float, placed: bool) -> float | None:
    if not placed:
        return None
    return 0.0 if cost - bound <= 1e-6 * cost else (cost - bound) / cost


def with_extra_cost(plan: Plan, extra_usd_per_hour: float, notes: Sequence[str]) -> Plan:
    """`plan` costing `extra_usd_per_hour` more, with `notes` added."""
    cost = plan.usd_per_hour + extra_usd_per_hour
    return dataclasses.replace(
        plan,
        usd_per_hour=cost,
        gap_ratio=_gap(cost, plan.lower_bound_usd_per_hour, bool(plan.placements)),
        notes=(*plan.notes, *notes),
    )


def min_saving(plan: Plan, needs: Sequence[WorkloadNeed], usd_per_month: float) -> Plan:
    """`plan` with every planned GPU saving less than `usd_per_month` put back: its units
    keep their GPUs (whole, at today's $/h). 0: `plan` unchanged."""
    if usd_per_month <= 0:
        return plan
    by_key = {need.key: need for need in needs}
    blocks: dict[tuple[int, int], list[Placement]] = {}
    for index, placement in enumerate(plan.placements):
        key = (placement.group, 0) if placement.group > 0 else (0, index)
        blocks.setdefault(key, []).append(placement)
    kept: list[Placement] = []
    back = 0
    for block in blocks.values():
        units = [by_key[k] for k in dict.fromkeys(k for p in block for k in p.units)]
        planned = sum(p.usd_per_hour for p in block)
        now = sum(unit.current_usd_per_hour for unit in units)
        same = len(units) == 1 and all(p.gpu_id == units[0].current_gpu_id for p in block)
        if (
            same
            or (now - planned) * HOURS_PER_MONTH >= usd_per_month
            or any(unit.current_gpu_id is None for unit in units)
        ):
            kept.extend(block)
            continue
        back += len(units)
        for unit in units:
            per_gpu = unit.current_usd_per_hour / unit.gpu_count
            group = block[0].group
            kept.extend(
                Placement(str(unit.current_gpu_id), "whole", per_gpu, (unit.key,), group=group)
                for _ in range(unit.gpu_count)
            )
    if not back:
        return plan
    extra = sum(p.usd_per_hour for p in kept) - sum(p.usd_per_hour for p in plan.placements)
    note = (
        f"{counted(back, 'unit')} {'keeps its GPU' if back == 1 else 'keep their GPUs'}: "
        f"the move saved less than the {usd(usd_per_month)}/month minimum ([plan] "
        "min_saving_usd_per_month)"
    )
    return with_extra_cost(dataclasses.replace(plan, placements=tuple(kept)), extra, [note])


def requests(plan: Plan, needs: Sequence[WorkloadNeed]) -> Counter[tuple[str, str]]:
    """(namespace, resource) -> what the plan's units request: nvidia.com/gpu per GPU of
    a whole or time-sliced unit, nvidia.com/mig-<profile> per MIG unit."""
    by_key = {need.key: need for need in needs}
    namespace = {key: need.namespace for key, need in by_key.items()}
    out: Counter[tuple[str, str]] = Counter()
    seen_group: set[int] = set()
    for placement in plan.placements:
        if placement.group > 0:
            if placement.group in seen_group:
                out[(namespace.get(placement.units[0]) or "", GPU_RESOURCE)] += 1
                continue
            seen_group.add(placement.group)
        for n, key in enumerate(placement.units):
            resource = GPU_RESOURCE
            if placement.mode == "mig" and n < len(placement.mig_profiles):
                resource = f"nvidia.com/mig-{placement.mig_profiles[n]}"
            out[(namespace.get(key) or "", resource)] += 1
    for key in plan.unplaced:
        need = by_key.get(key)
        if need is not None:
            out[(need.namespace or "", GPU_RESOURCE)] += need.gpu_count
    return out


def quota_notes(
    plan: Plan, needs: Sequence[WorkloadNeed], quotas: Sequence[tuple[str, str, int]]
) -> list[str]:
    """One sentence per quota the plan exceeds."""
    used = requests(plan, needs)
    return [
        f"quota exceeded: namespace {namespace} requests {used[(namespace, resource)]} "
        f"{resource} (limit {limit}); no plan within it was found"
        for namespace, resource, limit in quotas
        if used[(namespace, resource)] > limit
    ]
