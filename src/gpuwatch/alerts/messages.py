"""Slack Block Kit messages for GPU alerts. Pure: data in, a JSON-able dict out.

One message per host and evaluation: a header naming the host, one section per GPU
with news (model, condition, since when, processes holding memory, the cheaper GPU for
overprovisioned ones, cost when known) and a context line carrying the message id
(`alert #N`, the outbox row id) so duplicates can be recognised. `text` is always set:
Slack shows it in notifications and where blocks cannot be rendered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpuwatch.alerts.policy import AlertEvent, PodOnGpu
from gpuwatch.snapshot import GpuSample, ProcessSample

CostHook = Callable[[str], tuple[float | None, float | None]]
"""GPU uuid -> (cost so far in USD, price in USD per hour); either may be None."""

MAX_GPU_SECTIONS = 20  # Slack allows 50 blocks: header, summary, 2 per GPU, "more", context
MAX_PROCESSES = 5
MAX_PODS = 5
MAX_NAME_CHARS = 80
HEADER_MAX_CHARS = 150
TEXT_MAX_CHARS = 3000
GIB = 2**30

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


def escape(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _short(text: str, limit: int = MAX_NAME_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def flatten(text: str) -> str:
    """`text` on one line: every non-printable character (newline, tab, line separator,
    escape...) written as its Python escape (`\\n`, `\\x1b`), so that a name can add
    no line and no terminal control to a message."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def name_text(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """A name (host, GPU model, process, workload) as mrkdwn data: flattened, shortened
    to `limit` characters, escaped."""
    return escape(_short(flatten(text), limit))


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


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _gpu_title(event: AlertEvent) -> str:
    name = name_text(event.gpu.identity.name) if event.gpu is not None else "unknown model"
    return f"GPU {event.verdict.gpu_index} · {name}"


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
        parts.append(f"`{proc.pid}` {name_text(proc.name, 60)} {memory} GiB")
    more = len(procs) - MAX_PROCESSES
    if more > 0:
        parts.append(f"and {more} more")
    return "Processes holding memory: " + ", ".join(parts)


def pod_name(pod: PodOnGpu) -> str:
    """`namespace/pod` on one line, shortened, escaped."""
    return f"{name_text(pod.pod.namespace, 60)}/{name_text(pod.pod.pod, 100)}"


def _pods_line(pods: Sequence[PodOnGpu]) -> str | None:
    """The Kubernetes pods holding or using the GPU (None without attribution)."""
    if not pods:
        return None
    parts = [
        f"`{pod_name(p)}`" + ("" if p.running else " (holds it, runs nothing)")
        for p in pods[:MAX_PODS]
    ]
    more = len(pods) - MAX_PODS
    if more > 0:
        parts.append(f"and {more} more")
    return "Pods: " + ", ".join(parts)


def _cost_line(cost: GpuCost | None) -> str | None:
    # Cost so far and $/h come from the (later) pricing hook; absent until it gives them.
    if cost is None:
        return None
    parts = []
    if cost.cost_usd is not None:
        parts.append(f"Cost so far: {_usd(cost.cost_usd)}")
    if cost.price_usd_per_hour is not None:
        parts.append(f"{_usd(cost.price_usd_per_hour)}/h")
    return " · ".join(parts) or None


def gpu_section_text(event: AlertEvent, now_seconds: float, cost: GpuCost | None) -> str:
    """The mrkdwn text of one GPU's section."""
    verdict = event.verdict
    since = verdict.state_since_seconds
    since_text = f"since {format_utc(since)} ({format_duration(now_seconds - since)})"
    if event.kind == "resolved":
        lines = [
            f"{_EMOJI['resolved']} *{_gpu_title(event)}* is *{escape(verdict.state)}* again "
            f"(was {event.condition})",
            f"State *{escape(verdict.state)}* {since_text}",
        ]
        return "\n".join(lines)
    suffix = {"new": "", "reminder": " (reminder)", "changed": f" (was {event.previous})"}
    state_line = (
        "S" + since_text[1:]
        if verdict.state == event.condition
        else f"State *{escape(verdict.state)}* {since_text}"
    )
    lines = [
        f"{_EMOJI.get(event.condition, ':warning:')} *{_gpu_title(event)}* is "
        f"*{event.condition}*{suffix[event.kind]}",
        state_line,
    ]
    if verdict.activity_mean_ratio is not None:
        lines.append(f"Mean activity over the window: {verdict.activity_mean_ratio:.1%}")
    if verdict.workload:
        lines.append(f"Workload: {name_text(verdict.workload)}")
    for line in (_pods_line(event.pods), _process_line(event.gpu)):
        if line:
            lines.append(line)
    rec = verdict.recommendation
    if verdict.overprovisioned and rec is not None:
        lines.append(
            f"Overprovisioned: `{name_text(rec.gpu_id)}` would do, saving "
            f"{_usd(rec.savings_usd_per_hour)}/h (rents at {_usd(rec.rent_usd_per_hour)}/h)"
        )
    cost_line = _cost_line(cost)
    if cost_line:
        lines.append(cost_line)
    return "\n".join(lines)


