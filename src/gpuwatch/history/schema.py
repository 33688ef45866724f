"""The history file's tables and the migrations that build them, in order.

A new file runs every migration; a file at version N runs those after N, each in one
transaction with its version bump, so a kill -9 mid-migration leaves the file at the
old version. Never edit a shipped migration: append one.

Version 1 held the per GPU-hour classes and costs and the per-GPU state; version 2 adds
the analysis-state seconds, energy, memory, price and recommendation columns, and the
per token source hours; version 3 the hour's peak DRAM bandwidth ratio; version 4 the
per Kubernetes pod hours (cost and idle cost charged to each pod); version 5 the hour's
activity seconds (mean activity x seconds) and the seconds with an activity figure;
version 6 the start of each GPU-hour's sampled time, and per token source hour the
tokens and cost of the spans its GPUs were charged for in full; version 7 the rule of the
hour's recommendation; version 8 the hour's memory need (maximum and p95, without
headroom, and its basis) and the pods that held or used the GPU in it; version 9 the
hour's kernel-busy seconds (NVML utilization x seconds) and the seconds with that figure;
version 10 the per Slurm job and GPU-hour rows (`job_hours`: held, busy and idle seconds,
activity, peak memory, cost and idle cost charged to the job, $ reclaimed).
"""

from __future__ import annotations

from typing import Literal, get_args

GpuClassColumn = Literal[
    "busy_seconds",
    "idle_seconds",
    "held_seconds",
    "unknown_seconds",
    "busy_cost_usd",
    "idle_cost_usd",
    "held_cost_usd",
    "unknown_cost_usd",
]
"""A column of GPU_CLASS_COLUMNS (so a typed row can be read by it)."""

StateColumn = Literal[
    "pending_state_seconds",
    "busy_state_seconds",
    "idle_state_seconds",
    "held_state_seconds",
    "underutilized_state_seconds",
]
"""A column of STATE_COLUMNS."""

GPU_CLASS_COLUMNS: tuple[GpuClassColumn, ...] = get_args(GpuClassColumn)
"""Settled seconds then settled cost by class (TIME_CLASSES order), per GPU-hour."""

STATE_COLUMNS: tuple[StateColumn, ...] = get_args(StateColumn)
"""Sampled seconds by analysis state (GPU_STATES order), per GPU-hour."""

