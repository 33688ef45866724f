"""A job summary as text (names escaped for a terminal: names are data) or JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime

from gpuwatch.core.text import ABSENT, duration, plain_name, usd
from gpuwatch.report.job_summary import JobSummary

GIB = 1024**3


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _ratio(value: float | None) -> str:
    return ABSENT if value is None else f"{value:.1%}"


def _gib(value: float | None) -> str:
    return ABSENT if value is None else f"{value / GIB:.1f} GiB"


def render_json(summary: JobSummary) -> str:
    """Every figure of the summary, in base units (s, bytes, USD, ratios 0-1)."""
    data = asdict(summary)
    for gpu, item in zip(summary.gpus, data["gpus"], strict=True):
        item["idle_all_along"] = gpu.idle_all_along
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def render_text(summary: JobSummary) -> str:
    """The summary for a terminal."""
    s = summary
    steps = ", ".join(plain_name(step) for step in s.steps) or ABSENT
    lines = [
        f"Job {plain_name(s.job_id)}: user {plain_name(s.user) or ABSENT}, account "
        f"{plain_name(s.account) or ABSENT}, partition {plain_name(s.partition) or ABSENT}",
        f"  span        {_when(s.start_seconds)} to {_when(s.end_seconds)} "
        f"({duration(s.end_seconds - s.start_seconds)}); steps {steps}",
        f"  GPU-hours   {s.gpu_hours:.3f} ({len(s.gpus)} GPUs), idle {s.idle_gpu_hours:.3f} "
        f"({usd(s.idle_hours_cost_usd)})",
        f"  cost        {usd(s.cost_usd)}, of it the GPUs' idle part {usd(s.idle_cost_usd)}",
        f"  activity    mean {_ratio(s.activity_mean_ratio)}, p95 {_ratio(s.activity_p95_ratio)}",
        f"  memory      peak {_gib(s.memory_peak_bytes)}"
        + ("" if s.need_bytes is None else f", declared workload needs {_gib(s.need_bytes)}"),
        "  GPUs",
    ]
    for g in s.gpus:
        idle = " (idle all along)" if g.idle_all_along else ""
        lines.append(
            f"    {plain_name(g.host)} #{ABSENT if g.gpu_index is None else g.gpu_index} "
            f"{plain_name(g.model)} {plain_name(g.uuid)}: {g.held_seconds / 3600:.3f} GPU-h, "
            f"activity {_ratio(g.activity_mean_ratio)}, peak {_gib(g.memory_peak_bytes)}, "
            f"{usd(g.cost_usd)} (idle {usd(g.idle_cost_usd)}){idle}"
        )
    a = s.advice
    advice = [f"{a.gpus} GPU{'s' if a.gpus != 1 else ''}"]
    if a.gpu_model is not None:
        advice.append(f"on {plain_name(a.gpu_model)} (candidates: {plain_name(a.rule or '')})")
    if a.mig_profile is not None:
        advice.append(f"or a MIG {plain_name(a.mig_profile)} slice each")
    same = a.gpus == len(s.gpus) and a.gpu_model is None and a.mig_profile is None
    lines.append("  next time   " + ("as requested" if same else "request " + " ".join(advice)))
    return "\n".join(lines) + "\n"
