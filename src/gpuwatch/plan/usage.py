"""Each GPU's use over the lookback, from any source, and the units the plan places.

A source (the local history, `plan/local.py`; a Prometheus-compatible API,
`plan/prometheus.py`) reduces its samples to one `GpuUsage` per GPU; `workload_needs`
turns those into `WorkloadNeed`s: one per GPU, or one per multi-GPU job: the GPUs of one
host that one pod held *at the same time* (the same hour) are one unit, never split;
GPUs linked that way over the lookback (a job whose pod was rescheduled onto other GPUs)
stay one unit, which needs the most GPUs one pod held at once. No I/O here.

What a unit did over the lookback (`activity_of`): busy when any of its time was classed
busy or underutilized; else held when any was held (memory kept, no work); else idle
when any was idle; else unknown (only pending time). Its memory need is the largest over
its GPUs of the need the agent exported with its basis (declared, measured from the
inference server, or observed), else of NVML's memory used, each the `robust_peak` of
its hourly peaks (one bad sample cannot move it), else unknown (None: the lookback has
neither; the plan keeps such a unit on its GPU); a need above its GPU's memory is a
measurement error (`WorkloadNeed.memory_error_bytes`), never sized from; its activity,
kernel-busy time and DRAM bandwidth the sources' high percentile (`HIGH_PERCENTILE`) of
hourly figures, the largest over its GPUs.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuwatch.core.text import counted
from gpuwatch.plan.model import Activity, NeedBasis, WorkloadNeed
from gpuwatch.sizing import GpuCatalog

HIGH_PERCENTILE = 0.95
"""The percentile of hourly activity and kernel-busy means and hourly DRAM bandwidth peaks
the plan sizes compute and bandwidth on (a workload's busiest hours, not its single
busiest second)."""

_BASES: tuple[NeedBasis, ...] = ("declared", "measured", "observed")

GIB_PER_GB = 2**30 / 1e9
"""A part's marketed "80 GB" read as GiB: an upper bound of NVML's total for every
catalog part (H100 80GB: 81,559 MiB < 80 GiB), so a need above it is above the GPU."""


def robust_peak(hourly_peaks: Iterable[float]) -> float | None:
    """The second-largest hourly peak (the only one with one hour; None without any).

    Memory is sized on a peak (a workload cannot be short of memory for an hour), but one
    bad sample sets the largest hourly peak of its hour only: the second-largest is an
    hour's peak one sample cannot move. A real peak must recur in a second hour of the
    lookback to count; a high quantile over hours (the 95th) would drop a real peak
    lasting up to 5 % of the hours."""
    ordered = sorted((v for v in hourly_peaks if not math.isnan(v)), reverse=True)
    if not ordered:
        return None
    return ordered[1] if len(ordered) > 1 else ordered[0]


@dataclass(frozen=True, slots=True)
class GpuUsage:
    """One GPU over the lookback, as a source read it.

    `state_seconds` maps analysis states (busy, underutilized, idle, held, pending) to the
    seconds spent in each. `need_bytes` is the `robust_peak` of the need the agent
    exported without headroom, on `need_basis`; `observed_peak_bytes` NVML's largest
    memory used.
    `activity_ratio` and `dram_ratio` are high percentiles (0-1) of hourly figures.
    `pods` are 'namespace/pod' names that held or used the GPU.
    """

    host: str
    uuid: str
    name: str  # the NVML name
    gpu_index: int | None
    observed_seconds: float
    state_seconds: Mapping[str, float]
    activity_ratio: float | None
    dram_ratio: float | None
    need_bytes: float | None
    need_basis: NeedBasis | None
    observed_peak_bytes: float | None
    price_usd_per_hour: float | None
    pods: tuple[str, ...] = ()
    need_p95_bytes: float | None = None
    pod_hours: tuple[tuple[float, tuple[str, ...]], ...] = ()
    """(hour start epoch s, the pods that held the GPU in that hour) for each hour that
    names pods: which GPUs one pod held at the same time. Empty: `pods` at one time."""
    observed_need_bytes: float | None = None
    """`robust_peak` of NVML's hourly memory peaks: the need on the observed basis (None:
    `observed_peak_bytes`, the largest, stands in)."""
    dra: bool = False
    """A pod held the GPU through a DRA claim of NVIDIA's driver (`gpu.nvidia.com`)."""
    kernel_busy_ratio: float | None = None
    """The `HIGH_PERCENTILE` of hourly mean kernel-busy time (NVML utilization.gpu, 0-1):
    what adds up on a time-sliced GPU. None: not recorded (history before schema 9)."""


def percentile(values: Iterable[float], q: float) -> float | None:
    """The `q` quantile (0-1) of `values` by linear interpolation, as PromQL's
    `quantile_over_time` computes it; None without values."""
    ordered = sorted(v for v in values if not math.isnan(v))
    if not ordered:
        return None
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def activity_of(state_seconds: Mapping[str, float]) -> Activity:
    """What a GPU did over the lookback (module docstring)."""
    if state_seconds.get("busy", 0.0) > 0:
        return "busy"
    if state_seconds.get("underutilized", 0.0) > 0:
        return "underutilized"
    if state_seconds.get("held", 0.0) > 0:
        return "held"
    if state_seconds.get("idle", 0.0) > 0:
        return "idle"
    return "unknown"


def basis_of(bases: Iterable[str | None]) -> NeedBasis | None:
    """The strongest basis seen: declared, then measured, then observed."""
    seen = set(bases)
    return next((basis for basis in _BASES if basis in seen), None)


