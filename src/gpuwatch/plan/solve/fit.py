"""The fit rules of a plan: a unit's needs with headroom, and the tests of whether it
fits a whole GPU, a share of one, or a MIG instance (the module docstring of
`gpuwatch.plan.solve` states them). A whole GPU and a MIG instance hold a unit's SM
activity; a time-sliced GPU runs one context at a time, so there the units' kernel-busy
times add up, plus a context-switch allowance each (`Fit.shared_sizes`). Also the packing
helper those tests make exact (the most items that fit) and the choice of an equally
priced model a GPU's units already run on. No MILP and no HiGHS here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpuwatch.plan.mig import MigTable, mig_table
from gpuwatch.plan.model import WorkloadNeed
from gpuwatch.sizing import GpuCatalog, GpuSpec
from gpuwatch.sizing.candidates import CandidateRules

TOLERANCE = 1e-9
"""Relative slack on every capacity test, so that a need computed to fit exactly fits."""


PREFER = 1e-7
"""Relative premium in the objective on a MIG GPU (once) and a time-sliced GPU (twice):
at equal price a unit stays alone, then gets a MIG instance (isolated), then a share of
a time-sliced GPU. Every bound HiGHS proves is divided by (1 + 2 x this): still a bound.
"""


@dataclass(frozen=True, slots=True)
class Unit:
    """A unit to place and what it needs per GPU, headroom included."""

    need: WorkloadNeed
    order: int  # position in the input
    current: GpuSpec
    candidates: tuple[GpuSpec, ...]
    memory: float  # bytes, x (1 + headroom)
    bandwidth: float  # bytes/s, x (1 + headroom)
    activity: float  # on the current GPU, 0-1, before headroom
    kernel_busy: float = 1.0  # kernel-busy time on the current GPU, 0-1; unknown: 1 (all)

    def activity_on(self, gpu: GpuSpec) -> float:
        """The share of `gpu`'s dense BF16 FLOP/s this unit uses."""
        return self.activity * self.current.bf16_flops_per_second / gpu.bf16_flops_per_second

    def kernel_busy_on(self, gpu: GpuSpec) -> float:
        """The share of `gpu`'s time a kernel of this unit runs, 0-1 or more: its
        kernel-busy time scaled by dense BF16 FLOP/s, as `activity_on`."""
        return self.kernel_busy * self.current.bf16_flops_per_second / gpu.bf16_flops_per_second


def within(value: float, limit: float) -> bool:
    return value <= limit * (1 + TOLERANCE) + 1e-12


class Fit:
    """The fit tests of one headroom and one context-switch allowance (the share of a
    time-sliced GPU each unit on it adds, `PlanOptions.context_switch_ratio`)."""

    def __init__(self, headroom: float, context_switch: float = 0.05) -> None:
        if not 0 <= context_switch < 1:
            raise ValueError(f"context_switch_ratio must be in [0, 1), not {context_switch}")
        self.headroom = headroom
        self.compute = 1.0 - headroom
        self.context_switch = context_switch

    def whole(self, unit: Unit, gpu: GpuSpec) -> bool:
        """`unit` fits a whole `gpu` with headroom (alone or sharing it)."""
        return (
            within(unit.memory, gpu.memory_bytes)
            and within(unit.activity_on(gpu), self.compute)
            and within(unit.bandwidth, gpu.memory_bandwidth_bytes_per_second)
        )

    def alone(self, unit: Unit, gpu: GpuSpec) -> bool:
        """`unit` may have `gpu` to itself: it fits, or it is the model it runs on."""
        return gpu.id == unit.current.id or self.whole(unit, gpu)

    def profile(self, unit: Unit, gpu: GpuSpec, table: MigTable, index: int) -> bool:
        """`unit` fits one instance of `table.profiles[index]` on `gpu`."""
        profile = table.profiles[index]
        return (
            within(unit.memory, profile.memory_bytes)
            and within(unit.activity_on(gpu), profile.compute_fraction * self.compute)
            and within(
                unit.bandwidth, gpu.memory_bandwidth_bytes_per_second * profile.memory_fraction
            )
        )

    def sizes(self, unit: Unit, gpu: GpuSpec) -> tuple[float, float, float]:
        """Memory, SM-activity and bandwidth shares of `gpu` that `unit` takes (space
        sharing: what a whole GPU or a MIG instance holds)."""
        return (
            unit.memory / gpu.memory_bytes,
            unit.activity_on(gpu) / self.compute,
            unit.bandwidth / gpu.memory_bandwidth_bytes_per_second,
        )

    def shared_sizes(self, unit: Unit, gpu: GpuSpec) -> tuple[float, float, float]:
        """Memory, compute and bandwidth shares of a TIME-SLICED `gpu` that `unit` takes.

        Time-slicing runs one context at a time, so co-tenants' kernel-busy times add up
        (NVML utilization.gpu: the share of time one or more kernels ran), not their SM
        activity: compute is the unit's kernel-busy time scaled by BF16 FLOP/s plus the
        context-switch allowance, over 1 - headroom. Unknown kernel-busy time counts as
        the whole current GPU (`Unit.kernel_busy` 1). Memory and bandwidth as `sizes`."""
        memory, _activity, bandwidth = self.sizes(unit, gpu)
        busy = unit.kernel_busy_on(gpu) + self.context_switch
        return memory, busy / self.compute, bandwidth


