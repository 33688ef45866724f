"""What the plan reads and what it says: plain values, no I/O, no solver.

A `WorkloadNeed` is one unit the plan must place: the work one GPU (or one multi-GPU job)
did over the lookback, with its measured need per GPU. A `Plan` is where each unit goes
(`Placement`s), what it costs per month, and the lower bound the solver proved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

NeedBasis = Literal["declared", "measured", "observed"]
"""Where a memory need comes from: a `[[workloads]]` declaration and the sizing model,
the inference server's own KV-cache use plus the sizing model's weights, or NVML's peak
memory used (an upper bound: servers preallocate)."""

Activity = Literal["busy", "underutilized", "idle", "held", "unknown"]
"""What the unit did over the lookback (the analysis states; unknown: pending only)."""

PlacementMode = Literal["whole", "shared", "mig"]
"""How a planned GPU is used: one unit alone, several time-sliced, or MIG instances."""


@dataclass(frozen=True, slots=True)
class WorkloadNeed:
    """One unit to place: a GPU's workload, or a multi-GPU job kept together.

    Memory, activity and bandwidth are per GPU of the unit. `activity_ratio` is the high
    percentile of SM activity (0-1) on `current_gpu_id`; the plan scales it by the
    dense BF16 TFLOPS of the current and the candidate GPU. `bandwidth_bytes_per_second`
    is the high-percentile DRAM bandwidth actually used (bytes/s), independent of the part.
    `memory_bytes` is the need without headroom (the plan adds `PlanOptions.headroom_ratio`);
    None when the lookback holds no need and no memory used for it (need unknown: the plan
    leaves the unit on its GPU rather than size it from nothing). `kernel_busy_ratio` is
    the high percentile of kernel-busy time (NVML utilization.gpu: the share of time one or
    more kernels ran, 0-1) on `current_gpu_id`: what co-tenants of a time-sliced GPU add
    up (one context runs at a time); None: unknown (the plan then counts the whole GPU).
    """

    key: str  # stable id: the GPU's uuid, or the job's sorted uuids joined by ","
    label: str  # what a team reads: "team-b/vllm-llama-8b-0", else "host GPU 3"
    host: str
    gpu_uuids: tuple[str, ...]
    current_gpu_id: str | None  # catalog id of the GPU it runs on now (None: not in catalog)
    current_usd_per_hour: float  # what its GPUs cost now, all of them, $/h
    activity: Activity
    memory_bytes: float | None  # need per GPU, bytes, without headroom; None: unknown
    memory_basis: NeedBasis | None  # None with the need unknown
    activity_ratio: float | None  # high-percentile SM activity on the current GPU, 0-1
    bandwidth_bytes_per_second: float | None  # high-percentile DRAM bandwidth per GPU
    namespace: str | None = None  # the owning pods' namespace (one), else None
    pods: tuple[str, ...] = ()  # "namespace/pod" of the pods that own or hold it
    memory_peak_bytes: float | None = None  # the maximum need seen (kept beside the percentile)
    held_memory_bytes: float | None = None  # memory held while doing nothing (held units)
    observed_seconds: float = 0.0  # how long the lookback saw it
    server: str | None = None  # the inference server that runs it ("vllm", ...), if known
    memory_p95_bytes: float | None = None  # the 95th percentile of the need on its basis
    gpus_at_once: int | None = None  # GPUs it needs when fewer than it ran on (rescheduled)
    memory_error_bytes: float | None = None  # a need above its GPU's memory: not an input
    dra: bool = False  # its pods held their GPUs through DRA claims of gpu.nvidia.com
    kernel_busy_ratio: float | None = None  # high-percentile kernel-busy time on it, 0-1

    @property
    def gpu_count(self) -> int:
        """GPUs the unit needs together (a multi-GPU job is never split): the most one
        of its pods held at once, else all it ran on."""
        return self.gpus_at_once or len(self.gpu_uuids)

    @property
    def gpus_now(self) -> int:
        """GPUs it ran on over the lookback (what `current_usd_per_hour` pays for)."""
        return len(self.gpu_uuids)

    @property
    def reclaimable(self) -> bool:
        """Idle (nothing ran) or held (memory kept, no work): no GPU in the plan."""
        return self.activity in ("idle", "held")


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """How the plan is made."""

    headroom_ratio: float = 0.1  # spare memory, compute and bandwidth on every placement
    candidate_gpu_ids: tuple[str, ...] | None = None  # None: the right-sizing candidate rules
    mig: bool = True
    time_slicing: bool = True
    share_across_namespaces: bool = False  # never co-locate two teams' work by default
    time_limit_seconds: float | None = None  # a wall-clock safety cap; None: none (reproducible)
    relative_gap: float = 1e-4  # the solver stops when within this of its bound
    # [plan] policy (gpuwatch.config.PlanConfig): namespaces never time-sliced, quotas
    # as (namespace, resource, limit) with resource nvidia.com/gpu or nvidia.com/mig-<p>,
    # and the smallest saving a move must bring ($/month; `plan.policy.min_saving`)
    no_time_slicing_namespaces: frozenset[str] = frozenset()
    quotas: tuple[tuple[str, str, int], ...] = ()
    min_saving_usd_per_month: float = 0.0
    work_limit_nodes: int = 10  # HiGHS branch-and-bound nodes per MILP: the deterministic limit
    seed: int = 0  # HiGHS's random_seed; printed with every plan
    # the share of a time-sliced GPU each unit on it adds for context switches (0-1):
    # no published figure; a conservative choice (docs/plan.md, "Time-slicing adds
    # kernel-busy time")
    context_switch_ratio: float = 0.05


@dataclass(frozen=True, slots=True)
class Placement:
    """One GPU of the plan and what runs on it."""

    gpu_id: str  # catalog id
    mode: PlacementMode
    usd_per_hour: float  # the GPU's rent price, $/h
    units: tuple[str, ...]  # WorkloadNeed.key of each unit on it
    mig_profiles: tuple[str, ...] = ()  # mode "mig": the profile of each unit, same order
    group: int = 0  # units of one multi-GPU job share a group number > 0
    replicas: int = 0  # mode "shared": the device plugin's replicas per GPU of its class
    share_class: int = 0  # mode "shared": its time-sliced class's number (> 0), per plan


@dataclass(frozen=True, slots=True)
class Plan:
    """The plan and its proof.

    `usd_per_hour` is what `placements` cost; `lower_bound_usd_per_hour` is the bound
    the solver proved (no plan under the same rules costs less); `gap_ratio` =
    (plan - bound) / plan, 0 when proved optimal, None when nothing is placed.
    `unplaced` lists units no candidate holds (they keep their current GPU at its price,
    included in `usd_per_hour`).
    """

    placements: tuple[Placement, ...]
    current_usd_per_hour: float
    usd_per_hour: float
    lower_bound_usd_per_hour: float
    gap_ratio: float | None
    reclaimed: tuple[str, ...]  # keys of idle and held units (no GPU in the plan)
    unplaced: tuple[str, ...] = ()
    solver: str = "highs"
    solve_seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def savings_usd_per_hour(self) -> float:
        """Current minus planned $/h."""
        return self.current_usd_per_hour - self.usd_per_hour
