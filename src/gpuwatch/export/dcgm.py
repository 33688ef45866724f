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

Naming sets (`[exporter] dcgm_naming`): "classic" is the above; "4.9" is dcgm-exporter
4.9's (DCGM 4.7's canonical names, base units: Hz, J, ratio 0-1, bytes, bytes/s; the label
`DCGM_FI_SYSTEM_DRIVER_VERSION`; `DCGM_FI_DEV_FB_CAPACITY_BYTES` added), derived from
DCGM's field table (tests/test_dcgm_naming.py, docs/compatibility.md). `FIELDS` holds both
names of each family and the factor between their units; OpenCost reads the classic names.

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
from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.core.snapshot import FleetSnapshot, GpuSample, PodRef
from gpuwatch.core.units import KIB, MIB
from gpuwatch.cost.pods import container_activity_shares

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


def _flag(gpu: GpuSample) -> float | None:
    """DCGM_FI_DEV_ROW_REMAP_FAILURE: 1 when remapping rows has failed."""
    failed = gpu.remapped_rows_failure
    return None if failed is None else float(failed)


def _last_xid(gpu: GpuSample) -> float | None:
    """The most recent XID (dcgm-exporter reports 0 until one happens)."""
    return 0.0 if gpu.last_xid is None else float(gpu.last_xid)


DcgmNaming = Literal["classic", "4.9"]
"""dcgm-exporter's naming sets: "classic" (4.8 and earlier), "4.9" (DCGM 4.7's names)."""


@dataclass(frozen=True)
class DcgmField:
    """One DCGM family under both naming sets, read once from the snapshot.

    `read` gives the value in the 4.9 set's base unit; the classic value is that times
    `classic_scale` (e.g. Hz x 1e-6 = MHz). A name of None: not in that set.
    """

    classic: str | None
    classic_help: str
    current: str | None
    current_help: str
    read: Reader
    classic_scale: float = 1.0
    per_container: bool = False

    def name(self, naming: DcgmNaming) -> str | None:
        """The family name under `naming` (None: not exported there)."""
        return self.classic if naming == "classic" else self.current

    def help(self, naming: DcgmNaming) -> str:
        return self.classic_help if naming == "classic" else self.current_help

    def value(self, gpu: GpuSample, naming: DcgmNaming) -> float | None:
        """This GPU's value in `naming`'s unit; None where the GPU does not say."""
        value = self.read(gpu)
        if value is None or naming != "classic":
            return value
        return value * self.classic_scale


def _number(read: Callable[[GpuSample], float | int | None]) -> Reader:
    """`read` as a float (None stays None)."""
    return _scaled(read, 1.0)


_PERCENT = 100.0  # ratio 0-1 -> %
_MHZ = 1e-6  # Hz -> MHz
_MJ = 1000.0  # J -> mJ

