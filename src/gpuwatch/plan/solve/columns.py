"""A pool's MILP being written (`Model`: columns and sparse rows) and the columns it
gets: the undominated time-sliced and MIG options and the MIG blocks (GPUs per
configuration, units per profile); the time-sliced classes' columns are `classes.py`'s.
Running HiGHS is `milp.py`'s job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwatch.plan.mig import MigTable, mig_table
from gpuwatch.plan.solve.clock import Clock
from gpuwatch.plan.solve.fit import PREFER, Fit, Unit, mig_layout
from gpuwatch.sizing import GpuSpec


class Model:
    """A MILP being written: columns, and rows as sparse (index, value) lists."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.integer: list[bool] = []
        self.rows: list[tuple[list[int], list[float], float, float]] = []

    def column(self, cost: float, upper: float, *, integer: bool = True) -> int:
        """A new column in [0, upper], integer unless told; its index."""
        self.cost.append(cost)
        self.upper.append(upper)
        self.integer.append(integer)
        return len(self.cost) - 1

    def row(self, index: list[int], value: list[float], lower: float, upper: float) -> None:
        self.rows.append((index, value, lower, upper))


@dataclass(frozen=True, slots=True)
class _Option:
    """A model that some units may use (sharing it, or as MIG), for dominance tests."""

    gpu: GpuSpec
    eligible: tuple[frozenset[int], ...]  # per slot (profile), the units that fit it
    specs: tuple[float, ...]  # larger is better, each


def undominated(options: list[_Option]) -> list[_Option]:
    """The options no other option beats: none as cheap with every spec at least as
    large and every unit it holds held too (ties keep the first). Keeping fewer models
    keeps the MILP small and less symmetric; `prefer_current` moves a GPU back to a
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


def _models(units: list[Unit]) -> list[GpuSpec]:
    """The candidate models of any unit of the pool, each once, in first-seen order."""
    seen: dict[str, GpuSpec] = {}
    for unit in units:
        for gpu in unit.candidates:
            seen.setdefault(gpu.id, gpu)
    return list(seen.values())


def shared_options(units: list[Unit], fit: Fit) -> list[_Option]:
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


def _mig_options(units: list[Unit], fit: Fit) -> list[tuple[_Option, MigTable]]:
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


def _mig_configurations(table: MigTable, used: list[int]) -> list[tuple[int, ...]]:
    """The maximal valid configurations, counted on the profiles in `used` only."""
    projected = {tuple(config.counts[k] for k in used) for config in table.maximal_configurations}
    projected.discard(tuple(0 for _ in used))

    def inside(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
        return small != big and all(a <= b for a, b in zip(small, big, strict=True))

    return sorted(c for c in projected if not any(inside(c, o) for o in projected))


@dataclass(frozen=True, slots=True)
class MigBlock:
    """The columns of one MIG model in a pool's MILP."""

    gpu: GpuSpec
    table: MigTable
    used: list[int]  # profile indices some unit fits
    configs: list[tuple[int, ...]]  # counts on `used`
    counts: list[int]  # column: GPUs in each configuration
    assigned: dict[tuple[int, int], int]  # (unit, profile index) -> column


def add_mig(
    model: Model, units: list[Unit], fit: Fit, choices: list[list[int]], clock: Clock
) -> list[MigBlock]:
    """MIG columns: GPUs per (model, configuration), units per (model, profile)."""
    found = _mig_options(units, fit)
    kept: list[tuple[_Option, MigTable]] = []
    for layout in {mig_layout(table) for _, table in found}:
        group = [(o, t) for o, t in found if mig_layout(t) == layout]
        survivors = {id(o) for o in undominated([o for o, _ in group])}
        kept.extend((o, t) for o, t in group if id(o) in survivors)
    order = [o.gpu.id for o, _ in found]
    kept.sort(key=lambda item: order.index(item[0].gpu.id))
    blocks = []
    for option, table in kept:
        clock.check()
        used = [k for k, eligible in enumerate(option.eligible) if eligible]
        configs = _mig_configurations(table, used)
        price = option.gpu.rent_usd_per_hour * (1 + PREFER)
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
        blocks.append(MigBlock(option.gpu, table, used, configs, counts, assigned))
    return blocks
