"""The greedy MIG start of a pool's MILP: from a start (every unit alone, or
first-fit's classes), while some MIG GPU saves money on the units still alone, open the
one that saves most (filled greedily)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence

from gpuwatch.plan.solve.clock import Clock
from gpuwatch.plan.solve.columns import MigBlock
from gpuwatch.plan.solve.fit import TOLERANCE


def greedy_start(
    worth: Sequence[float],
    alone_column: list[int],
    mig: list[MigBlock],
    start: list[float],
    *,
    clock: Clock,
) -> list[float]:
    """`start` (a solution) with MIG GPUs opened greedily for units it leaves alone,
    while one saves money and the time limit has not passed."""
    start = list(start)
    free = {i for i, column in enumerate(alone_column) if start[column] > 0.5}
    while time.perf_counter() < clock.deadline:
        best: tuple[float, Callable[[], list[int]] | None] = (TOLERANCE, None)
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
        for i in best[1]():
            free.discard(i)
            start[alone_column[i]] = 0.0
    return start


def _open_mig(
    block: MigBlock, config: int, placed: dict[int, int], start: list[float]
) -> list[int]:
    """One GPU of `block` in configuration `config` in `start`, `placed` units on it."""
    start[block.counts[config]] += 1.0
    for i, k in placed.items():
        start[block.assigned[i, k]] = 1.0
    return list(placed)