MIGRATIONS: tuple[str, ...] = (
    # 1
    """
    CREATE TABLE gpu_hours (
        uuid TEXT NOT NULL,
        hour_start INTEGER NOT NULL,
        host TEXT NOT NULL,
        gpu_index INTEGER,
        name TEXT NOT NULL,
        observed_seconds REAL NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        busy_seconds REAL NOT NULL DEFAULT 0,
        idle_seconds REAL NOT NULL DEFAULT 0,
        held_seconds REAL NOT NULL DEFAULT 0,
        unknown_seconds REAL NOT NULL DEFAULT 0,
        busy_cost_usd REAL NOT NULL DEFAULT 0,
        idle_cost_usd REAL NOT NULL DEFAULT 0,
        held_cost_usd REAL NOT NULL DEFAULT 0,
        unknown_cost_usd REAL NOT NULL DEFAULT 0,
        last_seconds REAL NOT NULL,
        PRIMARY KEY (uuid, hour_start)
    ) WITHOUT ROWID;
    CREATE INDEX gpu_hours_by_hour ON gpu_hours (hour_start);
    CREATE TABLE gpu_state (
        uuid TEXT PRIMARY KEY,
        gpu_index INTEGER,
        name TEXT NOT NULL,
        state TEXT NOT NULL,
        state_since_seconds REAL NOT NULL,
        inactive_since_seconds REAL,
        inactive_seconds REAL NOT NULL,
        activity_mean_ratio REAL,
        last_seconds REAL NOT NULL
    );
    """,
    # 2
    """
    ALTER TABLE gpu_hours ADD COLUMN pending_state_seconds REAL NOT NULL DEFAULT 0;
    ALTER TABLE gpu_hours ADD COLUMN busy_state_seconds REAL NOT NULL DEFAULT 0;
    ALTER TABLE gpu_hours ADD COLUMN idle_state_seconds REAL NOT NULL DEFAULT 0;
    ALTER TABLE gpu_hours ADD COLUMN held_state_seconds REAL NOT NULL DEFAULT 0;
    ALTER TABLE gpu_hours ADD COLUMN underutilized_state_seconds REAL NOT NULL DEFAULT 0;
    ALTER TABLE gpu_hours ADD COLUMN energy_joules REAL;
    ALTER TABLE gpu_hours ADD COLUMN memory_peak_bytes REAL;
    ALTER TABLE gpu_hours ADD COLUMN memory_byte_seconds REAL NOT NULL DEFAULT 0;
    ALTER TABLE gpu_hours ADD COLUMN memory_seconds REAL NOT NULL DEFAULT 0;
    ALTER TABLE gpu_hours ADD COLUMN price_usd_per_hour REAL;
    ALTER TABLE gpu_hours ADD COLUMN price_source TEXT;
    ALTER TABLE gpu_hours ADD COLUMN recommended_gpu TEXT;
    ALTER TABLE gpu_hours ADD COLUMN savings_usd_per_hour REAL;
    CREATE TABLE token_hours (
        source TEXT NOT NULL,
        hour_start INTEGER NOT NULL,
        host TEXT NOT NULL,
        prompt_tokens REAL NOT NULL DEFAULT 0,
        generation_tokens REAL NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        last_seconds REAL NOT NULL,
        PRIMARY KEY (source, hour_start)
    ) WITHOUT ROWID;
    """,
    # 3: the hour's peak DRAM bandwidth ratio, so overprovisioning's lookback survives a
    # restart (the memory peak already did)
    """
    ALTER TABLE gpu_hours ADD COLUMN dram_peak_ratio REAL;
    """,
    # 4: each Kubernetes pod's share of the GPUs' cost per hour (gpuwatch.cost.pods)
    """
    CREATE TABLE pod_hours (
        namespace TEXT NOT NULL,
        pod TEXT NOT NULL,
        hour_start INTEGER NOT NULL,
        host TEXT NOT NULL,
        cost_usd REAL NOT NULL DEFAULT 0,
        idle_cost_usd REAL NOT NULL DEFAULT 0,
        last_seconds REAL NOT NULL,
        PRIMARY KEY (namespace, pod, hour_start)
    ) WITHOUT ROWID;
    CREATE INDEX pod_hours_by_hour ON pod_hours (hour_start);
    """,
    # 5: the hour's activity (the analysis window's mean activity x tick seconds, and the
    # seconds it was known), so a report gives each GPU's mean activity and rent vs buy at
    # activity-weighted utilization
    """
    ALTER TABLE gpu_hours ADD COLUMN activity_seconds REAL NOT NULL DEFAULT 0;
    ALTER TABLE gpu_hours ADD COLUMN activity_sampled_seconds REAL NOT NULL DEFAULT 0;
    """,
    # 6: where the hour's sampled time starts (so the report's expected GPU-seconds start
    # where the observed ones do), and per token source the tokens and cost of the spans
    # its GPUs were charged for in full (the live $/1M-token windows' rule); NULL in rows
    # written before
    """
    ALTER TABLE gpu_hours ADD COLUMN first_seconds REAL;
    ALTER TABLE token_hours ADD COLUMN charged_prompt_tokens REAL;
    ALTER TABLE token_hours ADD COLUMN charged_generation_tokens REAL;
    ALTER TABLE token_hours ADD COLUMN charged_cost_usd REAL;
    """,
    # 7: which candidates the hour's recommendation was chosen from (Recommendation.rule:
    # same_class:<tier>, allow_list, aws:<region>); NULL in rows written before
    """
    ALTER TABLE gpu_hours ADD COLUMN recommended_rule TEXT;
    """,
    # 8: the hour's memory need without headroom on its basis (GpuVerdict.need_basis:
    # declared, measured from the inference server's KV cache use, or observed), its
    # maximum and time-weighted p95 over the hour's ticks, and the pods ("namespace/pod",
    # a JSON list, sorted) that held or used the GPU in the hour, [] when none; what a
    # fleet plan reads; NULL in rows written before
    """
    ALTER TABLE gpu_hours ADD COLUMN need_bytes REAL;
    ALTER TABLE gpu_hours ADD COLUMN need_p95_bytes REAL;
    ALTER TABLE gpu_hours ADD COLUMN need_basis TEXT;
    ALTER TABLE gpu_hours ADD COLUMN pods TEXT;
    """,
    # 9: 1 when a pod held the GPU in the hour through a DRA claim of NVIDIA's driver
    # (gpu.nvidia.com), else 0: where a fleet plan emits DRA claims; NULL in rows written
    # before. And the hour's kernel-busy time (NVML utilization.gpu, the share of the
    # sample period in which a kernel ran, x tick seconds) and the seconds it was known:
    # what adds up when a GPU is time-sliced (a fleet plan reads it); 0 in rows written
    # before
    """
    ALTER TABLE gpu_hours ADD COLUMN dra INTEGER;
    ALTER TABLE gpu_hours ADD COLUMN kernel_busy_seconds REAL NOT NULL DEFAULT 0;
    ALTER TABLE gpu_hours ADD COLUMN kernel_busy_sampled_seconds REAL NOT NULL DEFAULT 0;
    """,
    # 10: each Slurm job's hours on each GPU (gpuwatch.history.job_rollup): who ran it, the
    # seconds it held the GPU (and of those, ran on it or held it idle), the GPU's activity
    # while it held it (x seconds, the seconds known, and seconds per 1 % activity bin, a
    # JSON object, for a p95), its peak memory, and the cost and idle cost charged to it
    # by the pods' split rule (gpuwatch.cost.jobs), and the $ reclaim credited when it
    # cancelled the job (gpuwatch.slurm.reclaim; its GPU's part, on the hour of the cancel)
    """
    CREATE TABLE job_hours (
        job_id TEXT NOT NULL,
        uuid TEXT NOT NULL,
        hour_start INTEGER NOT NULL,
        host TEXT NOT NULL,
        gpu_index INTEGER,
        name TEXT NOT NULL,
        user TEXT NOT NULL,
        account TEXT NOT NULL,
        partition TEXT NOT NULL,
        steps TEXT NOT NULL,
        first_seconds REAL NOT NULL,
        last_seconds REAL NOT NULL,
        held_seconds REAL NOT NULL DEFAULT 0,
        busy_seconds REAL NOT NULL DEFAULT 0,
        idle_seconds REAL NOT NULL DEFAULT 0,
        activity_seconds REAL NOT NULL DEFAULT 0,
        activity_sampled_seconds REAL NOT NULL DEFAULT 0,
        activity_histogram TEXT NOT NULL,
        memory_peak_bytes REAL,
        price_usd_per_hour REAL,
        cost_usd REAL NOT NULL DEFAULT 0,
        idle_cost_usd REAL NOT NULL DEFAULT 0,
        held_cost_usd REAL NOT NULL DEFAULT 0,
        reclaimed_usd REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (job_id, uuid, hour_start)
    ) WITHOUT ROWID;
    CREATE INDEX job_hours_by_hour ON job_hours (hour_start);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)

GPU_COLUMNS = (
    "uuid",
    "hour_start",
    "host",
    "gpu_index",
    "name",
    "observed_seconds",
    "cost_usd",
    *GPU_CLASS_COLUMNS,
    "last_seconds",
    *STATE_COLUMNS,
    "energy_joules",
    "memory_peak_bytes",
    "dram_peak_ratio",
    "memory_byte_seconds",
    "memory_seconds",
    "activity_seconds",
    "activity_sampled_seconds",
    "price_usd_per_hour",
    "price_source",
    "recommended_gpu",
    "savings_usd_per_hour",
    "first_seconds",
    "recommended_rule",
    "need_bytes",
    "need_p95_bytes",
    "need_basis",
    "pods",
    "dra",
    "kernel_busy_seconds",
    "kernel_busy_sampled_seconds",
)
"""Every column of gpu_hours at SCHEMA_VERSION."""

TOKEN_COLUMNS = (
    "source",
    "hour_start",
    "host",
    "prompt_tokens",
    "generation_tokens",
    "cost_usd",
    "last_seconds",
    "charged_prompt_tokens",
    "charged_generation_tokens",
    "charged_cost_usd",
)

POD_COLUMNS = (
    "namespace",
    "pod",
    "hour_start",
    "host",
    "cost_usd",
    "idle_cost_usd",
    "last_seconds",
)

JOB_COLUMNS = (
    "job_id",
    "uuid",
    "hour_start",
    "host",
    "gpu_index",
    "name",
    "user",
    "account",
    "partition",
    "steps",
    "first_seconds",
    "last_seconds",
    "held_seconds",
    "busy_seconds",
    "idle_seconds",
    "activity_seconds",
    "activity_sampled_seconds",
    "activity_histogram",
    "memory_peak_bytes",
    "price_usd_per_hour",
    "cost_usd",
    "idle_cost_usd",
    "held_cost_usd",
    "reclaimed_usd",
)
"""Every column of job_hours (schema 10)."""

JOB_KEY = ("job_id", "uuid", "hour_start")

STATE_TABLE_COLUMNS = (
    "uuid",
    "gpu_index",
    "name",
    "state",
    "state_since_seconds",
    "inactive_since_seconds",
    "inactive_seconds",
    "activity_mean_ratio",
    "last_seconds",
)
