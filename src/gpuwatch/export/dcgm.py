"""dcgm-exporter-compatible families (`[exporter] dcgm_compat = true`).

Names, units and label names follow dcgm-exporter's default counters so its Grafana
dashboards work unchanged: utilization in percent, frame buffer in MiB, clocks in
MHz, energy in mJ, profiling fields as ratios. Only these families carry a
`Hostname` label, because dcgm-exporter's dashboards select on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.snapshot import FleetSnapshot, GpuSample
from gpuwatch.units import MIB

DCGM_LABELS = (
    "gpu",
    "UUID",
    "pci_bus_id",
    "device",
    "modelName",
    "Hostname",
    "namespace",
    "pod",
    "container",
)

Reader = Callable[[GpuSample], float | None]


def _scaled(read: Callable[[GpuSample], float | int | None], factor: float) -> Reader:
    def reader(gpu: GpuSample) -> float | None:
        value = read(gpu)
        return None if value is None else float(value) * factor

    return reader


def _free_mib(gpu: GpuSample) -> float | None:
    return None if gpu.memory_free_bytes is None else gpu.memory_free_bytes / MIB


def _last_xid(gpu: GpuSample) -> float | None:
    """The most recent XID (dcgm-exporter reports 0 until one happens)."""
    return 0.0 if gpu.last_xid is None else float(gpu.last_xid)


# (name, help, reader)
_FIELDS: tuple[tuple[str, str, Reader], ...] = (
    (
        "DCGM_FI_DEV_GPU_UTIL",
        "GPU utilization (in %).",
        _scaled(lambda g: g.utilization_ratio, 100.0),
    ),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "Memory utilization (in %).",
        _scaled(lambda g: g.memory_busy_ratio, 100.0),
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB).",
        _scaled(lambda g: g.memory_used_bytes, 1 / MIB),
    ),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", _free_mib),
    (
        "DCGM_FI_DEV_FB_RESERVED",
        "Framebuffer memory reserved (in MiB).",
        _scaled(lambda g: g.memory_reserved_bytes, 1 / MIB),
    ),
    (
        "DCGM_FI_DEV_SM_CLOCK",
        "SM clock frequency (in MHz).",
        _scaled(lambda g: g.clock_sm_hertz, 1e-6),
    ),
    (
        "DCGM_FI_DEV_MEM_CLOCK",
        "Memory clock frequency (in MHz).",
        _scaled(lambda g: g.clock_memory_hertz, 1e-6),
    ),
    (
        "DCGM_FI_DEV_GPU_TEMP",
        "GPU temperature (in C).",
        _scaled(lambda g: g.temperature_celsius, 1.0),
    ),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", _scaled(lambda g: g.power_watts, 1.0)),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ).",
        _scaled(lambda g: g.energy_joules_total, 1000.0),
    ),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", _last_xid),
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "Ratio of time the graphics engine is active.",
        lambda g: g.utilization_ratio,
    ),
    (
        "DCGM_FI_PROF_SM_ACTIVE",
        "The ratio of cycles an SM has at least 1 warp assigned.",
        lambda g: g.sm_active_ratio,
    ),
    (
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "The ratio of number of warps resident on an SM.",
        lambda g: g.sm_occupancy_ratio,
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        lambda g: g.tensor_active_ratio,
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "Ratio of cycles the device memory interface is active.",
        lambda g: g.dram_bandwidth_ratio,
    ),
)


def dcgm_families(snapshot: FleetSnapshot | None, hostname: str) -> Iterator[Metric]:
    """The DCGM family set for every GPU that is up.

    `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` is a counter in dcgm-exporter, exposed
    there without a `_total` suffix; prometheus-client would add one to a counter, so
    it is exposed untyped-as-gauge under the exact dcgm name that dashboards query.
    """
    if snapshot is None:
        return
    live = [g for g in snapshot.gpus if g.up]
    for name, help_text, read in _FIELDS:
        family = GaugeMetricFamily(name, help_text, labels=DCGM_LABELS)
        for gpu in live:
            value = read(gpu)
            if value is not None:
                family.add_metric(_labels(gpu, hostname), value)
        if family.samples:
            yield family


def _labels(gpu: GpuSample, hostname: str) -> list[str]:
    ident = gpu.identity
    pod = gpu.pod
    return [
        str(ident.index),
        ident.uuid,
        ident.pci_bus_id,
        f"nvidia{ident.index}",
        ident.name,
        hostname,
        pod.namespace if pod else "",
        pod.pod if pod else "",
        pod.container if pod else "",
    ]
