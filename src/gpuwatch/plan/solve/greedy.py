"""The greedy start of a pool's MILP: while some GPU saves money, open the one that
saves most (time-sliced or MIG, filled greedily); every other unit alone."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable

from gpuwatch.plan.solve.clock import Clock
from gpuwatch.plan.solve.columns import MigBlock, SharedBlock
from gpuwatch.plan.solve.fit import TOLERANCE, within
from gpuwatch.sizing import GpuSpec


def greedy_start(
    alone: list[GpuSpec],
    alone_column: list[int],
    shared: list[SharedBlock],
    mig: list[MigBlock],
    columns: int,
    *,
    clock: Clock,
) -> list[float]:
    """A first solution for the MILP: while some GPU saves money (and the time limit has
    not passed), open the one that saves most (time-sliced or MIG, filled greedily);
    every other unit alone."""
    worth = [gpu.rent_usd_per_hour for gpu in alone]
    free = set(range(len(alone)))
    start = [0.0] * columns
    while time.perf_counter() < clock.deadline:
        best: tuple[float, Callable[[], list[int]] | None] = (TOLERANCE, None)
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
                    if all(within(load[k] + size[k], 1.0) for k in range(3)):
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
    block: SharedBlock, chosen: list[int], start: list[float], alone_column: list[int]
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
    block: MigBlock, config: int, placed: dict[int, int], start: list[float]
) -> list[int]:
    """One GPU of `block` in configuration `config` in `start`, `placed` units on it."""
    start[block.counts[config]] += 1.0
    for i, k in placed.items():
        start[block.assigned[i, k]] = 1.0
    return list(placed)
