"""`gpuwatch status` as a terminal table, from a status document (`export/status_json.py`).

Readable at 80 columns: one line per GPU (state, for how long, $/h, idle $ so far,
activity, memory), one line per recommendation or problem, one line per process with
a short name. Every name is escaped (`core.text.flatten`) and rendered as plain
`rich.text.Text`, so neither rich markup nor terminal escape sequences in a name take
effect; every cell is one line, cut with an ellipsis when the terminal is narrow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from gpuwatch.core.text import flatten, usd
from gpuwatch.core.units import GIB
from gpuwatch.core.verdict import need_basis_phrase, recommendation_rule_phrase
from gpuwatch.status.names import short_gpu_name, short_process_name

NO_VALUE = "-"


def duration(seconds: float) -> str:
    """A compact duration: 45s, 12m, 1h05m, 3d04h."""
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _usd(value: float | None) -> str:
    return NO_VALUE if value is None else usd(value)


def _percent(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value * 100:.0f}%"


def _gib(value: float) -> str:
    return f"{value / GIB:.1f}" if value < 10 * GIB else f"{value / GIB:.0f}"


def _memory(gpu: dict[str, Any]) -> str:
    used, total = gpu.get("memory_used_bytes"), gpu.get("memory_total_bytes")
    if used is None or total is None:
        return NO_VALUE
    return f"{_gib(used)}/{_gib(total)} GiB"


def activity(gpu: dict[str, Any]) -> float | None:
    """The activity signal the analysis uses: GPM SM activity, else kernel-busy time,
    else (MIG) the busiest instance's SM activity."""
    for key in ("sm_active_ratio", "utilization_ratio"):
        if gpu.get(key) is not None:
            return float(gpu[key])
    instances = [m["sm_active_ratio"] for m in gpu.get("mig_instances") or ()]
    values = [float(v) for v in instances if v is not None]
    return max(values) if values else None


def _state(gpu: dict[str, Any], source: str) -> str:
    if not gpu.get("up"):
        return "down"
    verdict = gpu.get("verdict")
    if verdict is None:
        return "no agent" if source == "local" else "unknown"
    return flatten(str(verdict.get("state", "unknown")))


def _since(gpu: dict[str, Any], now: float) -> str:
    verdict = gpu.get("verdict")
    if not gpu.get("up") or verdict is None or verdict.get("state_since_seconds") is None:
        return NO_VALUE
    return duration(now - float(verdict["state_since_seconds"]))


def _price(gpu: dict[str, Any]) -> float | None:
    cost = gpu.get("cost") or {}
    price = cost.get("price") or {}
    value = price.get("usd_per_hour")
    return None if value is None else float(value)


def _cell(text: str, style: str = "") -> Text:
    return Text(text, style=style, no_wrap=True, overflow="ellipsis")


Column = tuple[str, JustifyMethod, int, bool]  # header, justification, most characters,
# whether a narrow terminal may shrink it (its cells are then cut with an ellipsis)
GPU_COLUMNS: tuple[Column, ...] = (
    ("#", "right", 3, False),
    ("GPU", "left", 16, True),
    ("state", "left", 13, False),
    ("for", "right", 6, False),
    ("$/h", "right", 8, False),
    ("idle $", "right", 10, False),
    ("util", "right", 4, False),
    ("memory", "right", 11, True),
)
PROCESS_COLUMNS: tuple[Column, ...] = (
    ("GPU", "right", 3, False),
    ("pid", "right", 8, False),
    ("process", "left", 40, True),
    ("memory", "right", 10, True),
    ("SM", "right", 4, False),
)


