"""Slack Block Kit messages for GPU alerts. Pure: data in, a JSON-able dict out.

One message per host and evaluation: a header naming the host, one section per GPU
with news (model, condition, since when, processes holding memory, the cheaper GPU for
overprovisioned ones, cost when known) and a context line carrying the message id
(`alert #N`, the outbox row id) so duplicates can be recognised. `text` is always set:
Slack shows it in notifications and where blocks cannot be rendered.

Names (host, GPU model, process, pod, workload, file) are data, never markup: every
message kind (alert, resolve, reminder, `gpuwatch alert test`, the report summary)
writes them with `name_text` alone, which puts them in inline code on one line (see
there). Every text object stays within Slack's limits (`fit_lines`, `clip_text`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from gpuwatch.alerts.policy import AlertEvent, JobOnGpu, PodOnGpu
from gpuwatch.core.snapshot import FleetSnapshot, GpuSample, ProcessSample
from gpuwatch.core.text import counted, flatten, shorten, usd
from gpuwatch.core.units import GIB
from gpuwatch.core.verdict import need_basis_phrase, recommendation_rule_phrase
from gpuwatch.slack.mrkdwn import (
    TEXT_MAX_CHARS,
    clip_text,
    escape,
    fit_lines,
    header_text,
    name_text,
)

CostHook = Callable[[FleetSnapshot, str], tuple[float | None, float | None]]
"""(the snapshot being evaluated, GPU uuid) -> (cost so far in USD, price in USD per
hour); either may be None."""

MAX_GPU_SECTIONS = 20  # Slack allows 50 blocks: header, summary, 2 per GPU, "more", context
MAX_PROCESSES = 5
MAX_PODS = 5
MAX_JOBS = 5
HEADER_MAX_CHARS = 150

_EMOJI = {
    "idle": ":zzz:",
    "held": ":lock:",
    "underutilized": ":turtle:",
    "overprovisioned": ":elephant:",
    "resolved": ":white_check_mark:",
}


@dataclass(frozen=True, slots=True)
class GpuCost:
    """Cost facts for one GPU, from the optional cost hook (None: not known yet)."""

    cost_usd: float | None = None  # what the current condition has cost so far, USD
    price_usd_per_hour: float | None = None  # what the GPU costs per hour, USD


def format_utc(epoch_seconds: float) -> str:
    """`2026-01-01 00:00 UTC` for epoch seconds."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def format_duration(seconds: float) -> str:
    """A human duration with two units at most: `45 s`, `12 min`, `2 h 5 min`, `3 d 4 h`."""
    total = max(int(seconds), 0)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min"
    return f"{secs} s"


def _gpu_title(event: AlertEvent) -> str:
    name = name_text(event.gpu.identity.name) if event.gpu is not None else "unknown model"
    return f"*GPU {event.verdict.gpu_index}* {name}"


def _process_line(gpu: GpuSample | None) -> str | None:
    if gpu is None or gpu.processes is None:
        return "Processes: not reported"
    if not gpu.processes:
        return "Processes: none"

    def used(proc: ProcessSample) -> int:
        return proc.memory_used_bytes or 0

    procs = sorted(gpu.processes, key=lambda p: (-used(p), p.pid))
    parts = []
    for proc in procs[:MAX_PROCESSES]:
        memory = "?" if proc.memory_used_bytes is None else f"{proc.memory_used_bytes / GIB:.1f}"
        parts.append(f"{name_text(proc.name, 60)} (pid {proc.pid}, {memory} GiB)")
    more = len(procs) - MAX_PROCESSES
    if more > 0:
        parts.append(f"… and {more} more")
    return "Processes holding memory: " + ", ".join(parts)


def pod_name(pod: PodOnGpu) -> str:
    """`` `namespace/pod` `` as one name (`name_text`): the namespace shortened to 60
    characters, the whole to 170."""
    return name_text(f"{shorten(flatten(pod.pod.namespace), 60)}/{flatten(pod.pod.pod)}", 170)


def job_name(job: JobOnGpu) -> str:
    """`` job `id` of `user` (account `account`) ``: each name alone as data (`name_text`)."""
    ref = job.job
    user = name_text(ref.user, 60) if ref.user else "an unknown user"
    account = f" (account {name_text(ref.account, 60)})" if ref.account else ""
    return f"job {name_text(ref.job_id, 40)} of {user}{account}"


class _Holder(Protocol):
    """A pod or Slurm job on a GPU: `running` is False when it holds the GPU, runs nothing."""

    @property
    def running(self) -> bool: ...


_H = TypeVar("_H", bound=_Holder)


def _holders_line(
    label: str, holders: Sequence[_H], name: Callable[[_H], str], limit: int
) -> str | None:
    """`label: ` then the first `limit` holders by `name` (flagged when they hold the GPU
    and run nothing) and how many more; None without holders (no attribution)."""
    if not holders:
        return None
    parts = [name(h) + ("" if h.running else " (holds it, runs nothing)") for h in holders[:limit]]
    more = len(holders) - limit
    if more > 0:
        parts.append(f"… and {more} more")
    return f"{label}: " + ", ".join(parts)


def _cost_line(cost: GpuCost | None) -> str | None:
    # Cost so far and $/h come from the (later) pricing hook; absent until it gives them.
    if cost is None:
        return None
    parts = []
    if cost.cost_usd is not None:
        parts.append(f"Cost so far: {usd(cost.cost_usd)}")
    if cost.price_usd_per_hour is not None:
        parts.append(f"{usd(cost.price_usd_per_hour)}/h")
    return " · ".join(parts) or None