def _namespace(pods: Sequence[str]) -> str | None:
    spaces = Counter(pod.split("/", 1)[0] for pod in pods if "/" in pod)
    if not spaces:
        return None
    return sorted(spaces.items(), key=lambda item: (-item[1], item[0]))[0][0]


def _label(pods: Sequence[str], usage: Sequence[GpuUsage]) -> str:
    if pods:
        return " + ".join(pods)
    first = usage[0]
    where = f"GPU {first.gpu_index}" if first.gpu_index is not None else first.uuid
    gpus = "" if len(usage) == 1 else f" (+{counted(len(usage) - 1, 'GPU')})"
    return f"{first.host} {where}{gpus}"


class _Links:
    """Union-find over GPU uuids: the GPUs one pod held at the same time."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.width: dict[str, int] = {}  # root -> most GPUs one pod held at once

    def root(self, uuid: str) -> str:
        parent = self.parent.setdefault(uuid, uuid)
        while parent != uuid:
            uuid, parent = parent, self.parent.setdefault(parent, parent)
        return uuid

    def join(self, uuids: set[str]) -> None:
        roots = sorted({self.root(u) for u in uuids})
        width = max([len(uuids), *(self.width.get(r, 1) for r in roots)])
        for other in roots[1:]:
            self.parent[other] = roots[0]
            self.width.pop(other, None)
        self.width[roots[0]] = width


def _held_together(usages: Sequence[GpuUsage]) -> _Links:
    """Link the GPUs of one host that one pod held in the same hour (a usage without
    `pod_hours` holds its `pods` at one time)."""
    holders: dict[tuple[str, float | None, str], set[str]] = defaultdict(set)
    for usage in usages:
        hours = usage.pod_hours or ((None, usage.pods),)
        for hour, pods in hours:
            for pod in pods:
                holders[(usage.host, hour, pod)].add(usage.uuid)
    links = _Links()
    for uuids in holders.values():
        if len(uuids) > 1:
            links.join(uuids)
    return links


def _groups(usages: Sequence[GpuUsage]) -> list[tuple[list[GpuUsage], int]]:
    """GPUs grouped into units with the GPUs each needs: the GPUs of one host linked by a
    pod that held several of them at the same time (one multi-GPU job, also when its pod
    was rescheduled onto other GPUs), needing the most GPUs one pod held at once."""
    links = _held_together(usages)
    by_root: dict[str, list[GpuUsage]] = defaultdict(list)
    for usage in usages:
        by_root[links.root(usage.uuid) if usage.uuid in links.parent else usage.uuid].append(usage)
    units = [
        (
            sorted(group, key=lambda u: (u.gpu_index is None, u.gpu_index, u.uuid)),
            links.width.get(root, 1),
        )
        for root, group in by_root.items()
    ]
    return sorted(
        units,
        key=lambda unit: (
            unit[0][0].host,
            unit[0][0].gpu_index is None,
            unit[0][0].gpu_index,
            unit[0][0].uuid,
        ),
    )


def _max(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def workload_needs(usages: Sequence[GpuUsage], catalog: GpuCatalog) -> list[WorkloadNeed]:
    """The units the plan places, one per GPU or multi-GPU job (module docstring)."""
    needs = []
    for group, width in _groups(usages):
        first = group[0]
        pods = tuple(sorted({pod for usage in group for pod in usage.pods}))
        states: dict[str, float] = defaultdict(float)
        for usage in group:
            for state, seconds in usage.state_seconds.items():
                states[state] += seconds
        activity = activity_of(states)
        basis = basis_of(u.need_basis for u in group if u.need_bytes is not None)
        if basis is not None:
            memory = _max(u.need_bytes for u in group if u.need_basis == basis)
        else:
            memory = _max(
                u.observed_peak_bytes if u.observed_need_bytes is None else u.observed_need_bytes
                for u in group
            )
            basis = "observed" if memory is not None else None
        spec = catalog.match_nvml_name(first.name)
        error = None
        if memory is not None and spec is not None and memory > spec.memory_bytes * GIB_PER_GB:
            error, memory, basis = memory, None, None  # no GPU of its model holds it
        dram = _max(u.dram_ratio for u in group)
        rent = None if spec is None else spec.rent_usd_per_hour
        prices = [rent if u.price_usd_per_hour is None else u.price_usd_per_hour for u in group]
        price = sum(p for p in prices if p is not None)
        needs.append(
            WorkloadNeed(
                key=",".join(sorted(u.uuid for u in group)),
                label=_label(pods, group),
                host=first.host,
                gpu_uuids=tuple(u.uuid for u in group),
                current_gpu_id=None if spec is None else spec.id,
                current_usd_per_hour=price,
                activity=activity,
                memory_bytes=memory,
                memory_basis=basis,
                activity_ratio=_max(u.activity_ratio for u in group),
                bandwidth_bytes_per_second=(
                    None
                    if dram is None or spec is None
                    else dram * spec.memory_bandwidth_bytes_per_second
                ),
                namespace=_namespace(pods),
                pods=pods,
                memory_peak_bytes=_max(u.observed_peak_bytes for u in group),
                held_memory_bytes=_max(u.observed_peak_bytes for u in group)
                if activity == "held"
                else None,
                observed_seconds=max(u.observed_seconds for u in group),
                memory_p95_bytes=_max(u.need_p95_bytes for u in group if u.need_basis == basis),
                gpus_at_once=width if width < len(group) else None,
                memory_error_bytes=error,
                dra=any(u.dra for u in group),
                kernel_busy_ratio=_max(u.kernel_busy_ratio for u in group),
            )
        )
    return needs