def _table(columns: Sequence[Column]) -> Table:
    """A borderless table whose cells are one line each, cut with an ellipsis."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), show_edge=False)
    for header, justify, max_width, shrinks in columns:
        table.add_column(
            header, justify=justify, max_width=max_width, no_wrap=not shrinks, overflow="ellipsis"
        )
    return table


def _gpu_table(gpus: Sequence[dict[str, Any]], source: str, now: float) -> Table:
    table = _table(GPU_COLUMNS)
    for gpu in gpus:
        state = _state(gpu, source)
        cost = gpu.get("cost") or {}
        up = bool(gpu.get("up"))
        table.add_row(
            _cell(str(gpu.get("index", "?"))),
            _cell(flatten(short_gpu_name(str(gpu.get("name") or "")))),
            _cell(state, "bold red" if state == "down" else ""),
            _cell(_since(gpu, now)),
            _cell(_usd(_price(gpu))),
            _cell(_usd(cost.get("idle_cost_usd_total"))),
            _cell(_percent(activity(gpu)) if up else NO_VALUE),
            _cell(_memory(gpu) if up else NO_VALUE),
        )
    return table


def _notes(gpus: Sequence[dict[str, Any]]) -> list[Text]:
    """One line per recommendation, per GPU that is down, and per pending GPU that has
    looked idle so far (the window has no evidence yet: not idle, not busy)."""
    lines = []
    for gpu in gpus:
        index = gpu.get("index", "?")
        xids = ", ".join(
            f"XID {code}" + (f" ({n} times)" if n > 1 else "")
            for code, n in (gpu.get("xid_errors_total") or {}).items()
        )
        if not gpu.get("up"):
            why = flatten(str(gpu.get("error") or "no answer"))
            lines.append(Text(f"GPU {index}: down ({why})" + (f"; {xids}" if xids else "")))
            continue
        if xids:
            lines.append(Text(f"GPU {index}: {xids}"))
        verdict = gpu.get("verdict") or {}
        inactive = verdict.get("inactive_seconds") or 0.0
        if verdict.get("state") == "pending" and inactive > 0:
            lines.append(Text(f"GPU {index}: pending, inactive for {duration(inactive)} so far"))
        recommendation = verdict.get("recommendation")
        if recommendation:
            workload = verdict.get("workload")
            what = f" for {flatten(str(workload))}" if workload else ""
            target = flatten(str(recommendation.get("gpu_id")))
            saving = _usd(recommendation.get("savings_usd_per_hour"))
            rule = recommendation_rule_phrase(str(recommendation.get("rule") or ""))
            chosen = f"; candidates: {flatten(rule)}" if rule else ""
            basis = need_basis_phrase(verdict.get("need_basis"))
            why = f" ({flatten(basis)})" if basis else ""
            lines.append(
                Text(
                    f"GPU {index}: overprovisioned{what}{why}; {target} would do, "
                    f"saving {saving}/h{chosen}"
                )
            )
    return lines


def _process_table(gpus: Sequence[dict[str, Any]]) -> Table | None:
    rows = []
    for gpu in gpus:
        for proc in gpu.get("processes") or ():
            name = proc.get("name")
            short = "(hidden)" if name is None else flatten(short_process_name(str(name)))
            memory = proc.get("memory_used_bytes")
            rows.append(
                (
                    str(gpu.get("index", "?")),
                    str(proc.get("pid", "?")),
                    short,
                    NO_VALUE if memory is None else f"{memory / GIB:.1f} GiB",
                    _percent(proc.get("sm_utilization_ratio")),
                )
            )
    if not rows:
        return None
    table = _table(PROCESS_COLUMNS)
    for row in rows:
        table.add_row(*(_cell(value) for value in row))
    return table


_ORIGINS = {
    "agent": "from the agent",
    "local": "one local sample, no agent",
    "simulation": "simulated here",
}


def _header(document: dict[str, Any]) -> Text:
    driver = document.get("driver") or {}
    host = flatten(str(document.get("hostname") or "this host"))
    versions = (
        f"driver {flatten(str(driver.get('driver_version') or '?'))}, "
        f"CUDA {flatten(str(driver.get('cuda_driver_version') or '?'))}"
    )
    origin = _ORIGINS.get(str(document.get("source")), "")
    return Text(f"{host}: {versions}" + (f" ({origin})" if origin else ""), style="bold")


def render_table(document: dict[str, Any], console: Console) -> None:
    """Print a status document: GPUs, then notes, then processes."""
    gpus = list(document.get("gpus") or ())
    source = str(document.get("source", "local"))
    now = float(document.get("timestamp_seconds") or 0.0)
    console.print(_header(document))
    console.print(_gpu_table(gpus, source, now))
    for line in _notes(gpus):
        console.print(line)
    processes = _process_table(gpus)
    if processes is not None:
        console.print()
        console.print(processes)
