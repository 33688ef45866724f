"""Each GPU's cost split among the Kubernetes pods on it, every tick.

The rule, for one GPU and one tick costing C (price x sampled seconds, as the ledger
charges it):

1. Active fraction a: the activity the waste analysis uses (GPM SM activity, else NVML's
   kernel-busy time, else the busiest MIG instance); without any signal, 1 when a process
   runs and 0 when none does. The *busy* part is C x a, the *idle* part C - busy.
2. The busy part goes to the processes' pods in proportion to their processes' SM
   utilization; when a process has no SM figure (or all read 0), by their memory used;
   when memory is unknown too, by process count. Processes in no pod (or processes NVML
   does not list per process) share it as the GPU's *unattributed* cost.
3. The idle part goes to the pods that hold an allocation of the GPU (the kubelet's
   pod-resources), in proportion to the device IDs each holds (a time-sliced GPU's
   replicas; one per MIG device): that is the pod's *idle cost* ("allocated idle"), what it
   reserved and left unused. A GPU no pod holds keeps its idle part: charged to nobody.

Exactness: every part is rounded down to a multiple of q = 2^(e - 50), where 2^(e-1) <=
C < 2^e, and the GPU's unallocated idle takes what is left. All parts are then multiples
of C's own ulp and no partial sum exceeds C, so the parts add up to C bit for bit in any
order. The rounding is below C x 2^-49 per part and lands in the unallocated idle.

The rule is `split_among`, for any kind of holder: Slurm jobs use it too
(`gpuwatch.cost.jobs`).

Pods' totals live while the pod does: a pod that leaves the node (a fresh kubelet
listing without its allocation, and no process of it) is dropped at once, so its
`gpuwatch_pod_*` series disappear; Prometheus keeps what it scraped. While no fresh
listing is in use (the kubelet down, restarting or slow: `Attribution.fresh` false, the
tick charged to no pod) or the pod view failed, no pod is dropped: its counters hold their
value and never restart from 0 while the agent runs. No I/O here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from gpuwatch.analysis.activity import activity_of
from gpuwatch.core.costs import GpuCostSplit, GpuUnattributedCost, PodCost, PodCostShare
from gpuwatch.core.snapshot import Attribution, GpuAttribution, GpuSample, PodRef, ProcessSample

PodKey = tuple[str, str]  # (namespace, pod)
K = TypeVar("K")  # what weights are grouped by: a PodKey, a PodRef, or None
H = TypeVar("H", bound=tuple[str, ...])  # a holder's key: a PodKey, a Slurm job's (job_id,)

QUANTUM_BITS = 50
"""Parts are multiples of 2^(e - QUANTUM_BITS) for a tick cost below 2^e (see above)."""


def split_gpu_cost(
    gpu: GpuSample, holders: GpuAttribution | None, tick_cost_usd: float
) -> GpuCostSplit:
    """One GPU's tick cost split by the module's rule; `holders`: its allocations."""
    parts = split_among(
        gpu,
        lambda p: None if p.pod is None else (p.pod.namespace, p.pod.pod),
        _holder_weights(holders),
        tick_cost_usd,
    )
    pods = tuple(
        PodCostShare(key[0], key[1], busy, idle) for key, (busy, idle) in parts.shares.items()
    )
    return GpuCostSplit(
        gpu_index=gpu.identity.index,
        uuid=gpu.identity.uuid,
        tick_cost_usd=tick_cost_usd,
        pods=pods,
        unattributed_cost_usd=parts.unattributed_cost_usd,
        unallocated_idle_cost_usd=parts.unallocated_idle_cost_usd,
    )


@dataclass(frozen=True, slots=True)
class HolderSplit(Generic[H]):
    """One GPU's tick cost among holders keyed by H (a pod, a Slurm job): each one's
    (busy, idle) in USD, sorted by key, and the GPU's two unowned parts."""

    shares: dict[H, tuple[float, float]]
    unattributed_cost_usd: float  # busy part of processes of no holder
    unallocated_idle_cost_usd: float  # idle part no holder holds (charged to nobody)


def split_among(
    gpu: GpuSample,
    process_key: Callable[[ProcessSample], H | None],
    holding: Mapping[H | None, float],
    tick_cost_usd: float,
) -> HolderSplit[H]:
    """The module's rule for any kind of holder: the busy part by the processes' weights
    grouped by `process_key` (None: no holder's), the idle part by `holding` weights;
    every part a whole number of quanta, so they sum to `tick_cost_usd` exactly."""
    processes = gpu.processes or ()
    activity = activity_of(gpu)
    if activity is None:
        activity = 1.0 if processes else 0.0
    activity = min(max(activity, 0.0), 1.0)
    busy = tick_cost_usd * activity
    busy_parts = _shares(busy, _weights_by(processes, process_key))
    idle_parts = _shares(tick_cost_usd - busy, holding)
    keys = sorted({k for k in (*busy_parts, *idle_parts) if k is not None})
    wanted = [busy_parts.get(k, 0.0) for k in keys] + [idle_parts.get(k, 0.0) for k in keys]
    wanted.append(busy_parts.get(None, 0.0))
    units, quantum = _quantize(tick_cost_usd, wanted)
    n = len(keys)
    shares = {key: (units[i] * quantum, units[n + i] * quantum) for i, key in enumerate(keys)}
    return HolderSplit(shares, units[2 * n] * quantum, tick_cost_usd - sum(units) * quantum)


