"""The history file's rows as typed records: one `TypedDict` per table, keyed exactly by
the table's columns at `schema.SCHEMA_VERSION` (a test keeps the two the same).

A row is what `HistoryStore` reads and what `Rollup` hands the writer: an hour's absolute
totals. Columns added by a later migration are None in rows written before it. Nothing
here reads or writes SQLite.
"""

from __future__ import annotations

from typing import TypedDict


class GpuHourRow(TypedDict):
    """One GPU-hour of `gpu_hours`."""

    uuid: str
    hour_start: int
    host: str
    gpu_index: int | None
    name: str
    observed_seconds: float
    cost_usd: float
    busy_seconds: float
    idle_seconds: float
    held_seconds: float
    unknown_seconds: float
    busy_cost_usd: float
    idle_cost_usd: float
    held_cost_usd: float
    unknown_cost_usd: float
    last_seconds: float
    pending_state_seconds: float
    busy_state_seconds: float
    idle_state_seconds: float
    held_state_seconds: float
    underutilized_state_seconds: float
    energy_joules: float | None
    memory_peak_bytes: float | None
    dram_peak_ratio: float | None
    memory_byte_seconds: float
    memory_seconds: float
    activity_seconds: float
    activity_sampled_seconds: float
    price_usd_per_hour: float | None
    price_source: str | None
    recommended_gpu: str | None
    savings_usd_per_hour: float | None
    first_seconds: float | None
    recommended_rule: str | None
    need_bytes: float | None
    need_p95_bytes: float | None
    need_basis: str | None
    pods: str | None  # a JSON list of "namespace/pod", sorted
    dra: int | None  # 1: a pod held it through a gpu.nvidia.com claim in the hour
    kernel_busy_seconds: float  # NVML utilization x seconds, summed (0 before schema 9)
    kernel_busy_sampled_seconds: float  # the seconds with a utilization figure


class TokenHourRow(TypedDict):
    """One token source's hour of `token_hours`."""

    source: str
    hour_start: int
    host: str
    prompt_tokens: float
    generation_tokens: float
    cost_usd: float
    last_seconds: float
    charged_prompt_tokens: float | None
    charged_generation_tokens: float | None
    charged_cost_usd: float | None


class PodHourRow(TypedDict):
    """One Kubernetes pod's hour of `pod_hours`."""

    namespace: str
    pod: str
    hour_start: int
    host: str
    cost_usd: float
    idle_cost_usd: float
    last_seconds: float


class JobHourRow(TypedDict):
    """One Slurm job's hour on one GPU, `job_hours` (seconds, bytes, USD)."""

    job_id: str
    uuid: str
    hour_start: int
    host: str
    gpu_index: int | None
    name: str  # the GPU's model
    user: str
    account: str
    partition: str
    steps: str  # a JSON list of the steps seen running on the GPU, sorted
    first_seconds: float  # epoch s of the first snapshot in the hour the job held it
    last_seconds: float  # and of the last
    held_seconds: float  # held it (its GRES)
    busy_seconds: float  # of those, ran a process on it (or held it alone while it worked)
    idle_seconds: float  # of those, ran nothing on it (allocated-idle); the rest unknown
    activity_seconds: float  # the GPU's activity ratio x seconds, while held
    activity_sampled_seconds: float  # the seconds with an activity figure
    activity_histogram: str  # JSON {"<percent>": seconds}: seconds per 1 % activity bin
    memory_peak_bytes: float | None  # the job's processes' peak (None: never known)
    price_usd_per_hour: float | None  # the GPU's latest price in the hour
    cost_usd: float  # busy and idle cost charged to the job
    idle_cost_usd: float  # the idle part
    held_cost_usd: float  # what it was charged at ticks it ran nothing on the GPU
    reclaimed_usd: float  # reclaim's credit for cancelling it (this GPU's part), else 0


class GpuStateRow(TypedDict):
    """One GPU's last analysis state, `gpu_state`."""

    uuid: str
    gpu_index: int | None
    name: str
    state: str
    state_since_seconds: float
    inactive_since_seconds: float | None
    inactive_seconds: float
    activity_mean_ratio: float | None
    last_seconds: float