FIELDS: tuple[DcgmField, ...] = (
    DcgmField(
        "DCGM_FI_DEV_GPU_UTIL",
        "GPU utilization (in %).",
        "DCGM_FI_DEV_GPU_UTIL_RATIO",
        "GPU utilization (ratio 0-1).",
        _number(lambda g: g.utilization_ratio),
        _PERCENT,
    ),
    DcgmField(
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "Memory utilization (in %).",
        "DCGM_FI_DEV_MEMORY_UTIL_RATIO",
        "Memory utilization (ratio 0-1).",
        _number(lambda g: g.memory_busy_ratio),
        _PERCENT,
    ),
    DcgmField(
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB).",
        "DCGM_FI_DEV_FB_USED_BYTES",
        "Framebuffer memory used (in bytes).",
        _number(lambda g: g.memory_used_bytes),
        1 / MIB,
    ),
    DcgmField(
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB).",
        "DCGM_FI_DEV_FB_FREE_BYTES",
        "Framebuffer memory free (in bytes).",
        _number(lambda g: g.memory_free_bytes),
        1 / MIB,
    ),
    DcgmField(
        "DCGM_FI_DEV_FB_RESERVED",
        "Framebuffer memory reserved (in MiB).",
        "DCGM_FI_DEV_FB_RESERVED_BYTES",
        "Framebuffer memory reserved (in bytes).",
        _number(lambda g: g.memory_reserved_bytes),
        1 / MIB,
    ),
    DcgmField(
        None,
        "",
        "DCGM_FI_DEV_FB_CAPACITY_BYTES",
        "Framebuffer memory capacity (in bytes).",
        _number(lambda g: g.identity.memory_total_bytes),
    ),
    DcgmField(
        "DCGM_FI_DEV_SM_CLOCK",
        "SM clock frequency (in MHz).",
        "DCGM_FI_DEV_SM_CLOCK_HERTZ",
        "SM clock frequency (in Hz).",
        _number(lambda g: g.clock_sm_hertz),
        _MHZ,
    ),
    DcgmField(
        "DCGM_FI_DEV_MEM_CLOCK",
        "Memory clock frequency (in MHz).",
        "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ",
        "Memory clock frequency (in Hz).",
        _number(lambda g: g.clock_memory_hertz),
        _MHZ,
    ),
    DcgmField(
        "DCGM_FI_DEV_GPU_TEMP",
        "GPU temperature (in C).",
        "DCGM_FI_DEV_GPU_TEMP_CELSIUS",
        "GPU temperature (in C).",
        _number(lambda g: g.temperature_celsius),
    ),
    DcgmField(
        "DCGM_FI_DEV_MEMORY_TEMP",
        "Memory temperature (in C).",
        "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS",
        "Memory temperature (in C).",
        _number(lambda g: g.memory_temperature_celsius),
    ),
    DcgmField(
        "DCGM_FI_DEV_POWER_USAGE",
        "Power draw (in W).",
        "DCGM_FI_DEV_BOARD_POWER_WATTS",
        "Power draw (in W).",
        _number(lambda g: g.power_watts),
    ),
    DcgmField(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ).",
        "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL",
        "Total energy consumption since boot (in J).",
        _number(lambda g: g.energy_joules_total),
        _MJ,
    ),
    DcgmField(
        "DCGM_FI_DEV_ENC_UTIL",
        "Encoder utilization (in %).",
        "DCGM_FI_DEV_ENC_UTIL_RATIO",
        "Encoder utilization (ratio 0-1).",
        _number(lambda g: g.encoder_utilization_ratio),
        _PERCENT,
    ),
    DcgmField(
        "DCGM_FI_DEV_DEC_UTIL",
        "Decoder utilization (in %).",
        "DCGM_FI_DEV_DEC_UTIL_RATIO",
        "Decoder utilization (ratio 0-1).",
        _number(lambda g: g.decoder_utilization_ratio),
        _PERCENT,
        per_container=True,
    ),
    DcgmField(
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "PCIe TX throughput (in KB/s).",
        None,  # deprecated in DCGM, the default of releases before 4.0 only
        "",
        _number(lambda g: g.pcie_tx_bytes_per_second),
        1 / KIB,
    ),
    DcgmField(
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "PCIe RX throughput (in KB/s).",
        None,
        "",
        _number(lambda g: g.pcie_rx_bytes_per_second),
        1 / KIB,
    ),
    DcgmField(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "The rate of data transmitted over the PCIe bus (in bytes/s).",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "The rate of data transmitted over the PCIe bus (in bytes/s).",
        _number(lambda g: g.pcie_tx_bytes_per_second),
    ),
    DcgmField(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "The rate of data received over the PCIe bus (in bytes/s).",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "The rate of data received over the PCIe bus (in bytes/s).",
        _number(lambda g: g.pcie_rx_bytes_per_second),
    ),
    DcgmField(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "Total number of PCIe retries.",
        "DCGM_FI_DEV_PCIE_REPLAY_TOTAL",
        "Total number of PCIe retries.",
        _number(lambda g: g.pcie_replay_errors_total),
    ),
    DcgmField(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "NVLink TX + RX data throughput, all links (in KiB/s / 1000, as DCGM computes it).",
        "DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND",
        "NVLink TX + RX data throughput, all links (in bytes/s).",
        _number(lambda g: g.nvlink_bytes_per_second),
        1 / KIB / 1000,
    ),
    DcgmField(
        "DCGM_FI_DEV_XID_ERRORS",
        "Value of the last XID error encountered.",
        "DCGM_FI_DEV_XID_ERROR",
        "Value of the last XID error encountered.",
        _last_xid,
    ),
    DcgmField(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for uncorrectable errors.",
        "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
        "Number of remapped rows for uncorrectable errors.",
        _number(lambda g: g.remapped_rows_uncorrectable),
    ),
    DcgmField(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for correctable errors.",
        "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL",
        "Number of remapped rows for correctable errors.",
        _number(lambda g: g.remapped_rows_correctable),
    ),
    DcgmField(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "Whether remapping of rows has failed.",
        "DCGM_FI_DEV_ROW_REMAP_FAILED",
        "Whether remapping of rows has failed.",
        _flag,
    ),
    DcgmField(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "Ratio of time the graphics engine is active.",
        "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
        "Ratio of time the graphics engine is active.",
        lambda g: g.utilization_ratio,
        per_container=True,
    ),
    DcgmField(
        "DCGM_FI_PROF_SM_ACTIVE",
        "The ratio of cycles an SM has at least 1 warp assigned.",
        "DCGM_FI_PROF_SM_UTIL_RATIO",
        "The ratio of cycles an SM has at least 1 warp assigned.",
        lambda g: g.sm_active_ratio,
    ),
    DcgmField(
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "The ratio of number of warps resident on an SM.",
        "DCGM_FI_PROF_SM_OCCUPANCY_RATIO",
        "The ratio of number of warps resident on an SM.",
        lambda g: g.sm_occupancy_ratio,
    ),
    DcgmField(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        lambda g: g.tensor_active_ratio,
    ),
    DcgmField(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "Ratio of cycles the device memory interface is active.",
        "DCGM_FI_PROF_DRAM_UTIL_RATIO",
        "Ratio of cycles the device memory interface is active.",
        lambda g: g.dram_bandwidth_ratio,
    ),
)
"""Every DCGM family, in the order of the classic set (4.9's new capacity after FB)."""

