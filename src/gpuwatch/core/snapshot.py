"""Immutable per-tick snapshots: the one shape that flows from sources to consumers.

Sources (the NVML sampler, later attribution, token and billing collectors) build a
new `FleetSnapshot` each tick; consumers (the exporter, analysis, alerts, history)
only read them. A value the GPU cannot give is `None`, never 0: the exporter leaves
such a series out. Units are base units and are named in every field. The per-GPU
samples, the Kubernetes attribution and the snapshot itself live here; the records the
analysis and the cost engine add are `gpuwatch.core.verdict`'s and `gpuwatch.core.costs`'.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwatch.core.costs import CostSummary
from gpuwatch.core.jobs import JobAttribution, hold_allocated_idle
from gpuwatch.core.verdict import GpuVerdict

CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
"""nvmlClocksEventReason* bits (nvml.h) and the names `GpuSample.throttle_reasons` holds
(the exporter's `reason` label values)."""


@dataclass(frozen=True, slots=True)
class PodRef:
    """The Kubernetes pod a GPU or process is attributed to (filled by attribution)."""

    namespace: str
    pod: str
    container: str


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One process using a GPU, as NVML reports it."""

    pid: int
    name: str
    kind: str  # "compute" or "graphics" ("compute+graphics" when both)
    memory_used_bytes: int | None
    sm_utilization_ratio: float | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    pod: PodRef | None = None


@dataclass(frozen=True, slots=True)
class MigInstanceSample:
    """One MIG device (GPU instance + compute instance) of a MIG-enabled GPU."""

    uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    sm_active_ratio: float | None = None
    sm_occupancy_ratio: float | None = None
    dram_bandwidth_ratio: float | None = None
    tensor_active_ratio: float | None = None
    # the GPU instance's profile ID (`nvidia-smi mig -lgip`) and placement start slice:
    # with the parent, what NVIDIA's DRA driver names a MIG device by; None: unknown
    gpu_instance_profile_id: int | None = None
    placement_start: int | None = None


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    """What does not change while the driver is loaded."""

    index: int
    uuid: str
    name: str
    serial: str | None
    pci_bus_id: str
    memory_total_bytes: int | None
    power_limit_watts: float | None
    gpm_supported: bool
    minor_number: int | None = None  # /dev/nvidia<N>: GKE's device IDs name GPUs by it


@dataclass(frozen=True, slots=True)
class GpuSample:
    """Everything read from one GPU in one tick."""

    identity: GpuIdentity
    up: bool
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    utilization_ratio: float | None = None
    memory_busy_ratio: float | None = None
    sm_active_ratio: float | None = None
    sm_occupancy_ratio: float | None = None
    dram_bandwidth_ratio: float | None = None
    tensor_active_ratio: float | None = None
    power_watts: float | None = None
    energy_joules_total: float | None = None
    temperature_celsius: float | None = None
    clock_sm_hertz: float | None = None
    clock_memory_hertz: float | None = None
    throttle_reasons: tuple[str, ...] | None = None
    pcie_tx_bytes_per_second: float | None = None
    pcie_rx_bytes_per_second: float | None = None
    nvlink_tx_bytes_total: float | None = None
    nvlink_rx_bytes_total: float | None = None
    ecc_uncorrected_errors_total: int | None = None
    ecc_corrected_errors_total: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    encoder_utilization_ratio: float | None = None  # NVENC busy time (0-1)
    decoder_utilization_ratio: float | None = None  # NVDEC busy time (0-1)
    memory_temperature_celsius: float | None = None  # HBM parts only
    nvlink_bytes_per_second: float | None = None  # TX + RX data, all links, since last tick
    pcie_replay_errors_total: int | None = None  # PCIe replays since driver load
    mig_enabled: bool | None = None
    power_limit_watts: float | None = None  # enforced limit, re-read on the slow job
    mig_instances: tuple[MigInstanceSample, ...] = ()
    processes: tuple[ProcessSample, ...] | None = None
    xid_errors_total: tuple[tuple[int, int], ...] = ()  # (xid code, count), sorted by code
    last_xid: int | None = None  # the most recent XID code; None: none seen or not watched
    pod: PodRef | None = None
    error: str | None = None  # why `up` is False, short, no secrets


@dataclass(frozen=True, slots=True)
class CollectorResult:
    """How one collector did on its last run (exported per collector)."""

    name: str
    success: bool
    duration_seconds: float


@dataclass(frozen=True, slots=True)
class DriverInfo:
    """Host-wide NVML facts."""

    driver_version: str | None
    cuda_driver_version: str | None
    nvml_version: str | None


@dataclass(frozen=True, slots=True)
class PodAllocationSample:
    """One container's hold on one GPU, or on one MIG device of it (kubelet pod-resources).

    `device_ids` are the plugin's IDs for it (several replicas of one time-sliced GPU when
    the container asked for more than one); `running_pids` the container's processes NVML
    sees on that GPU (or MIG device) this tick. A DRA hold has the driver as its
    `resource_name`, `<pool>/<device>` as its device ID and its claim's name in
    `claim`. `unknown_reason` says why its processes cannot be told
    (`IDLE_UNKNOWN_REASONS`), None when they can; `works_alone`: it is the only holder
    of the GPU (or MIG device) and that shows activity this tick.
    """

    gpu_index: int
    uuid: str
    mig_uuid: str | None
    pod: PodRef
    resource_name: str
    device_ids: tuple[str, ...]
    running_pids: tuple[int, ...]
    unknown_reason: str | None = None
    works_alone: bool = False
    claim: str = ""  # the DRA ResourceClaim that gave it; "" for a device plugin's

    @property
    def allocated_idle(self) -> bool | None:
        """True: the pod holds the GPU and runs nothing on it; False: it runs something
        there (or holds it alone while it works); None: unknown (`unknown_reason`)."""
        return hold_allocated_idle(self.running_pids, self.works_alone, self.unknown_reason)


IDLE_UNKNOWN_REASONS = ("pid_unmapped", "no_process_list")
"""Why a hold's allocated-idle is unknown: a process on its GPU whose `/proc/<pid>/cgroup`
the agent cannot read (no host `/proc`, `kubernetes.proc_root`), or NVML lists no
processes for the GPU."""


@dataclass(frozen=True, slots=True)
class GpuAttribution:
    """Who holds and who uses one GPU this tick.

    `allocations`: every container holding it (several when time-sliced or MIG);
    `unowned_pids`: processes on a GPU that no pod holds; `unallocated`: (pod, pid) of
    processes of a pod that holds no allocation of this GPU; `unmapped_pids`: processes
    whose `/proc/<pid>/cgroup` the agent cannot read (their pod is unknown).
    """

    gpu_index: int
    uuid: str
    allocations: tuple[PodAllocationSample, ...] = ()
    unowned_pids: tuple[int, ...] = ()
    unallocated: tuple[tuple[PodRef, int], ...] = ()
    unmapped_pids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Attribution:
    """The Kubernetes view of one tick: each GPU's holders and users.

    Processes carry their own `ProcessSample.pod` (from their cgroup): with
    `GpuSample.processes` that is what a per-pod split of a GPU's cost needs.
    """

    listed_at_seconds: float | None  # epoch s of the kubelet listing used; None: none yet
    pods_listed: int
    gpus: tuple[GpuAttribution, ...] = ()
    unresolved_device_ids: tuple[str, ...] = ()  # GPU device IDs that match no GPU here
    # DRA: (driver, pool, device, reason) of gpu.nvidia.com devices that name no GPU here
    dra_unresolved: tuple[tuple[str, str, str, str], ...] = ()
    dra_ignored: tuple[tuple[str, int], ...] = ()  # (driver, devices) of other DRA drivers
    # the listing is older than its freshness bound (the kubelet has not answered since):
    # its holds are kept until a fresh listing drops them, but no tick is charged to pods
    stale: bool = False

    @property
    def fresh(self) -> bool:
        """A listing is in use and young enough to charge pods and drop the ones gone."""
        return self.listed_at_seconds is not None and not self.stale


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """One host's GPUs at one instant of (possibly simulated) time."""

    timestamp_seconds: float
    driver: DriverInfo
    gpus: tuple[GpuSample, ...]
    collectors: tuple[CollectorResult, ...] = field(default=())
    verdicts: tuple[GpuVerdict, ...] = field(default=())
    hostname: str = ""
    cost: CostSummary = field(default_factory=CostSummary)
    attribution: Attribution | None = None  # None: Kubernetes attribution is off
    jobs: JobAttribution | None = None  # None: Slurm attribution is off
