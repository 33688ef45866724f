"""Simulated processes and the per-process utilization samples the driver keeps.

A `SimProcess` is a process on a GPU or MIG device; `process_utilization_since` is what
nvmlDeviceGetProcessUtilization answers: one sample per process and second, averaged
over the periods asked for, at most `PROCESS_SAMPLE_BUFFER` back. Pure functions of the
activity source and scenario time; no device state and no pynvml structs here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwatch.simulate.timeline import ActivitySource, average

NO_INSTANCE = 0xFFFFFFFF
"""gpuInstanceId/computeInstanceId of a process on a GPU without MIG."""
PROCESS_SAMPLE_PERIOD_S = 1.0
"""The driver records one process-utilization sample per process every second."""
PROCESS_SAMPLE_BUFFER = 120
"""Process-utilization samples the driver keeps (the last 120 s at one per second)."""


@dataclass(frozen=True, slots=True)
class SimProcess:
    """A process on a GPU or MIG device; times in scenario seconds."""

    pid: int
    name: str
    kind: str
    memory_bytes: int
    start: float
    end: float
    share: float
    memory_visible: bool
    gpu_instance_id: int = NO_INSTANCE
    compute_instance_id: int = NO_INSTANCE
    name_encoding: str = "utf-8"

    def running(self, t: float) -> bool:
        """True while the process exists."""
        return self.start <= t < self.end


@dataclass(frozen=True, slots=True)
class ProcessUtilization:
    """One process-utilization sample (percentages, timestamp in scenario seconds)."""

    pid: int
    tick: float
    sm_percent: int
    mem_percent: int


def memory_busy(dram_bandwidth: float) -> float:
    """Memory-busy time (utilization.memory, 0-1) for a DRAM bandwidth fraction (GPM id 10).

    Two different measures: the share of time the memory was read or written is well
    above the share of peak bandwidth used (a memory-bound kernel at 50 % of peak keeps
    the memory busy ~71 % of the time). Modelled as the square root.
    """
    return min(math.sqrt(max(dram_bandwidth, 0.0)), 1.0)


def process_utilization(
    processes: tuple[SimProcess, ...], source: ActivitySource, tick: float
) -> list[ProcessUtilization]:
    """Samples for the period ending at `tick`: each active process's share of activity.

    Processes with 0 % SM and 0 % memory in the period have no sample, as in NVML.
    """
    start = tick - PROCESS_SAMPLE_PERIOD_S
    alive = [p for p in processes if p.running(start + PROCESS_SAMPLE_PERIOD_S / 2)]
    total_share = sum(p.share for p in alive)
    if total_share <= 0:
        return []
    act = average(source, start, tick)
    samples = []
    for proc in alive:
        fraction = proc.share / total_share
        sm = round(100.0 * act.util * fraction)
        mem = round(100.0 * memory_busy(act.dram) * fraction)
        if sm > 0 or mem > 0:
            samples.append(ProcessUtilization(proc.pid, tick, min(sm, 100), min(mem, 100)))
    return samples


def process_utilization_since(
    processes: tuple[SimProcess, ...], source: ActivitySource, first: int, now: float
) -> list[ProcessUtilization]:
    """What the driver answers at `now` (scenario s) for the periods from number `first` on.

    Period k ends at k * `PROCESS_SAMPLE_PERIOD_S`. One entry per process active in
    one of the periods `first`..now (at most `PROCESS_SAMPLE_BUFFER` back): its SM and
    memory percentages averaged over all those periods (idle ones count as 0), stamped
    with its newest active period. `first` 1 averages the whole buffer, as NVML does
    for lastSeenTimeStamp 0.
    """
    newest = math.floor(now / PROCESS_SAMPLE_PERIOD_S)
    first = max(first, 1, newest - PROCESS_SAMPLE_BUFFER + 1)
    periods = newest - first + 1
    if periods <= 0:
        return []
    totals: dict[int, list[float]] = {}
    k = first
    while k <= newest:
        last = _last_same_period(processes, source, k, newest)
        repeats = last - k + 1
        for sample in process_utilization(processes, source, k * PROCESS_SAMPLE_PERIOD_S):
            entry = totals.setdefault(sample.pid, [0.0, 0.0, 0.0])
            # integer percentages: adding one `repeats` times is exactly this product
            entry[0] += sample.sm_percent * repeats
            entry[1] += sample.mem_percent * repeats
            entry[2] = last * PROCESS_SAMPLE_PERIOD_S
        k = last + 1
    return [
        ProcessUtilization(pid, tick, round(sm / periods), round(mem / periods))
        for pid, (sm, mem, tick) in totals.items()
    ]


def _last_same_period(
    processes: tuple[SimProcess, ...], source: ActivitySource, k: int, newest: int
) -> int:
    """The last period (k..`newest`) whose samples are certainly those of period `k`.

    `process_utilization` for period j depends only on the activity over the period
    and on which processes run at its midpoint. While the source holds the value it has
    at the start of period k (up to its `next_change`) and no process starts or ends, each
    later period is the same one-piece average of the same value, so it gives exactly the
    same samples; the bound on process edges is kept a period short of the edge, so a
    replay over hours costs one `process_utilization` per change, not one per second.
    """
    period = PROCESS_SAMPLE_PERIOD_S
    start = k * period - period
    change = source.next_change(start)
    if change < k * period:
        return k  # the activity changes inside period k: an average of pieces
    last = newest if math.isinf(change) else min(newest, math.floor(change / period))
    while last > k and last * period > change:
        last -= 1
    midpoint = start + period / 2
    for proc in processes:
        for edge in (proc.start, proc.end):
            if midpoint < edge < math.inf:
                last = min(last, math.floor(edge / period) - 1)
    return max(last, k)
