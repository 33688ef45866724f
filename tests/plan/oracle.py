"""The plan's rules read independently of `gpuwatch.plan.solve`, for the tests: does a
unit fit a whole GPU or a MIG instance (`_fits`, `LGIP_SMS`), does a time-sliced class
hold its units whichever land together (`class_holds`), the cheapest plan by brute force
(`brute_force`: every partition of the units into isolated GPUs and classes), and
whether a plan keeps the rules (`assert_feasible`)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Sequence
from typing import cast

from gpuwatch.plan.mig import COMPUTE_SLICES, MEMORY_SLICES, MigProfile, mig_table
from gpuwatch.plan.model import Placement, Plan, PlanOptions, WorkloadNeed
from gpuwatch.sizing import GpuSpec, build_gpu_catalog

CATALOG = build_gpu_catalog()
HEADROOM = PlanOptions().headroom_ratio
CONTEXT_SWITCH = PlanOptions().context_switch_ratio


H100_PROFILES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
A100_40_PROFILES = ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
H100_94_PROFILES = ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")


def _fits(unit: WorkloadNeed, gpu: GpuSpec, compute: float, memory: float, bw: float) -> bool:
    current = CATALOG.get(unit.current_gpu_id or "")
    activity = 1.0 if unit.activity_ratio is None else unit.activity_ratio
    bandwidth = unit.bandwidth_bytes_per_second
    if bandwidth is None:
        bandwidth = current.memory_bandwidth_bytes_per_second
    scaled = activity * current.bf16_flops_per_second / gpu.bf16_flops_per_second
    return (
        cast(float, unit.memory_bytes) * (1 + HEADROOM) <= memory * (1 + 1e-9)
        and scaled <= compute * (1 - HEADROOM) * (1 + 1e-9)
        and bandwidth * (1 + HEADROOM) <= bw * (1 + 1e-9)
    )


LGIP_SMS = {
    "H100-SXM-80GB": (dict(zip(H100_PROFILES, (16, 26, 32, 60, 64, 132), strict=True)), 132),
    "A100-PCIe-40GB": (dict(zip(A100_40_PROFILES, (14, 14, 28, 42, 56, 98), strict=True)), 108),
    "H100-NVL-94GB": (dict(zip(H100_94_PROFILES, (16, 26, 32, 60, 64, 132), strict=True)), 132),
}
"""SMs per MIG profile (`nvidia-smi mig -lgip`) and the GPU's SMs, read independently of
gpuwatch.plan.mig (H100 NVL: OpenNebula's published -lgip); other parts: compute slices
over the GPU's (7; 4 on an RTX PRO 6000)."""


FOUR_SLICE = {"RTX-PRO-6000-Blackwell-96GB"}
"""Parts with 4 compute and 4 memory slices (the guide's RTX PRO 6000 Blackwell table)."""


def _memory_slices(gpu: GpuSpec) -> int:
    return 4 if gpu.id in FOUR_SLICE else MEMORY_SLICES


def _sm_share(gpu: GpuSpec, profile: MigProfile) -> float:
    if gpu.id in LGIP_SMS:
        sms, total = LGIP_SMS[gpu.id]
        return sms[profile.name] / total
    return profile.compute_slices / (4 if gpu.id in FOUR_SLICE else COMPUTE_SLICES)


@functools.cache
def _gpu_cost(group: tuple[WorkloadNeed, ...], models: tuple[GpuSpec, ...]) -> float:
    """The cheapest single GPU of `models` that holds `group` isolated: one unit alone
    (or on the part it runs on), or MIG (some valid configuration, one unit per instance)."""
    best = float("inf")
    for gpu in models:
        mem, bw = gpu.memory_bytes, gpu.memory_bandwidth_bytes_per_second
        ok = False
        if len(group) == 1:
            unit = group[0]
            ok = unit.current_gpu_id == gpu.id or _fits(unit, gpu, 1.0, mem, bw)
        table = mig_table(gpu.id)
        if not ok and table is not None:
            names = [p.name for p in table.profiles]
            for choice in itertools.product(range(len(names)), repeat=len(group)):
                profiles = [table.profiles[k] for k in choice]
                if all(
                    _fits(
                        u,
                        gpu,
                        _sm_share(gpu, p),
                        p.memory_bytes,
                        bw * p.memory_slices / _memory_slices(gpu),
                    )
                    for u, p in zip(group, profiles, strict=True)
                ) and table.is_valid({n: [names[k] for k in choice].count(n) for n in names}):
                    ok = True
                    break
        if ok:
            best = min(best, gpu.rent_usd_per_hour)
    return best


def _shares(unit: WorkloadNeed, gpu: GpuSpec) -> tuple[float, float, float]:
    """Memory, compute (of 1 - headroom) and bandwidth shares of a time-sliced `gpu`, with
    headroom: compute is kernel-busy time (unknown: all of the current GPU's) scaled by
    BF16 FLOP/s plus the context-switch allowance."""
    current = CATALOG.get(unit.current_gpu_id or "")
    busy = 1.0 if unit.kernel_busy_ratio is None else unit.kernel_busy_ratio
    bandwidth = unit.bandwidth_bytes_per_second or current.memory_bandwidth_bytes_per_second
    scaled = busy * current.bf16_flops_per_second / gpu.bf16_flops_per_second
    return (
        cast(float, unit.memory_bytes) * (1 + HEADROOM) / gpu.memory_bytes,
        (scaled + CONTEXT_SWITCH) / (1 - HEADROOM),
        bandwidth * (1 + HEADROOM) / gpu.memory_bandwidth_bytes_per_second,
    )


def class_holds(group: Sequence[WorkloadNeed], gpu: GpuSpec, replicas: int) -> bool:
    """A time-sliced class of `replicas` holds `group`: at least `replicas` units, each
    fits `gpu` whole and takes at most 1/`replicas` of it on every resource (so any
    `replicas` of them fit one GPU, whichever Kubernetes's scheduler puts there)."""
    mem, bw = gpu.memory_bytes, gpu.memory_bandwidth_bytes_per_second
    if len(group) < replicas or not all(_fits(u, gpu, 1.0, mem, bw) for u in group):
        return False
    return all(share * replicas <= 1 + 1e-9 for u in group for share in _shares(u, gpu))


@functools.cache
def _class_options(
    group: tuple[WorkloadNeed, ...], models: tuple[GpuSpec, ...]
) -> list[tuple[float, tuple[str, int]]]:
    """(cost, (model, replicas)) of every class that holds `group`: ceil(q / r) GPUs."""
    return [
        (gpu.rent_usd_per_hour * -(-len(group) // replicas), (gpu.id, replicas))
        for gpu in models
        for replicas in range(2, len(group) + 1)
        if class_holds(group, gpu, replicas)
    ]


def _partitions(items: list[int]) -> Iterator[list[list[int]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partition in _partitions(rest):
        for i in range(len(partition)):
            yield [*partition[:i], [first, *partition[i]], *partition[i + 1 :]]
        yield [[first], *partition]


def brute_force(units: Sequence[WorkloadNeed], models: tuple[GpuSpec, ...]) -> float:
    """The cheapest plan: every partition of the units into parts of one namespace, each
    part one isolated GPU (alone or MIG) or one time-sliced class, at most one class per
    (namespace, model, replicas)."""
    best = float("inf")
    for partition in _partitions(list(range(len(units)))):
        if any(len({units[i].namespace for i in part}) > 1 for part in partition):
            continue
        groups = [tuple(units[i] for i in part) for part in partition]
        best = min(best, _cheapest(groups, models, 0, frozenset()))
    return best


def _cheapest(
    groups: list[tuple[WorkloadNeed, ...]],
    models: tuple[GpuSpec, ...],
    at: int,
    used: frozenset[tuple[str | None, str, int]],
) -> float:
    """The cheapest choice for groups[at:], the classes in `used` taken."""
    if at == len(groups):
        return 0.0
    group = groups[at]
    best = _gpu_cost(group, models) + _cheapest(groups, models, at + 1, used)
    for cost, (gpu_id, replicas) in _class_options(group, models):
        key = (group[0].namespace, gpu_id, replicas)
        if key not in used:
            best = min(best, cost + _cheapest(groups, models, at + 1, used | {key}))
    return best


def assert_feasible(plan: Plan, units: Sequence[WorkloadNeed], *, across: bool = False) -> None:
    """Every GPU of the plan holds its units under the rules, read independently; every
    time-sliced class (same `share_class`) is one model and replica count, at most that
    many units per GPU, ceil(q / r) GPUs, one per (pool, model, replicas), and holds
    whichever of its units land together (`class_holds`); no note says one overflows."""
    by_key = {u.key: u for u in units}
    classes: dict[int, list[Placement]] = {}
    for placement in plan.placements:
        gpu = CATALOG.get(placement.gpu_id)
        group = [by_key[k] for k in placement.units]
        if not across:
            assert len({u.namespace for u in group}) == 1
        if placement.mode == "whole":
            (unit,) = group
            assert unit.current_gpu_id == gpu.id or _fits(
                unit, gpu, 1.0, gpu.memory_bytes, gpu.memory_bandwidth_bytes_per_second
            )
        elif placement.mode == "shared":
            assert 1 <= len(group) <= placement.replicas
            assert placement.share_class > 0
            classes.setdefault(placement.share_class, []).append(placement)
        else:
            table = mig_table(gpu.id)
            assert table is not None
            names = placement.mig_profiles
            assert table.is_valid({n: names.count(n) for n in names})
            for unit, name in zip(group, names, strict=True):
                p = table.profile(name)
                share = p.memory_slices / _memory_slices(gpu)
                bw = gpu.memory_bandwidth_bytes_per_second * share
                compute = _sm_share(gpu, p)
                assert _fits(unit, gpu, compute, p.memory_bytes, bw)
    keys = set()
    for gpus in classes.values():
        assert len({(p.gpu_id, p.replicas) for p in gpus}) == 1
        members = [by_key[k] for p in gpus for k in p.units]
        replicas = gpus[0].replicas
        assert len(gpus) == -(-len(members) // replicas)
        assert class_holds(members, CATALOG.get(gpus[0].gpu_id), replicas)
        pool = "" if across else members[0].namespace
        key = (pool, gpus[0].gpu_id, replicas)
        assert key not in keys
        keys.add(key)
    assert not any("overflow" in note for note in plan.notes)
