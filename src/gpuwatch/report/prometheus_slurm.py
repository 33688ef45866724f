"""The report's Slurm account and user days from a Prometheus-compatible API.

Per UTC day and host, for each account (and each user): the growth of
`gpuwatch_slurm_{account,user}_cost_usd_total`, `..._idle_cost_usd_total` and
`..._held_cost_usd_total`, and of `gpuwatch_slurm_reclaimed_usd_total` summed by that
label (the counters' exact growth, as the report reads every counter); its jobs'
GPU-seconds, the `gpuwatch_gpu_job_info` samples of its jobs that day x the host's scrape
interval; and the job IDs seen in them. The agent publishes the held counter beside the
cost counter, so a cost series with no held series beside it comes from an older agent:
that row's held $ is unknown (None), not 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from gpuwatch.promapi.labels import LabelKey, host_of
from gpuwatch.report.model import SlurmDay
from gpuwatch.report.prometheus_queries import _Day

KINDS = ("account", "user")


def group_of(labels: LabelKey, kind: str) -> str | None:
    """The account or user a series names; the agent's own label wins when a scrape
    without `honor_labels: true` renamed it `exported_<kind>`. None without it."""
    found = dict(labels)
    return found.get(f"exported_{kind}", found.get(kind))


def slurm_rows(
    days: list[_Day],
    results: Mapping[str, Any],
    deltas: Mapping[tuple[str, int], dict[LabelKey, float]],
    intervals: Mapping[str, float],
) -> list[SlurmDay]:
    """One row per (account or user, host) per day with a cost, a reclaim or a held GPU."""
    rows: list[SlurmDay] = []
    for i, d in enumerate(days):
        sums: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0] * 5)
        jobs: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        costed: set[tuple[str, str, str]] = set()  # with a cost series that day
        held: set[tuple[str, str, str]] = set()  # with a held series that day
        for kind in KINDS:
            roles = (
                f"slurm_{kind}_cost",
                f"slurm_{kind}_idle_cost",
                "slurm_reclaimed",
                f"slurm_{kind}_held_cost",
            )
            for column, role in enumerate(roles):
                for labels, value in deltas.get((role, i), {}).items():
                    name = group_of(labels, kind)
                    if name is None:
                        continue
                    key = (kind, host_of(labels), name)
                    sums[key][column] += value
                    if column == 0:
                        costed.add(key)
                    elif column == 3:
                        held.add(key)
            info: dict[LabelKey, float] = results.get(f"job_info@{i}", {})
            for labels, count in info.items():
                name = group_of(labels, kind)
                if name is None:
                    continue
                host = host_of(labels)
                interval = intervals.get(host, intervals.get("", 0.0))
                sums[(kind, host, name)][4] += count * interval
                jobs[(kind, host, name)].add(dict(labels).get("job_id", ""))
        for key, (cost, idle, reclaimed, held_cost, seconds) in sorted(sums.items()):
            kind, host, name = key
            rows.append(
                SlurmDay(
                    kind,
                    host,
                    name,
                    d.day,
                    cost_usd=cost,
                    idle_cost_usd=idle,
                    held_cost_usd=None if key in costed and key not in held else held_cost,
                    reclaimed_usd=reclaimed,
                    gpu_seconds=seconds,
                    job_ids=tuple(sorted(jobs[key])),
                )
            )
    return rows
