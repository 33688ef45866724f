"""The activity signal of one GPU sample, and which NVML source it comes from.

GPM SM activity (Hopper and newer) where the GPU has it; else NVML's kernel-busy time
(`nvmlDeviceGetUtilizationRates().gpu`: V100, T4, A10G, A100, L4 ... where GPM is
missing; it reads 1.0 with one spinning thread, so it overstates activity); on a
MIG-enabled GPU, where NVML gives neither for the whole GPU, the busiest GPU instance's
GPM SM activity. The exporter names the source per GPU
(`gpuwatch_gpu_activity_source_info`), so a dashboard knows what the states rest on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gpuwatch.core.snapshot import GpuSample

GPM_SM_ACTIVE: Final = "gpm_sm_active"
KERNEL_BUSY: Final = "kernel_busy"
MIG_GPM_SM_ACTIVE: Final = "mig_gpm_sm_active"
ACTIVITY_SOURCES: Final = (GPM_SM_ACTIVE, KERNEL_BUSY, MIG_GPM_SM_ACTIVE)


def activity_signal(gpu: GpuSample) -> tuple[float, str] | None:
    """(activity ratio 0-1, its source) for one sample; None without any signal."""
    if gpu.sm_active_ratio is not None:
        return gpu.sm_active_ratio, GPM_SM_ACTIVE
    if gpu.utilization_ratio is not None:
        return gpu.utilization_ratio, KERNEL_BUSY
    instances = [m.sm_active_ratio for m in gpu.mig_instances if m.sm_active_ratio is not None]
    return (max(instances), MIG_GPM_SM_ACTIVE) if instances else None


def activity_of(gpu: GpuSample) -> float | None:
    """The activity ratio (0-1) the waste analysis uses; None without any signal."""
    signal = activity_signal(gpu)
    return None if signal is None else signal[0]


def dram_bandwidth_ratio_of(gpu: GpuSample) -> float | None:
    """The DRAM bandwidth ratio (0-1) overprovisioning sizes against: GPM's DRAM
    bandwidth, else NVML's memory-busy time; None without either."""
    if gpu.dram_bandwidth_ratio is not None:
        return gpu.dram_bandwidth_ratio
    return gpu.memory_busy_ratio


def activity_source(gpu: GpuSample) -> str | None:
    """Where `activity_of(gpu)` comes from (one of `ACTIVITY_SOURCES`), or None."""
    signal = activity_signal(gpu)
    return None if signal is None else signal[1]


def works_alone(
    gpu: GpuSample, mig_uuid: str | None, held: Sequence[str | None], noise_floor: float
) -> bool:
    """A hold on `gpu` (`mig_uuid`: the MIG device held, None: the whole GPU), among the
    GPU's holds `held` (each one's MIG UUID or None), is the only one of its device and
    that device shows activity above `noise_floor`: the work is the holder's, whatever its
    processes show. Shared by pods' and Slurm jobs' holds."""
    if sum(m == mig_uuid for m in held) != 1:
        return False
    if mig_uuid is None:
        if len(held) != 1:
            return False  # MIG devices of this GPU held by others: not the whole GPU's work
        activity = activity_of(gpu)
    else:
        activity = next((m.sm_active_ratio for m in gpu.mig_instances if m.uuid == mig_uuid), None)
    return activity is not None and activity > noise_floor
