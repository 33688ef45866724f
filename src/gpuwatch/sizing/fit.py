"""Which GPUs hold a workload, how many of each, and how fast: physics, no dollars.

A GPU fits when its memory holds the requirement plus headroom:
``memory_bytes >= total_bytes x (1 + headroom)``. The default headroom, 10 %, is the
low end of seed 001's "leave 10-15 % headroom" for allocator fragmentation. Catalog
memory is the marketed decimal capacity, at most what NVML reports. Each GPU also gets
its multi-GPU shapes (`parallel.shapes_for`: tensor and pipeline parallel serving,
sharded training) that hold the workload. What each GPU and shape costs per token, and
the ranking by it, are `gpuwatch.tco.per_token`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwatch.sizing.gpus import GpuCatalog, GpuSpec
from gpuwatch.sizing.memory import MemoryBreakdown, memory_requirement
from gpuwatch.sizing.parallel import Shape, shapes_for
from gpuwatch.sizing.throughput import tokens_per_second
from gpuwatch.sizing.workload import DEFAULT_ASSUMPTIONS, MemoryAssumptions, Workload

DEFAULT_HEADROOM = 0.1


def _check_headroom(headroom: float) -> None:
    if headroom < 0:
        raise ValueError(f"headroom must be >= 0, got {headroom}")


def fits(gpu: GpuSpec, breakdown: MemoryBreakdown, headroom: float = DEFAULT_HEADROOM) -> bool:
    """True when one `gpu` holds `breakdown` with `headroom` (a fraction) to spare."""
    _check_headroom(headroom)
    return breakdown.total_bytes * (1 + headroom) <= gpu.memory_bytes


def gpus_needed(total_bytes: int, gpu: GpuSpec, headroom: float = DEFAULT_HEADROOM) -> int:
    """How many of `gpu` hold `total_bytes` with headroom, if it shards evenly.

    Ideal sharding (tensor parallelism, ZeRO-3): the lower bound on the GPU count.
    """
    _check_headroom(headroom)
    return max(1, math.ceil(total_bytes * (1 + headroom) / gpu.memory_bytes))


@dataclass(frozen=True, slots=True)
class GpuFit:
    """One catalog GPU judged against a workload: whether one holds it, how many would
    with ideal sharding, the tokens/s of each (for a GPU that does not fit, what
    each of `gpus_needed` GPUs would give), and the shapes that hold it (`parallel`;
    empty when none does)."""

    gpu: GpuSpec
    fits: bool
    gpus_needed: int
    tokens_per_second: float
    shapes: tuple[Shape, ...] = ()


def fit_gpus(
    catalog: GpuCatalog,
    workload: Workload,
    *,
    headroom: float = DEFAULT_HEADROOM,
    efficiency: float | None = None,
    assumptions: MemoryAssumptions = DEFAULT_ASSUMPTIONS,
) -> tuple[GpuFit, ...]:
    """Every catalog GPU for `workload`, in catalog order.

    `efficiency` None takes the mode's default (see `throughput.tokens_per_second`).
    """
    breakdown = memory_requirement(workload, assumptions)
    result = []
    for gpu in catalog:
        needed = gpus_needed(breakdown.total_bytes, gpu, headroom)
        result.append(
            GpuFit(
                gpu=gpu,
                fits=fits(gpu, breakdown, headroom),
                gpus_needed=needed,
                tokens_per_second=tokens_per_second(gpu, workload, efficiency),
                shapes=shapes_for(
                    gpu,
                    workload,
                    breakdown,
                    headroom=headroom,
                    gpus_needed=needed,
                    efficiency=efficiency,
                ),
            )
        )
    return tuple(result)


def cheapest_fitting(
    catalog: GpuCatalog,
    need_memory_bytes: float,
    need_bandwidth_bytes_per_second: float,
    headroom: float = DEFAULT_HEADROOM,
) -> GpuSpec | None:
    """The GPU with the lowest `rent_usd_per_hour` that meets both needs with headroom.

    Meets: memory >= need x (1 + headroom) and bandwidth >= need x (1 + headroom).
    Ties go to the smaller memory, then the id. None when no GPU meets both.
    """
    _check_headroom(headroom)
    candidates = [
        gpu
        for gpu in catalog
        if gpu.memory_bytes >= need_memory_bytes * (1 + headroom)
        and gpu.memory_bandwidth_bytes_per_second
        >= need_bandwidth_bytes_per_second * (1 + headroom)
    ]
    if not candidates:
        return None
    return min(candidates, key=lambda gpu: (gpu.rent_usd_per_hour, gpu.memory_bytes, gpu.id))
