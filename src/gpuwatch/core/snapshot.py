"""Immutable per-tick snapshots: the one shape that flows from sources to consumers.

Sources (the NVML sampler, later attribution, token and billing collectors) build a
new `FleetSnapshot` each tick; consumers (the exporter, analysis, alerts, history)
only read them. A value the GPU cannot give is `None`, never 0: the exporter leaves
such a series out. Units are base units and are named in every field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


GPU_STATES = ("pending", "busy", "idle", "held", "underutilized")
"""Waste-analysis states, in the order they are exported."""

NEED_BASES = ("declared", "measured", "observed")
"""What a GPU's memory need is, in the order the analysis prefers them: the sizing
model's figure for a `[[workloads]]` declaration, the need measured from the inference
server's KV cache use (`gpuwatch.analysis.measured`), the peak memory NVML observed."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A cheaper catalog GPU that meets the workload's memory and bandwidth need.

    `rule` says which candidates it was chosen from (see `recommendation_rule_phrase`):
    "same_class:<tier>", "allow_list" or "aws:<region>"; "" when not known.
    """

    gpu_id: str  # catalog id, e.g. "A100-SXM-80GB"
    rent_usd_per_hour: float
    savings_usd_per_hour: float
    rule: str = ""


_BASIS_WORDS = {
    "declared": "need from its workload declaration",
    "measured": "need measured from the server's KV cache use",
    "observed": "need from the memory it was seen using",
}


def need_basis_phrase(basis: str | None) -> str:
    """Words for a `GpuVerdict.need_basis` ("need measured from the server's KV cache
    use"); "" for None (an unknown basis is returned as is)."""
    if basis is None:
        return ""
    return _BASIS_WORDS.get(basis, basis)


_TIER_WORDS = {"datacenter": "data-centre", "workstation": "workstation", "consumer": "consumer"}


def recommendation_rule_phrase(rule: str) -> str:
    """Words for a `Recommendation.rule`: "same class (data-centre)", "allow-list",
    "rented by AWS in us-east-1"; "" for "" (an unknown rule is returned as is)."""
    kind, _, detail = rule.partition(":")
    if kind == "same_class":
        return f"same class ({_TIER_WORDS.get(detail, detail)})"
    if kind == "allow_list":
        return "allow-list"
    if kind == "aws":
        return f"rented by AWS in {detail}"
    return rule


@dataclass(frozen=True, slots=True)
class GpuVerdict:
    """The waste analysis of one GPU at one tick (see gpuwatch.analysis)."""

    gpu_index: int
    uuid: str
    state: str  # one of GPU_STATES
    state_since_seconds: float  # epoch seconds the current state began
    inactive_since_seconds: float | None  # start of the inactivity the window confirmed
    idle_seconds_total: float  # settled seconds spent idle or held
    activity_mean_ratio: float | None  # mean activity over the window
    inactive_seconds: float = 0.0  # sampled seconds of the current inactivity (0: active)
    unsettled_seconds: float = 0.0  # sampled seconds not yet classed (pending, open spell)
    tick_seconds: float = 0.0  # sampled seconds this tick adds (0 after a gap)
    tick_class: str | None = None  # this tick's class when known at once, else unsettled
    settlements: tuple[tuple[str, int], ...] = ()  # (class, oldest unsettled ticks) settled
    required_memory_bytes: tuple[tuple[str, int], ...] = ()  # (source, bytes)
    required_bandwidth_bytes_per_second: float | None = None
    catalog_gpu_id: str | None = None  # this GPU's catalog entry, when matched
    overprovisioned: bool | None = None  # None: not evaluated yet / not in the catalog
    recommendation: Recommendation | None = None
    workload: str | None = None  # the declared (else measured) workload's model name
    theoretical_tokens_per_second: float | None = None  # sizing model, declared workload
    need_basis: str | None = None  # NEED_BASES: what the need judged is; None: no need
    need_sample_bytes: int | None = None  # this tick's need on that basis, no headroom


@dataclass(frozen=True, slots=True)
class GpuPrice:
    """What one GPU-hour costs and where the figure comes from."""

    usd_per_hour: float
    source: str  # static, pricing_api, cost_explorer, catalog


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """One GPU's settled time and cost over one window (1 h, 24 h, 30 d).

    Covers the settled samples in (`start_seconds`, `end_seconds`]: from the oldest
    checkpoint inside the window to the newest settled sample. Seconds not yet settled
    (pending period, open inactive spell) are in no window yet.
    """

    window: str
    start_seconds: float
    end_seconds: float
    busy_seconds: float
    idle_seconds: float
    held_seconds: float
    unknown_seconds: float
    cost_usd: float  # all settled cost in the window, any class
    idle_cost_usd: float  # idle and held

    @property
    def judged_seconds(self) -> float:
        """Seconds classed busy, idle or held (unknown excluded)."""
        return self.busy_seconds + self.idle_seconds + self.held_seconds

    @property
    def busy_ratio(self) -> float | None:
        """busy / (busy + idle + held); None when no second was judged."""
        judged = self.judged_seconds
        return None if judged <= 0 else self.busy_seconds / judged


@dataclass(frozen=True, slots=True)
class HourTotals:
    """What the ledger booked to one UTC hour of one GPU since the agent started.

    Seconds and cost are booked at the tick's own time, so a tick settled late still
    lands in its hour; the hour's figures grow until its last tick is settled. Columns
    of `class_seconds` and `class_cost_usd` are in the order of TIME_CLASSES (busy,
    idle, held, unknown). The history store adds these to what earlier runs stored.
    """

    hour_start_seconds: float  # epoch seconds, a multiple of 3600
    observed_seconds: float  # every sampled second, settled or not
    cost_usd: float  # all cost charged in the hour, settled or not
    class_seconds: tuple[float, float, float, float]
    class_cost_usd: tuple[float, float, float, float]
    last_tick_seconds: float  # epoch s of the newest tick booked or charged in the hour
    # epoch s where the earliest sampled span charged to the hour starts (t - tick seconds;
    # a run's first tick: its own time); it may lie in the hour before. None: no tick
    first_span_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class GpuCost:
    """One GPU's accrued cost and classed time since the agent started."""

    gpu_index: int
    uuid: str
    price: GpuPrice | None
    cost_usd_total: float  # every sampled second, settled or not
    idle_cost_usd_total: float  # settled idle and held seconds
    busy_seconds_total: float  # settled busy seconds
    observed_seconds_total: float  # every sampled second
    held_cost_usd_total: float = 0.0  # the held part of the idle cost
    idle_seconds_total: float = 0.0  # settled idle seconds (held not included)
    held_seconds_total: float = 0.0
    unknown_seconds_total: float = 0.0  # no activity signal
    unsettled_seconds: float = 0.0  # sampled, not yet classed
    windows: tuple[TimeWindow, ...] = ()
    hours: tuple[HourTotals, ...] = ()  # the hours that may still change, oldest first


TOKEN_KINDS = ("prompt", "generation", "all")
"""Kinds of tokens a realized cost per token is computed for ("all" = prompt + generation)."""


@dataclass(frozen=True, slots=True)
class TokenCostWindow:
    """Realized cost per token of one kind of one token source over one window.

    `tokens` and `cost_usd` cover the same scrape-to-scrape spans: only spans over which
    every GPU of the source was charged in full count (see gpuwatch.cost.engine).
    """

    source: str
    window: str  # "1h", "24h", "30d"
    kind: str  # one of TOKEN_KINDS
    covered_seconds: float  # scrape to scrape; less than the window while the agent is younger
    tokens: float
    cost_usd: float
    usd_per_million_tokens: float | None  # None when no token of this kind was counted


@dataclass(frozen=True, slots=True)
class TokenSourceCost:
    """What a token source has been charged since the agent started: each of its GPUs'
    cost divided by the number of sources that name that GPU."""

    source: str
    cost_usd_total: float
    # the tokens and cost of the scrape-to-scrape spans in which every GPU of the source
    # was charged in full (the $/1M-token windows count only these), since the start
    counted_prompt_tokens_total: float = 0.0
    counted_generation_tokens_total: float = 0.0
    counted_cost_usd_total: float = 0.0


@dataclass(frozen=True, slots=True)
class RentVsBuyPosition:
    """Rent vs buy for one GPU at its own measured 30-day busy fraction."""

    gpu_index: int
    uuid: str
    breakeven_utilization_ratio: float
    monthly_delta_usd: float  # positive when buying would be cheaper
    busy_ratio: float = 0.0  # the GPU's busy fraction it was judged at
    owned_usd_per_year: float = 0.0  # GPU and host share
    rent_usd_per_hour: float = 0.0  # the rent it was judged against
    # the inputs the owned cost used (RentVsBuyConfig.owned_inputs_for; docs/tco.md)
    life_years: float = 0.0
    cost_of_capital: float = 0.0  # yearly rate, 0-1
    ops_usd_per_year: float = 0.0
    facility: str = ""  # "colocation" (PUE not applied) or "owned" (energy x PUE)
    pue_applied: float = 1.0
    hosting_usd_per_kw_month: float = 0.0
    host_share: bool = True  # False: a bare card
    capex_usd: float = 0.0  # the GPU's price plus its host's server and networking
    it_power_watts: float = 0.0  # the GPU's power plus its host's


@dataclass(frozen=True, slots=True)
class PodCostShare:
    """One pod's part of one GPU's cost in one tick, in USD (see gpuwatch.cost.pods)."""

    namespace: str
    pod: str
    busy_cost_usd: float  # its processes' share of the GPU's active fraction
    idle_cost_usd: float  # its share of the GPU's unused fraction, as an allocation holder


@dataclass(frozen=True, slots=True)
class GpuCostSplit:
    """One GPU's cost of one tick split among pods; the parts sum to `tick_cost_usd`
    exactly (bit for bit, in any order)."""

    gpu_index: int
    uuid: str
    tick_cost_usd: float
    pods: tuple[PodCostShare, ...]
    unattributed_cost_usd: float  # busy part of processes in no pod
    unallocated_idle_cost_usd: float  # idle part no pod holds (charged to nobody)

    def parts(self) -> tuple[float, ...]:
        """Every part of the split: each pod's busy and idle, then the GPU's own two."""
        pods = tuple(x for s in self.pods for x in (s.busy_cost_usd, s.idle_cost_usd))
        return (*pods, self.unattributed_cost_usd, self.unallocated_idle_cost_usd)


@dataclass(frozen=True, slots=True)
class PodCost:
    """One pod's cost since the agent started (or since the pod appeared), in USD."""

    namespace: str
    pod: str
    cost_usd_total: float  # busy and idle
    idle_cost_usd_total: float  # the idle part of the GPUs it holds


@dataclass(frozen=True, slots=True)
class GpuUnattributedCost:
    """The part of one GPU's cost charged to no pod since the agent started, in USD."""

    gpu_index: int
    uuid: str
    cost_usd_total: float


@dataclass(frozen=True, slots=True)
class CostSummary:
    """Everything the cost engine derived from one tick."""

    gpus: tuple[GpuCost, ...] = ()
    tokens: tuple[TokenCostWindow, ...] = ()
    utilization_busy: tuple[tuple[str, float], ...] = ()  # (window, ratio), the host's
    rent_vs_buy: tuple[RentVsBuyPosition, ...] = ()
    rent_vs_buy_host_monthly_delta_usd: float | None = None  # the sum over its GPUs
    token_sources: tuple[TokenSourceCost, ...] = ()
    splits: tuple[GpuCostSplit, ...] = ()  # this tick's per-pod split; () without attribution
    pods: tuple[PodCost, ...] = ()  # pods present now, with their totals
    unattributed: tuple[GpuUnattributedCost, ...] = ()  # per GPU, with attribution on


@dataclass(frozen=True, slots=True)
class PodAllocationSample:
    """One container's hold on one GPU, or on one MIG device of it (kubelet pod-resources).

    `device_ids` are the plugin's IDs for it (several replicas of one time-sliced GPU when
    the container asked for more than one); `running_pids` the container's processes NVML
    sees on that GPU (or MIG device) this tick. `unknown_reason` says why its processes
    cannot be told (`IDLE_UNKNOWN_REASONS`), None when they can; `works_alone`: it is the
    only holder of the GPU (or MIG device) and that shows activity this tick.
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

    @property
    def allocated_idle(self) -> bool | None:
        """True: the pod holds the GPU and runs nothing on it; False: it runs something
        there (or holds it alone while it works); None: unknown (`unknown_reason`)."""
        if self.running_pids or self.works_alone:
            return False
        return None if self.unknown_reason is not None else True


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