def gpu_section_text(event: AlertEvent, now_seconds: float, cost: GpuCost | None) -> str:
    """The mrkdwn text of one GPU's section (at most TEXT_MAX_CHARS characters)."""
    verdict = event.verdict
    since = verdict.state_since_seconds
    since_text = f"since {format_utc(since)} ({format_duration(now_seconds - since)})"
    if event.kind == "resolved":
        lines = [
            f"{_EMOJI['resolved']} {_gpu_title(event)} is *{escape(verdict.state)}* again "
            f"(was {escape(event.condition)})",
            f"State *{escape(verdict.state)}* {since_text}",
        ]
        return clip_text("\n".join(lines))
    previous = escape(event.previous or "")
    suffix = {"new": "", "reminder": " (reminder)", "changed": f" (was {previous})"}
    state_line = (
        "S" + since_text[1:]
        if verdict.state == event.condition
        else f"State *{escape(verdict.state)}* {since_text}"
    )
    lines = [
        f"{_EMOJI.get(event.condition, ':warning:')} {_gpu_title(event)} is "
        f"*{escape(event.condition)}*{suffix[event.kind]}",
        state_line,
    ]
    if verdict.activity_mean_ratio is not None:
        lines.append(f"Mean activity over the window: {verdict.activity_mean_ratio:.1%}")
    if verdict.workload:
        lines.append(f"Workload: {name_text(verdict.workload)}")
    holders = (
        _holders_line("Pods", event.pods, pod_name, MAX_PODS),
        _holders_line("Slurm", event.jobs, job_name, MAX_JOBS),
    )
    for line in (*holders, _process_line(event.gpu)):
        if line:
            lines.append(line)
    rec = verdict.recommendation
    if verdict.overprovisioned and rec is not None:
        rule = recommendation_rule_phrase(rec.rule)
        basis = need_basis_phrase(verdict.need_basis)
        lines.append(
            f"Overprovisioned: {name_text(rec.gpu_id)} would do, saving "
            f"{usd(rec.savings_usd_per_hour)}/h (rents at {usd(rec.rent_usd_per_hour)}/h)"
            + (f"; {escape(basis)}" if basis else "")
            + (f"; candidates: {escape(rule)}" if rule else "")
        )
    cost_line = _cost_line(cost)
    if cost_line:
        lines.append(cost_line)
    return clip_text("\n".join(lines))


def _fallback_line(event: AlertEvent, now_seconds: float) -> str:
    verdict = event.verdict
    name = name_text(event.gpu.identity.name) if event.gpu is not None else "unknown model"
    head = f"GPU {verdict.gpu_index} ({name})"
    state, condition = escape(verdict.state), escape(event.condition)
    if event.kind == "resolved":
        return f"{head} {state} again (was {condition})"
    since = format_duration(now_seconds - verdict.state_since_seconds)
    if verdict.state == event.condition:
        text = f"{head} {condition} for {since}"
    else:
        text = f"{head} {condition} ({state} for {since})"
    if event.pods:
        text += " (pods " + ", ".join(pod_name(p) for p in event.pods[:MAX_PODS]) + ")"
    if event.jobs:
        text += " (" + ", ".join(job_name(j) for j in event.jobs[:MAX_JOBS]) + ")"
    rec = verdict.recommendation
    if verdict.overprovisioned and rec is not None:
        text += f", {name_text(rec.gpu_id)} would save {usd(rec.savings_usd_per_hour)}/h"
    return text


def _summary(events: Sequence[AlertEvent]) -> str:
    wasted = sum(1 for e in events if e.kind != "resolved")
    resolved = len(events) - wasted
    parts = []
    if wasted:
        parts.append(f"{counted(wasted, 'GPU')} {'needs' if wasted == 1 else 'need'} attention")
    if resolved:
        parts.append(f"{counted(resolved, 'GPU')} back to work")
    return ", ".join(parts)


def _more_gpus(count: int) -> str:
    return f"… and {counted(count, 'more GPU')}"


def build_alert_message(
    *,
    hostname: str,
    events: Sequence[AlertEvent],
    message_id: int,
    now_seconds: float,
    costs: Mapping[str, GpuCost] | None = None,
    mention: str | None = None,
) -> dict[str, Any]:
    """The webhook payload (`text` + `blocks`) for one evaluation's events on one host.

    `mention` is the one piece of markup from the config (`<!here>`); everything else
    taken from the host is data (`name_text`).
    """
    costs = costs or {}
    host = name_text(hostname)
    wasted = any(e.kind != "resolved" for e in events)
    header = f"{'GPU waste' if wasted else 'GPUs back to work'} on {hostname}"
    summary = _summary(events)
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": header_text(header, HEADER_MAX_CHARS)},
        },
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": f"{mention} {summary}" if mention else summary},
        },
    ]
    for event in events[:MAX_GPU_SECTIONS]:
        blocks.append({"type": "divider"})
        text = gpu_section_text(event, now_seconds, costs.get(event.verdict.uuid))
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
    hidden = len(events) - MAX_GPU_SECTIONS
    if hidden > 0:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _more_gpus(hidden)}})
    blocks.append(
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": f"gpuwatch · {host} · alert #{message_id} · {format_utc(now_seconds)}",
                }
            ],
        }
    )
    start = f"{mention} " if mention else ""
    start += f"{host}: {summary}: "
    lines = fit_lines(
        [_fallback_line(e, now_seconds) for e in events],
        TEXT_MAX_CHARS - len(start),
        _more_gpus,
        "; ",
    )
    return {"text": start + lines, "blocks": blocks}


def build_test_message(hostname: str, now_seconds: float) -> dict[str, Any]:
    """The payload `gpuwatch alert test` sends (the host name as data, `name_text`)."""
    text = f"gpuwatch on {name_text(hostname)}: test message, Slack alerts reach this channel."
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f":wave: {text}"}},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"gpuwatch · {format_utc(now_seconds)}"}],
            },
        ],
    }
