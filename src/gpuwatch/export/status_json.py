"""The status document: one snapshot's GPUs, verdicts and costs as JSON.

Served by the agent at `/status.json` and printed by `gpuwatch status --json`, so both
have one shape. Built only from a `FleetSnapshot` that is already computed: nothing
here calls NVML. Names (host, GPU, process) are data and may hold any character;
`encode` writes JSON with every non-ASCII and control character escaped, and a float
that is not finite becomes null (JSON has no NaN).

Shape (`format` names it; fields are only ever added):

    {"format": "gpuwatch-status/1", "source": "agent" | "local" | "simulation",
     "hostname": str, "timestamp_seconds": float, "driver": {...},
     "collectors": [{"name", "success", "duration_seconds"}],
     "utilization_busy_ratio": {"1h": ratio, ...}, "tokens": [{...}],
     "gpus": [{identity and telemetry fields, "processes": [...],
               "verdict": {...} | null, "cost": {...} | null,
               "rent_vs_buy": {...} | null}]}
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from gpuwatch.core.snapshot import FleetSnapshot, GpuSample

STATUS_PATH = "/status.json"
FORMAT = "gpuwatch-status/1"
SOURCES = ("agent", "local", "simulation")


def plain(value: Any) -> Any:
    """Dataclasses, tuples and floats as JSON-ready values (non-finite floats: None)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def gpu_to_dict(gpu: GpuSample, *, process_names: bool = True) -> dict[str, Any]:
    """One GPU's sample, flat: identity fields at the top level, then the readings.

    With `process_names` false each process's `name` is null (see `status_document`).
    """
    data = plain(gpu)
    identity = data.pop("identity")
    data.pop("pod", None)
    data["xid_errors_total"] = {str(code): n for code, n in gpu.xid_errors_total}
    processes = []
    for proc in data["processes"] or ():
        proc.pop("pod", None)
        if not process_names:
            proc["name"] = None
        processes.append(proc)
    data["processes"] = None if gpu.processes is None else processes
    return {**identity, **data}


def _without_gpu_keys(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("gpu_index", "uuid")}


def status_document(
    snapshot: FleetSnapshot,
    *,
    source: str,
    process_names: bool = True,
    analysis: bool = True,
) -> dict[str, Any]:
    """The status document of `snapshot`.

    `process_names` false leaves process names out (the agent sends them to loopback
    clients only, unless `agent.per_process_metrics` already publishes them);
    `analysis` false leaves verdicts and costs out (a one-off local sample has no
    window behind it, so its verdicts would mean nothing).
    """
    if source not in SOURCES:
        raise ValueError(f"unknown status source {source!r}")
    cost = snapshot.cost
    verdicts = {v.uuid: v for v in snapshot.verdicts} if analysis else {}
    costs = {c.uuid: c for c in cost.gpus} if analysis else {}
    positions = {p.uuid: p for p in cost.rent_vs_buy} if analysis else {}
    gpus = []
    for gpu in snapshot.gpus:
        uuid = gpu.identity.uuid
        entry = gpu_to_dict(gpu, process_names=process_names)
        verdict = verdicts.get(uuid)
        entry["verdict"] = None
        if verdict is not None:
            entry["verdict"] = _without_gpu_keys(plain(verdict))
            entry["verdict"]["required_memory_bytes"] = dict(verdict.required_memory_bytes)
        gpu_cost = costs.get(uuid)
        entry["cost"] = None if gpu_cost is None else _without_gpu_keys(plain(gpu_cost))
        position = positions.get(uuid)
        entry["rent_vs_buy"] = None if position is None else _without_gpu_keys(plain(position))
        gpus.append(entry)
    return {
        "format": FORMAT,
        "source": source,
        "hostname": snapshot.hostname,
        "timestamp_seconds": plain(snapshot.timestamp_seconds),
        "driver": plain(snapshot.driver),
        "collectors": plain(snapshot.collectors),
        "utilization_busy_ratio": (
            {window: plain(ratio) for window, ratio in cost.utilization_busy} if analysis else {}
        ),
        "tokens": plain(cost.tokens) if analysis else [],
        "gpus": gpus,
    }


def encode(document: dict[str, Any], *, indent: int | None = None) -> bytes:
    """`document` as ASCII JSON: control characters and non-ASCII escaped, never NaN."""
    return json.dumps(document, indent=indent, ensure_ascii=True, allow_nan=False).encode()