def unattributed_split(gpu: GpuSample, tick_cost_usd: float) -> GpuCostSplit:
    """A tick without a fresh pod view (attribution failed, or its listing is stale): all of
    it charged to no pod."""
    identity = gpu.identity
    return GpuCostSplit(identity.index, identity.uuid, tick_cost_usd, (), tick_cost_usd, 0.0)


def _weight_values(processes: Sequence[ProcessSample]) -> Sequence[float | int | None]:
    """Each process's weight in the busy part: SM, else memory, else 1 each."""
    sm = [p.sm_utilization_ratio for p in processes]
    memory = [p.memory_used_bytes for p in processes]
    if processes and all(v is not None for v in sm) and sum(v or 0.0 for v in sm) > 0:
        return sm
    if processes and all(v is not None for v in memory) and sum(v or 0 for v in memory) > 0:
        return memory
    return [1.0] * len(processes)


def _weights_by(
    processes: Sequence[ProcessSample], key: Callable[[ProcessSample], K]
) -> dict[K, float]:
    """The processes' busy-part weights (`_weight_values`) summed by `key`."""
    weights: dict[K, float] = {}
    for process, value in zip(processes, _weight_values(processes), strict=True):
        group = key(process)
        weights[group] = weights.get(group, 0.0) + float(value or 0.0)
    return weights


def container_activity_shares(processes: Sequence[ProcessSample]) -> dict[PodRef | None, float]:
    """Each container's (None: processes in no pod) share of a GPU's activity, 0-1.

    The busy part's rule, per container: its processes' SM utilization over all the GPU's
    processes', else their memory, else their count. The shares sum to 1 (empty without
    processes); the exporter's per-pod DCGM series are the GPU's value times these.
    """
    return _shares(1.0, _weights_by(processes, lambda p: p.pod))


def _holder_weights(holders: GpuAttribution | None) -> dict[PodKey | None, float]:
    """Each holding pod's weight in the idle part: the device IDs it holds (at least 1)."""
    weights: dict[PodKey | None, float] = {}
    for allocation in () if holders is None else holders.allocations:
        key = (allocation.pod.namespace, allocation.pod.pod)
        weights[key] = weights.get(key, 0.0) + max(len(allocation.device_ids), 1)
    return weights


def _shares(amount: float, weights: Mapping[K, float]) -> dict[K, float]:
    """`amount` split in proportion to `weights` (nothing when they sum to 0)."""
    total = sum(weights.values())
    if total <= 0 or amount <= 0:
        return {}
    return {key: amount * weight / total for key, weight in weights.items()}


def _quantize(total: float, wanted: Sequence[float]) -> tuple[list[int], float]:
    """`wanted` rounded down to whole quanta of `total`, trimmed (largest first) so the
    quanta never exceed it. Returns (units per part, the quantum in USD)."""
    if total <= 0 or not wanted:
        return [0] * len(wanted), 1.0
    _, exponent = math.frexp(total)  # total < 2^exponent
    quantum = math.ldexp(1.0, exponent - QUANTUM_BITS)
    cap = math.floor(total / quantum)
    units = [max(math.floor(w / quantum), 0) for w in wanted]
    while sum(units) > cap:
        largest = max(range(len(units)), key=units.__getitem__)
        units[largest] -= min(units[largest], sum(units) - cap)
    return units, quantum


class PodLedger:
    """Totals per pod present and per GPU's unattributed part, fed one split per GPU."""

    def __init__(self) -> None:
        self._pods: dict[PodKey, list[float]] = {}  # cost, idle
        self._unattributed: dict[str, tuple[int, float]] = {}  # uuid: (index, USD)

    def observe(self, splits: Iterable[GpuCostSplit], attribution: Attribution | None) -> None:
        """Add one tick's splits; with a fresh pod view, drop the pods gone from it (a
        failed view, None, or a stale one, without a listing, drops nobody)."""
        charged: set[PodKey] = set()
        for split in splits:
            _, total = self._unattributed.get(split.uuid, (split.gpu_index, 0.0))
            extra = split.unattributed_cost_usd + split.unallocated_idle_cost_usd
            self._unattributed[split.uuid] = (split.gpu_index, total + extra)
            for share in split.pods:
                charged.add((share.namespace, share.pod))
                self._charge((share.namespace, share.pod), share)
        if attribution is not None and attribution.fresh:
            present = _present_pods(attribution) | charged
            for key in [k for k in self._pods if k not in present]:
                del self._pods[key]
            for key in present:
                self._pods.setdefault(key, [0.0, 0.0])

    def _charge(self, key: PodKey, share: PodCostShare) -> None:
        totals = self._pods.setdefault(key, [0.0, 0.0])
        totals[0] += share.busy_cost_usd + share.idle_cost_usd
        totals[1] += share.idle_cost_usd

    def pods(self) -> tuple[PodCost, ...]:
        """Every pod present, by namespace and pod."""
        return tuple(PodCost(k[0], k[1], *self._pods[k]) for k in sorted(self._pods))

    def unattributed(self) -> tuple[GpuUnattributedCost, ...]:
        """Each GPU's cost charged to no pod so far."""
        return tuple(
            GpuUnattributedCost(index, uuid, total)
            for uuid, (index, total) in sorted(self._unattributed.items())
        )


def _present_pods(attribution: Attribution) -> set[PodKey]:
    """Pods holding a GPU or running on one this tick."""
    present = {(a.pod.namespace, a.pod.pod) for g in attribution.gpus for a in g.allocations}
    present |= {(pod.namespace, pod.pod) for g in attribution.gpus for pod, _ in g.unallocated}
    return present