DRIVER_LABEL: dict[DcgmNaming, str] = {
    "classic": "DCGM_FI_DRIVER_VERSION",
    "4.9": "DCGM_FI_SYSTEM_DRIVER_VERSION",
}
"""The one `label` row of default-counters.csv: the driver's version."""

PER_CONTAINER = frozenset(
    name for f in FIELDS if f.per_container for name in (f.classic, f.current) if name
)
"""The families with a series per container on a shared GPU: OpenCost's GPU usage and
GPU info queries (`{container!=""}`, by container, pod and namespace), under both names
(OpenCost itself queries the classic ones)."""


def dcgm_labels(naming: DcgmNaming) -> tuple[str, ...]:
    """The label names of every DCGM family under `naming`."""
    return tuple(DRIVER_LABEL[naming] if n == DRIVER_LABEL["classic"] else n for n in DCGM_LABELS)


def dcgm_families(
    snapshot: FleetSnapshot | None, hostname: str, naming: DcgmNaming = "classic"
) -> Iterator[Metric]:
    """The DCGM family set for every GPU that is up, named as `naming` says.

    dcgm-exporter types its counters (energy, PCIe replays, remapped rows) as counters
    without a `_total` suffix; prometheus-client would add one to a counter, so they are
    exposed as gauges under the exact dcgm names that dashboards query.
    """
    if snapshot is None:
        return
    live = [g for g in snapshot.gpus if g.up]
    sharers = shared_gpu_containers(snapshot)
    driver = snapshot.driver.driver_version or ""
    labels = dcgm_labels(naming)
    for field in FIELDS:
        name = field.name(naming)
        if name is None:
            continue
        family = GaugeMetricFamily(name, field.help(naming), labels=labels)
        for gpu in live:
            value = field.value(gpu, naming)
            if value is None:
                continue
            family.add_metric(_labels(gpu, hostname, driver, gpu.pod), value)
            if field.per_container:
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


def dcgm_declared(naming: DcgmNaming) -> tuple[tuple[str, str], ...]:
    """(name, type) of every family `dcgm_families` may yield under `naming`: all gauges
    (see `dcgm_families`), the export registry's `describe()`."""
    return tuple((name, "gauge") for field in FIELDS if (name := field.name(naming)) is not None)