def _fallback_line(event: AlertEvent, now_seconds: float) -> str:
    verdict = event.verdict
    name = name_text(event.gpu.identity.name) if event.gpu is not None else "unknown model"
    head = f"GPU {verdict.gpu_index} ({name})"
    if event.kind == "resolved":
        return f"{head} {verdict.state} again (was {event.condition})"
    since = format_duration(now_seconds - verdict.state_since_seconds)
    if verdict.state == event.condition:
        text = f"{head} {event.condition} for {since}"
    else:
        text = f"{head} {event.condition} ({verdict.state} for {since})"
    if event.pods:
        text += " (pods " + ", ".join(pod_name(p) for p in event.pods[:MAX_PODS]) + ")"
    rec = verdict.recommendation
    if verdict.overprovisioned and rec is not None:
        text += f", {name_text(rec.gpu_id)} would save {_usd(rec.savings_usd_per_hour)}/h"
    return text


def _summary(events: Sequence[AlertEvent]) -> str:
    wasted = sum(1 for e in events if e.kind != "resolved")
    resolved = len(events) - wasted
    parts = []
    if wasted:
        parts.append(f"{wasted} GPU{'s' if wasted != 1 else ''} need attention")
    if resolved:
        parts.append(f"{resolved} GPU{'s' if resolved != 1 else ''} back to work")
    return ", ".join(parts)


def build_alert_message(
    *,
    hostname: str,
    events: Sequence[AlertEvent],
    message_id: int,
    now_seconds: float,
    costs: Mapping[str, GpuCost] | None = None,
    mention: str | None = None,
) -> dict[str, Any]:
    """The webhook payload (`text` + `blocks`) for one evaluation's events on one host."""
    costs = costs or {}
    host = flatten(hostname)
    wasted = any(e.kind != "resolved" for e in events)
    header = f"GPU waste on {host}" if wasted else f"GPUs back to work on {host}"
    summary = _summary(events)
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _short(header, HEADER_MAX_CHARS)},
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
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f"…and {hidden} more GPUs"}}
        )
    blocks.append(
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": f"gpuwatch · {escape(host)} · alert #{message_id} · "
                    f"{format_utc(now_seconds)}",
                }
            ],
        }
    )
    lines = "; ".join(_fallback_line(e, now_seconds) for e in events)
    text = f"{escape(host)}: {summary}: {lines}"
    if mention:
        text = f"{mention} {text}"
    return {"text": _short(text, TEXT_MAX_CHARS), "blocks": blocks}


def build_test_message(hostname: str, now_seconds: float) -> dict[str, Any]:
    """The payload `gpuwatch alert test` sends."""
    text = f"gpuwatch on {flatten(hostname)}: test message, Slack alerts reach this channel."
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f":wave: {escape(text)}"}},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"gpuwatch · {format_utc(now_seconds)}"}],
            },
        ],
    }
