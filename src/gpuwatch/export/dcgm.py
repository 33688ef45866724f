"""dcgm-exporter-compatible families (`[exporter] dcgm_compat = true`).

Names, units and label names follow dcgm-exporter's default counters
(NVIDIA/dcgm-exporter `etc/default-counters.csv`) so its Grafana dashboards and its
clients (OpenCost) work unchanged: utilization in percent, frame buffer in MiB, clocks in
MHz, energy in mJ, PCIe throughput in KB/s (`DCGM_FI_DEV_PCIE_*_THROUGHPUT`, the older
releases' default) and in bytes/s (`DCGM_FI_PROF_PCIE_*_BYTES`, today's), NVLink
bandwidth in DCGM's KiB/s ÷ 1000, profiling fields as ratios. Only these families carry
a `Hostname` label, because dcgm-exporter's dashboards select on it, and the driver
version label `DCGM_FI_DRIVER_VERSION` (the file's one `label` row; empty when NVML does
not say). Every field of that file that NVML can give is here (tests/
test_dcgm_default_counters.py checks each row against a vendored copy);
`DCGM_FI_DEV_VGPU_LICENSE_STATUS` is not (a vGPU guest's licence, not a GPU's).

Pods: each GPU has one series per family, with `namespace`, `pod`, `container` when one
container holds the whole GPU. A GPU that several containers share (time slicing, or a
pod's process on a GPU it was not allocated) keeps that series with empty pod labels and,
in the two families OpenCost reads per container (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`,
`DCGM_FI_DEV_DEC_UTIL`), gets one more series per container on it: the GPU's value times
the container's share of the GPU's activity (`gpuwatch.cost.pods.
container_activity_shares`, the split the cost engine charges the busy part by; 0 for a
holder that runs nothing). The containers' series sum to the GPU's value, less the share
of processes in no pod; `{container!=""}` selects the per-container view and never sees
a GPU twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.cost.pods import container_activity_shares
from gpuwatch.snapshot import FleetSnapshot, GpuSample, PodRef
from gpuwatch.units import KIB, MIB

DCGM_LABELS = (
    "gpu",
    "UUID",
    "pci_bus_id",
    "device",
    "modelName",
    "Hostname",
    "DCGM_FI_DRIVER_VERSION",
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


def _flag(gpu: GpuSample) -> float | None:
    """DCGM_FI_DEV_ROW_REMAP_FAILURE: 1 when remapping rows has failed."""
    failed = gpu.remapped_rows_failure
    return None if failed is None else float(failed)


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
    (
        "DCGM_FI_DEV_MEMORY_TEMP",
        "Memory temperature (in C).",
        _scaled(lambda g: g.memory_temperature_celsius, 1.0),
    ),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", _scaled(lambda g: g.power_watts, 1.0)),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ).",
        _scaled(lambda g: g.energy_joules_total, 1000.0),
    ),
    (
        "DCGM_FI_DEV_ENC_UTIL",
        "Encoder utilization (in %).",
        _scaled(lambda g: g.encoder_utilization_ratio, 100.0),
    ),
    (
        "DCGM_FI_DEV_DEC_UTIL",
        "Decoder utilization (in %).",
        _scaled(lambda g: g.decoder_utilization_ratio, 100.0),
    ),
    (
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "PCIe TX throughput (in KB/s).",
        _scaled(lambda g: g.pcie_tx_bytes_per_second, 1 / KIB),
    ),
    (
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "PCIe RX throughput (in KB/s).",
        _scaled(lambda g: g.pcie_rx_bytes_per_second, 1 / KIB),
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "The rate of data transmitted over the PCIe bus (in bytes/s).",
        _scaled(lambda g: g.pcie_tx_bytes_per_second, 1.0),
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "The rate of data received over the PCIe bus (in bytes/s).",
        _scaled(lambda g: g.pcie_rx_bytes_per_second, 1.0),
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "Total number of PCIe retries.",
        _scaled(lambda g: g.pcie_replay_errors_total, 1.0),
    ),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "NVLink TX + RX data throughput, all links (in KiB/s / 1000, as DCGM computes it).",
        _scaled(lambda g: g.nvlink_bytes_per_second, 1 / KIB / 1000),
    ),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", _last_xid),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for uncorrectable errors.",
        _scaled(lambda g: g.remapped_rows_uncorrectable, 1.0),
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for correctable errors.",
        _scaled(lambda g: g.remapped_rows_correctable, 1.0),
    ),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed.", _flag),
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


PER_CONTAINER = frozenset({"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_DEC_UTIL"})
"""The families with a series per container on a shared GPU: OpenCost's GPU usage and
GPU info queries (`{container!=""}`, by container, pod and namespace)."""


def dcgm_families(snapshot: FleetSnapshot | None, hostname: str) -> Iterator[Metric]:
    """The DCGM family set for every GPU that is up.

    dcgm-exporter types its counters (energy, PCIe replays, remapped rows) as counters
    without a `_total` suffix; prometheus-client would add one to a counter, so they are
    exposed as gauges under the exact dcgm names that dashboards query.
    """
    if snapshot is None:
        return
    live = [g for g in snapshot.gpus if g.up]
    sharers = shared_gpu_containers(snapshot)
    driver = snapshot.driver.driver_version or ""
    for name, help_text, read in _FIELDS:
        family = GaugeMetricFamily(name, help_text, labels=DCGM_LABELS)
        for gpu in live:
            value = read(gpu)
            if value is None:
                continue
            family.add_metric(_labels(gpu, hostname, driver, gpu.pod), value)
            if name in PER_CONTAINER:
                for ref, share in sharers.get(gpu.identity.uuid, ()):
                    family.add_metric(_labels(gpu, hostname, driver, ref), value * share)
        if family.samples:
            yield family


def shared_gpu_containers(
    snapshot: FleetSnapshot,
) -> dict[str, tuple[tuple[PodRef, float], ...]]:
    """{GPU UUID: ((container, its share of the GPU's activity), ...)} for each GPU that
    no single container holds whole: every container holding it or running on it, by
    namespace, pod and container. MIG GPUs are left out (no whole-GPU engine activity)."""
    attribution = snapshot.attribution
    if attribution is None:
        return {}
    holders = {g.uuid: g for g in attribution.gpus}
    out: dict[str, tuple[tuple[PodRef, float], ...]] = {}
    for gpu in snapshot.gpus:
        held = holders.get(gpu.identity.uuid)
        if gpu.pod is not None or gpu.mig_enabled or held is None:
            continue
        if any(a.mig_uuid is not None for a in held.allocations):
            continue
        shares = container_activity_shares(gpu.processes or ())
        refs = {a.pod for a in held.allocations} | {r for r in shares if r is not None}
        if refs:
            ordered = sorted(refs, key=lambda r: (r.namespace, r.pod, r.container))
            out[gpu.identity.uuid] = tuple((r, shares.get(r, 0.0)) for r in ordered)
    return out


def _labels(gpu: GpuSample, hostname: str, driver: str, pod: PodRef | None) -> list[str]:
    ident = gpu.identity
    return [
        str(ident.index),
        ident.uuid,
        ident.pci_bus_id,
        f"nvidia{ident.index}",
        ident.name,
        hostname,
        driver,
        pod.namespace if pod else "",
        pod.pod if pod else "",
        pod.container if pod else "",
    ]
