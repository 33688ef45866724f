"""The gpuwatch metric families, rendered from a `FleetSnapshot`.

Pure: `gpuwatch_families(snapshot, options)` yields fresh prometheus-client metric
families each call (no global gauges, no stale series). A value the GPU cannot give
is `None` in the snapshot and its series is left out, never exported as 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch import __version__
from gpuwatch.analysis.activity import activity_source
from gpuwatch.core.snapshot import (
    CLOCK_EVENT_REASONS,
    FleetSnapshot,
    GpuSample,
    MigInstanceSample,
    ProcessSample,
)

GPU_LABELS = ("gpu", "uuid")
POD_LABELS = ("namespace", "pod", "container")


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """What the operator chose to export."""

    per_process_metrics: bool = False


def _gpu_label_values(gpu: GpuSample) -> list[str]:
    return [str(gpu.identity.index), gpu.identity.uuid]


GaugeReader = Callable[[GpuSample], float | int | bool | None]

# (name without prefix, help, reader): one gauge per GPU, absent when the reader gives None.
_GPU_GAUGES: tuple[tuple[str, str, GaugeReader], ...] = (
    (
        "gpu_memory_total_bytes",
        "Frame-buffer memory of the GPU in bytes.",
        lambda g: g.identity.memory_total_bytes,
    ),
    (
        "gpu_memory_used_bytes",
        "Frame-buffer memory in use in bytes (NVML v2: excluding driver-reserved memory).",
        lambda g: g.memory_used_bytes,
    ),
    ("gpu_memory_free_bytes", "Frame-buffer memory free in bytes.", lambda g: g.memory_free_bytes),
    (
        "gpu_memory_reserved_bytes",
        "Frame-buffer memory reserved by the driver in bytes.",
        lambda g: g.memory_reserved_bytes,
    ),
    (
        "gpu_utilization_ratio",
        "Fraction of the last sample period in which a kernel ran "
        "(NVML GPU utilization; not SM activity).",
        lambda g: g.utilization_ratio,
    ),
    (
        "gpu_memory_busy_ratio",
        "Fraction of the last sample period in which device memory was read or written.",
        lambda g: g.memory_busy_ratio,
    ),
    (
        "gpu_sm_active_ratio",
        "Fraction of SMs busy (GPM SM utilization, Hopper and newer).",
        lambda g: g.sm_active_ratio,
    ),
    (
        "gpu_sm_occupancy_ratio",
        "Resident warps over the theoretical maximum (GPM).",
        lambda g: g.sm_occupancy_ratio,
    ),
    (
        "gpu_dram_bandwidth_ratio",
        "DRAM bandwidth used over the peak (GPM).",
        lambda g: g.dram_bandwidth_ratio,
    ),
    (
        "gpu_tensor_active_ratio",
        "Fraction of time any tensor pipe was active (GPM).",
        lambda g: g.tensor_active_ratio,
    ),
    ("gpu_power_watts", "Power draw in watts.", lambda g: g.power_watts),
    (
        "gpu_power_limit_watts",
        "Enforced power limit in watts.",
        lambda g: g.power_limit_watts,
    ),
    (
        "gpu_temperature_celsius",
        "GPU core temperature in degrees Celsius.",
        lambda g: g.temperature_celsius,
    ),
    (
        "gpu_remapped_rows_pending",
        "1 when a row remapping is pending (needs a GPU reset).",
        lambda g: g.remapped_rows_pending,
    ),
    (
        "gpu_remapped_rows_failure",
        "1 when a row remapping has failed.",
        lambda g: g.remapped_rows_failure,
    ),
    ("gpu_mig_enabled", "1 when MIG mode is enabled.", lambda g: g.mig_enabled),
)

_GPU_COUNTERS: tuple[tuple[str, str, GaugeReader], ...] = (
    (
        "gpu_energy_joules",
        "Energy consumed since the driver loaded, in joules.",
        lambda g: g.energy_joules_total,
    ),
    (
        "gpu_ecc_uncorrected_errors",
        "Uncorrected ECC errors since the driver loaded.",
        lambda g: g.ecc_uncorrected_errors_total,
    ),
    (
        "gpu_ecc_corrected_errors",
        "Corrected ECC errors since the driver loaded.",
        lambda g: g.ecc_corrected_errors_total,
    ),
)


def gpuwatch_families(snapshot: FleetSnapshot | None, options: ExportOptions) -> Iterator[Metric]:
    """Every gpuwatch_* family for one snapshot (only build info before the first one)."""
    build = InfoMetricFamily("gpuwatch_build", "gpuwatch version.", labels=("version",))
    build.add_metric([__version__], {})
    yield build
    if snapshot is None:
        return
    yield from _collector_families(snapshot)
    gpus = snapshot.gpus
    info = InfoMetricFamily(
        "gpuwatch_gpu",
        "Identity of each GPU; join on uuid.",
        labels=("gpu", "uuid", "name", "pci_bus_id", "serial", "driver", "cuda_driver", "mig_mode"),
    )
    up = GaugeMetricFamily(
        "gpuwatch_gpu_up",
        "1 when the GPU answered this tick, 0 when it is lost or NVML failed.",
        labels=GPU_LABELS,
    )
    for gpu in gpus:
        ident = gpu.identity
        mig = "" if gpu.mig_enabled is None else ("enabled" if gpu.mig_enabled else "disabled")
        info.add_metric(
            [
                str(ident.index),
                ident.uuid,
                ident.name,
                ident.pci_bus_id,
                ident.serial or "",
                snapshot.driver.driver_version or "",
                snapshot.driver.cuda_driver_version or "",
                mig,
            ],
            {},
        )
        up.add_metric(_gpu_label_values(gpu), 1.0 if gpu.up else 0.0)
    yield info
    yield up
    live = [g for g in gpus if g.up]
    for name, help_text, read in _GPU_GAUGES:
        yield from _per_gpu(
            GaugeMetricFamily(f"gpuwatch_{name}", help_text, labels=GPU_LABELS), live, read
        )
    for name, help_text, read in _GPU_COUNTERS:
        yield from _per_gpu(
            CounterMetricFamily(f"gpuwatch_{name}", help_text, labels=GPU_LABELS), live, read
        )
    yield from _activity_source_family(live)
    yield from _clock_families(live)
    yield from _io_families(live)
    yield from _xid_family(gpus)
    yield from _process_families(live, options)
    yield from _mig_families(live)


def _per_gpu(
    family: GaugeMetricFamily | CounterMetricFamily, gpus: list[GpuSample], read: GaugeReader
) -> Iterator[Metric]:
    for gpu in gpus:
        value = read(gpu)
        if value is not None:
            family.add_metric(_gpu_label_values(gpu), float(value))
    if family.samples:
        yield family


def _collector_families(snapshot: FleetSnapshot) -> Iterator[Metric]:
    success = GaugeMetricFamily(
        "gpuwatch_collector_success",
        "1 when the collector's last run succeeded.",
        labels=("collector",),
    )
    duration = GaugeMetricFamily(
        "gpuwatch_collector_duration_seconds",
        "How long the collector's last run took, in seconds.",
        labels=("collector",),
    )
    for result in snapshot.collectors:
        success.add_metric([result.name], 1.0 if result.success else 0.0)
        duration.add_metric([result.name], result.duration_seconds)
    yield success
    yield duration
    stamp = GaugeMetricFamily(
        "gpuwatch_last_sample_timestamp_seconds",
        "When the exported snapshot was taken, Unix time in seconds.",
    )
    stamp.add_metric([], snapshot.timestamp_seconds)
    yield stamp


def _activity_source_family(gpus: list[GpuSample]) -> Iterator[Metric]:
    source = GaugeMetricFamily(
        "gpuwatch_gpu_activity_source_info",
        "Where the GPU's activity signal (the waste analysis's) comes from, value 1: "
        "gpm_sm_active (GPM, Hopper and newer), kernel_busy (NVML utilization, older "
        "parts) or mig_gpm_sm_active (the busiest MIG GPU instance's GPM).",
        labels=(*GPU_LABELS, "source"),
    )
    for gpu in gpus:
        name = activity_source(gpu)
        if name is not None:
            source.add_metric([*_gpu_label_values(gpu), name], 1.0)
    if source.samples:
        yield source


def _clock_families(gpus: list[GpuSample]) -> Iterator[Metric]:
    clocks = GaugeMetricFamily(
        "gpuwatch_gpu_clock_hertz", "Current clock in hertz.", labels=(*GPU_LABELS, "clock")
    )
    reasons = GaugeMetricFamily(
        "gpuwatch_gpu_throttle_reason_active",
        "1 for each clocks-event (throttle) reason in effect, 0 for the others.",
        labels=(*GPU_LABELS, "reason"),
    )
    for gpu in gpus:
        labels = _gpu_label_values(gpu)
        if gpu.clock_sm_hertz is not None:
            clocks.add_metric([*labels, "sm"], gpu.clock_sm_hertz)
        if gpu.clock_memory_hertz is not None:
            clocks.add_metric([*labels, "memory"], gpu.clock_memory_hertz)
        if gpu.throttle_reasons is not None:
            for reason in CLOCK_EVENT_REASONS.values():
                reasons.add_metric(
                    [*labels, reason], 1.0 if reason in gpu.throttle_reasons else 0.0
                )
    for family in (clocks, reasons):
        if family.samples:
            yield family


def _io_families(gpus: list[GpuSample]) -> Iterator[Metric]:
    pcie = GaugeMetricFamily(
        "gpuwatch_gpu_pcie_bytes_per_second",
        "PCIe throughput in bytes per second.",
        labels=(*GPU_LABELS, "direction"),
    )
    nvlink = CounterMetricFamily(
        "gpuwatch_gpu_nvlink_bytes",
        "NVLink data bytes since the driver loaded, all links.",
        labels=(*GPU_LABELS, "direction"),
    )
    for gpu in gpus:
        labels = _gpu_label_values(gpu)
        for family, direction, value in (
            (pcie, "tx", gpu.pcie_tx_bytes_per_second),
            (pcie, "rx", gpu.pcie_rx_bytes_per_second),
            (nvlink, "tx", gpu.nvlink_tx_bytes_total),
            (nvlink, "rx", gpu.nvlink_rx_bytes_total),
        ):
            if value is not None:
                family.add_metric([*labels, direction], value)
    for family in (pcie, nvlink):
        if family.samples:
            yield family


def _xid_family(gpus: tuple[GpuSample, ...]) -> Iterator[Metric]:
    xid = CounterMetricFamily(
        "gpuwatch_gpu_xid_errors", "XID critical errors seen, by code.", labels=(*GPU_LABELS, "xid")
    )
    for gpu in gpus:
        for code, count in gpu.xid_errors_total:
            xid.add_metric([*_gpu_label_values(gpu), str(code)], float(count))
    if xid.samples:
        yield xid


def _instance_id(value: int | None) -> str:
    return "" if value is None else str(value)


def _process_labels(gpu: GpuSample, proc: ProcessSample) -> list[str]:
    pod = proc.pod
    return [
        *_gpu_label_values(gpu),
        str(proc.pid),
        proc.name,
        _instance_id(proc.gpu_instance_id),
        _instance_id(proc.compute_instance_id),
        pod.namespace if pod else "",
        pod.pod if pod else "",
        pod.container if pod else "",
    ]


def _process_families(gpus: list[GpuSample], options: ExportOptions) -> Iterator[Metric]:
    count = GaugeMetricFamily(
        "gpuwatch_gpu_processes", "Processes running on the GPU.", labels=GPU_LABELS
    )
    # gpu_instance_id / compute_instance_id: the MIG instance the process runs on ("" without MIG)
    labels = (
        *GPU_LABELS,
        "pid",
        "process_name",
        "gpu_instance_id",
        "compute_instance_id",
        *POD_LABELS,
    )
    memory = GaugeMetricFamily(
        "gpuwatch_process_memory_used_bytes",
        "GPU memory used by the process in bytes.",
        labels=labels,
    )
    sm = GaugeMetricFamily(
        "gpuwatch_process_sm_utilization_ratio",
        "The process's share of SM time in NVML's newest sample for it "
        "(held up to 10 s; absent without one).",
        labels=labels,
    )
    for gpu in gpus:
        if gpu.processes is None:
            continue
        count.add_metric(_gpu_label_values(gpu), float(len(gpu.processes)))
        if not options.per_process_metrics:
            continue
        for proc in gpu.processes:
            values = _process_labels(gpu, proc)
            if proc.memory_used_bytes is not None:
                memory.add_metric(values, float(proc.memory_used_bytes))
            if proc.sm_utilization_ratio is not None:
                sm.add_metric(values, proc.sm_utilization_ratio)
    for family in (count, memory, sm):
        if family.samples:
            yield family


_MIG_GAUGES: tuple[tuple[str, str, Callable[[MigInstanceSample], float | int | None]], ...] = (
    ("memory_total_bytes", "Memory of the MIG instance in bytes.", lambda m: m.memory_total_bytes),
    (
        "memory_used_bytes",
        "Memory used in the MIG instance in bytes.",
        lambda m: m.memory_used_bytes,
    ),
    (
        "sm_active_ratio",
        "Fraction of the GPU instance's SMs busy (GPM per GPU instance).",
        lambda m: m.sm_active_ratio,
    ),
    (
        "sm_occupancy_ratio",
        "Resident warps over the theoretical maximum in the GPU instance (GPM).",
        lambda m: m.sm_occupancy_ratio,
    ),
    (
        "tensor_active_ratio",
        "Fraction of time any tensor pipe of the GPU instance was active (GPM).",
        lambda m: m.tensor_active_ratio,
    ),
    (
        "dram_bandwidth_ratio",
        "DRAM bandwidth used by the GPU instance over the peak (GPM per GPU instance).",
        lambda m: m.dram_bandwidth_ratio,
    ),
)


def _mig_families(gpus: list[GpuSample]) -> Iterator[Metric]:
    labels = (*GPU_LABELS, "mig_uuid", "gpu_instance_id", "compute_instance_id")
    families = [
        (GaugeMetricFamily(f"gpuwatch_mig_{name}", help_text, labels=labels), read)
        for name, help_text, read in _MIG_GAUGES
    ]
    for gpu in gpus:
        for inst in gpu.mig_instances:
            values = [
                *_gpu_label_values(gpu),
                inst.uuid,
                str(inst.gpu_instance_id),
                str(inst.compute_instance_id),
            ]
            for family, read in families:
                value = read(inst)
                if value is not None:
                    family.add_metric(values, float(value))
    for family, _ in families:
        if family.samples:
            yield family


GPUWATCH_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gpuwatch_build", "info"),
    ("gpuwatch_collector_success", "gauge"),
    ("gpuwatch_collector_duration_seconds", "gauge"),
    ("gpuwatch_last_sample_timestamp_seconds", "gauge"),
    ("gpuwatch_gpu", "info"),
    ("gpuwatch_gpu_up", "gauge"),
    *((f"gpuwatch_{name}", "gauge") for name, _, _ in _GPU_GAUGES),
    *((f"gpuwatch_{name}", "counter") for name, _, _ in _GPU_COUNTERS),
    ("gpuwatch_gpu_activity_source_info", "gauge"),
    ("gpuwatch_gpu_clock_hertz", "gauge"),
    ("gpuwatch_gpu_throttle_reason_active", "gauge"),
    ("gpuwatch_gpu_pcie_bytes_per_second", "gauge"),
    ("gpuwatch_gpu_nvlink_bytes", "counter"),
    ("gpuwatch_gpu_xid_errors", "counter"),
    ("gpuwatch_gpu_processes", "gauge"),
    ("gpuwatch_process_memory_used_bytes", "gauge"),
    ("gpuwatch_process_sm_utilization_ratio", "gauge"),
    *((f"gpuwatch_mig_{name}", "gauge") for name, _, _ in _MIG_GAUGES),
)
"""(name, type) of every family `gpuwatch_families` may yield, as prometheus-client
names them (a counter without `_total`): the export registry's `describe()`."""