def make_unit(
    need: WorkloadNeed, order: int, catalog: GpuCatalog, rules: CandidateRules, headroom: float
) -> Unit | None:
    """The unit's needs with headroom; None where its current GPU is not in the catalog."""
    if (
        need.current_gpu_id is None
        or need.current_gpu_id not in catalog
        or need.memory_bytes is None
    ):
        return None
    current = catalog.get(need.current_gpu_id)
    allowed, _rule = rules.candidates(current)
    candidates = keeps_interconnect(current, need.gpu_count, allowed)
    bandwidth = need.bandwidth_bytes_per_second
    if bandwidth is None:
        bandwidth = current.memory_bandwidth_bytes_per_second
    return Unit(
        need=need,
        order=order,
        current=current,
        candidates=candidates,
        memory=need.memory_bytes * (1 + headroom),
        bandwidth=bandwidth * (1 + headroom),
        activity=1.0 if need.activity_ratio is None else need.activity_ratio,
        kernel_busy=1.0 if need.kernel_busy_ratio is None else need.kernel_busy_ratio,
    )


def keeps_interconnect(
    current: GpuSpec, gpus: int, candidates: Iterable[GpuSpec]
) -> tuple[GpuSpec, ...]:
    """The candidates a unit of `gpus` GPUs may move to: all of them for one GPU; for a
    multi-GPU job, parts sold with at least `gpus` per server, and where its GPUs share an
    NVLink domain now (`nvlink_domain_gpus` >= `gpus`), parts whose domain holds them all
    (a TP=4 NVLink job never goes to four PCIe cards). Its current part always stays."""
    if gpus <= 1:
        return tuple(candidates)
    nvlink = current.nvlink_domain_gpus >= gpus
    return tuple(
        gpu
        for gpu in candidates
        if gpu.id == current.id
        or (gpu.gpus_per_node >= gpus and (not nvlink or gpu.nvlink_domain_gpus >= gpus))
    )


def cheapest_alone(unit: Unit, fit: Fit) -> GpuSpec:
    """The cheapest candidate `unit` may have to itself; ties keep its current model."""
    allowed = [gpu for gpu in unit.candidates if fit.alone(unit, gpu)]
    return min(allowed, key=lambda gpu: (gpu.rent_usd_per_hour, gpu.id != unit.current.id))


def most_items(sizes: list[float], room: float) -> int:
    """How many of these items fit in `room` at most (the smallest first)."""
    count = 0
    for size in sorted(sizes):
        if not within(size, room):
            break
        room -= size
        count += 1
    return count


def mig_layout(table: MigTable) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
    return tuple((p.compute_slices, p.memory_slices, p.placements) for p in table.profiles)


def prefer_current(
    gpu: GpuSpec, hosted: list[Unit], profiles: list[int] | None, fit: Fit
) -> tuple[GpuSpec, MigTable | None]:
    """`gpu`, or a model at the same price that holds the same units the same way and
    that more of them run on now (fewer moves), with its MIG table. `profiles`: each
    unit's MIG profile; None: one unit on the whole GPU."""
    table = mig_table(gpu.id)
    layout = None if table is None else mig_layout(table)

    def holds(other: GpuSpec) -> bool:
        if not all(other in unit.candidates for unit in hosted):
            return False
        if profiles is None:  # one unit on the whole GPU (time-sliced GPUs: class_model)
            (unit,) = hosted
            return fit.alone(unit, other)
        other_table = mig_table(other.id)
        if other_table is None or mig_layout(other_table) != layout:
            return False
        return all(
            fit.profile(unit, other, other_table, k)
            for unit, k in zip(hosted, profiles, strict=True)
        )

    best = fewest_moves(gpu, hosted, holds)
    return best, table if best.id == gpu.id else mig_table(best.id)


def fewest_moves(gpu: GpuSpec, hosted: list[Unit], holds: Callable[[GpuSpec], bool]) -> GpuSpec:
    """`gpu`, or the units' current model at its price (within TOLERANCE $/h) that `holds`
    them and that more of them run on now (fewer moves), the first found in unit order."""

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


def smallest_profiles(
    table: MigTable, gpu: GpuSpec, hosted: list[Unit], profiles: list[int], fit: Fit
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
