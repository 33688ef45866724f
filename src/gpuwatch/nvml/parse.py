"""Pure functions that turn raw NVML values into base units. Tested on literals.

Nothing here calls NVML; every function takes plain values or the attributes of a
struct and returns bytes, seconds, watts, joules, hertz or ratios 0-1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuwatch.core.snapshot import CLOCK_EVENT_REASONS
from gpuwatch.core.units import KIB, MIB


def decode_clock_event_reasons(mask: int) -> tuple[str, ...]:
    """Names of the set bits of a clocks-event (throttle) reasons bitmask, in bit order."""
    return tuple(name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit)


def percent_to_ratio(percent: float | None) -> float | None:
    """NVML percent (0-100) to a ratio (0-1), clamped; None stays None."""
    if percent is None or not math.isfinite(percent):
        return None  # GPM can answer NaN: that is no reading, not a value
    return min(max(float(percent), 0.0), 100.0) / 100.0


def milliwatts_to_watts(milliwatts: int) -> float:
    """NVML power (mW) to watts."""
    return milliwatts / 1000.0


def millijoules_to_joules(millijoules: int) -> float:
    """NVML energy (mJ since driver load) to joules."""
    return millijoules / 1000.0


def megahertz_to_hertz(megahertz: int) -> float:
    """NVML clock (MHz) to hertz."""
    return megahertz * 1_000_000.0


def kilobytes_per_second_to_bytes(kilobytes_per_second: int) -> float:
    """NVML PCIe throughput (KB/s; NVML's KB is 1024 bytes) to bytes per second."""
    return kilobytes_per_second * float(KIB)


def mebibytes_per_second_to_bytes(mebibytes_per_second: float) -> float:
    """GPM PCIe/NVLink rate (MiB/s) to bytes per second."""
    return mebibytes_per_second * MIB


def text(value: str | bytes) -> str:
    """NVML strings arrive as str (decoded by pynvml) or bytes (raw struct fields)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def escaped_text(raw: bytes) -> str:
    """Bytes that are not valid UTF-8 as text: each invalid byte becomes `\\xNN`.

    Used for process names (`nvmlSystemGetProcessName` returns whatever bytes the
    process's command line has); the valid parts stay readable.
    """
    return raw.decode("utf-8", "backslashreplace")


@dataclass(frozen=True, slots=True)
class MemoryReading:
    """Frame-buffer memory in bytes; `reserved` is None from the v1 call."""

    total_bytes: int
    used_bytes: int
    free_bytes: int
    reserved_bytes: int | None


def parse_memory(info: Any) -> MemoryReading:
    """Read a `c_nvmlMemory_t` (v1) or `c_nvmlMemory_v2_t` (with `reserved`).

    v1 `used` includes driver-reserved memory; v2 `used` excludes it. Both report what
    they say: `memory_used_bytes` follows the call that succeeded.
    """
    reserved = getattr(info, "reserved", None)
    return MemoryReading(
        total_bytes=int(info.total),
        used_bytes=int(info.used),
        free_bytes=int(info.free),
        reserved_bytes=None if reserved is None else int(reserved),
    )


@dataclass(frozen=True, slots=True)
class RawProcess:
    """One entry of the running-process lists, merged across compute and graphics."""

    pid: int
    kind: str
    memory_used_bytes: int | None
    gpu_instance_id: int | None
    compute_instance_id: int | None


_NO_INSTANCE = 0xFFFFFFFF


def merge_processes(compute: Iterable[Any], graphics: Iterable[Any]) -> tuple[RawProcess, ...]:
    """Merge compute and graphics process lists by pid, summing memory.

    `usedGpuMemory` may be None (not available); a sum with None stays None only when
    every part is None. Returned in pid order.
    """
    merged: dict[int, RawProcess] = {}
    for kind, entries in (("compute", compute), ("graphics", graphics)):
        for entry in entries:
            pid = int(entry.pid)
            used = entry.usedGpuMemory
            used_bytes = None if used is None else int(used)
            gi = getattr(entry, "gpuInstanceId", _NO_INSTANCE)
            ci = getattr(entry, "computeInstanceId", _NO_INSTANCE)
            previous = merged.get(pid)
            if previous is not None:
                # the same pid twice: in both lists, or once per MIG instance in one list
                both = previous.kind not in (kind, "compute+graphics")
                merged[pid] = RawProcess(
                    pid,
                    "compute+graphics" if both else previous.kind,
                    _add_optional(previous.memory_used_bytes, used_bytes),
                    previous.gpu_instance_id,
                    previous.compute_instance_id,
                )
                continue
            merged[pid] = RawProcess(
                pid=pid,
                kind=kind,
                memory_used_bytes=used_bytes,
                gpu_instance_id=None if gi in (None, _NO_INSTANCE) else int(gi),
                compute_instance_id=None if ci in (None, _NO_INSTANCE) else int(ci),
            )
    return tuple(merged[pid] for pid in sorted(merged))


def _add_optional(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def latest_process_utilization(
    samples: Sequence[Any], last_seen_us: int
) -> tuple[dict[int, float], int]:
    """Newest SM utilization ratio per pid from `c_nvmlProcessUtilizationSample_t`s.

    Returns (ratio by pid, the new last-seen timestamp in µs). Samples not newer than
    `last_seen_us` are ignored; the timestamp only moves forward.
    """
    newest: dict[int, tuple[int, float]] = {}
    last = last_seen_us
    for sample in samples:
        stamp = int(sample.timeStamp)
        if stamp <= last_seen_us:
            continue
        last = max(last, stamp)
        pid = int(sample.pid)
        ratio = percent_to_ratio(sample.smUtil)
        if ratio is None:
            continue
        if pid not in newest or stamp >= newest[pid][0]:
            newest[pid] = (stamp, ratio)
    return {pid: ratio for pid, (_, ratio) in newest.items()}, last


PROCESS_UTILIZATION_HOLD_SECONDS = 10.0
"""How long a process's last per-process SM sample stands for it when NVML has none newer.

NVML records a process-utilization sample only for a process that ran in the period,
and a tick that comes before the driver's next sample gets NotFound; within this hold
the last sample is reported, after it the value is absent (None), never a made-up 0.
"""


def held_process_utilization(
    held: Mapping[int, tuple[float, float]],
    fresh: Mapping[int, float],
    now: float,
    hold_seconds: float = PROCESS_UTILIZATION_HOLD_SECONDS,
) -> dict[int, tuple[float, float]]:
    """Merge new per-pid SM ratios received at `now` (seconds) into the held ones.

    `held` maps pid to (ratio, seconds it was received); the result has the same shape,
    with `fresh` taking over and entries older than `hold_seconds` dropped.
    """
    merged = {pid: entry for pid, entry in held.items() if now - entry[1] <= hold_seconds}
    merged.update({pid: (ratio, now) for pid, ratio in fresh.items()})
    return merged


_FIELD_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
"""`c_nvmlValue_t` member by NVML_VALUE_TYPE_* (0 double ... 6 unsigned short)."""


def field_values(values: Sequence[Any], success_code: int = 0) -> list[tuple[int, float | None]]:
    """Each `c_nvmlFieldValue_t` as (its own nvmlReturn, its value or None).

    The value is read from the union member its `valueType` names (an int for the
    integer types, a float for double); None when the entry did not succeed or the
    type is unknown.
    """
    out: list[tuple[int, float | None]] = []
    for entry in values:
        code = int(entry.nvmlReturn)
        value_type = int(entry.valueType)
        if code != success_code or not 0 <= value_type < len(_FIELD_VALUE_MEMBERS):
            out.append((code, None))
            continue
        out.append((code, getattr(entry.value, _FIELD_VALUE_MEMBERS[value_type])))
    return out


def kibibytes_to_bytes(kibibytes: float) -> float:
    """KiB (NVML's NVLink throughput counters) to bytes."""
    return float(kibibytes) * KIB


def gpm_values(metrics: Sequence[Any], count: int, success_code: int = 0) -> dict[int, float]:
    """GPM results as {metric id: value} for the entries whose `nvmlReturn` is success."""
    return {
        int(metrics[i].metricId): float(metrics[i].value)
        for i in range(count)
        if int(metrics[i].nvmlReturn) == success_code
    }


def format_cuda_version(encoded: int) -> str:
    """NVML's CUDA driver version integer (e.g. 12040) as `12.4`."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


def pid_names(names: Mapping[int, str], pids: Iterable[int]) -> dict[int, str]:
    """Keep only the cached names of pids still present (drops exited processes)."""
    return {pid: names[pid] for pid in pids if pid in names}
