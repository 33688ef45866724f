"""`gpuwatch status`: one snapshot as a terminal table or as JSON."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from gpuwatch.snapshot import FleetSnapshot, GpuSample

GIB = 1024**3


def gpu_to_dict(gpu: GpuSample) -> dict[str, Any]:
    """One GPU as a flat JSON-ready dict (identity fields at the top level)."""
    data = dataclasses.asdict(gpu)
    identity = data.pop("identity")
    data.pop("pod", None)
    data["xid_errors_total"] = {str(code): n for code, n in gpu.xid_errors_total}
    data["throttle_reasons"] = None if gpu.throttle_reasons is None else list(gpu.throttle_reasons)
    data["processes"] = [
        {k: v for k, v in dataclasses.asdict(p).items() if k != "pod"} for p in gpu.processes or ()
    ]
    return {**identity, **data}


def render_json(snapshot: FleetSnapshot) -> str:
    """A JSON list, one object per GPU."""
    return json.dumps([gpu_to_dict(g) for g in snapshot.gpus], indent=2)


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f}%"


def _memory(gpu: GpuSample) -> str:
    total = gpu.identity.memory_total_bytes
    if gpu.memory_used_bytes is None or total is None:
        return "n/a"
    return f"{gpu.memory_used_bytes / GIB:.1f} / {total / GIB:.1f} GiB"


def _processes(gpu: GpuSample) -> str:
    if gpu.processes is None:
        return "n/a"
    if not gpu.processes:
        return "-"
    return "\n".join(
        f"{p.pid} {p.name or '?'} "
        + ("" if p.memory_used_bytes is None else f"{p.memory_used_bytes / GIB:.1f} GiB")
        for p in gpu.processes
    )


def render_table(snapshot: FleetSnapshot, console: Console) -> None:
    """Print the GPUs as a table."""
    driver = snapshot.driver
    versions = f"driver {driver.driver_version or '?'}, CUDA {driver.cuda_driver_version or '?'}"
    table = Table(title=f"GPUs ({versions})")
    for column in (
        "#",
        "name",
        "uuid",
        "memory used/total",
        "util",
        "SM active",
        "power",
        "temp",
        "processes",
    ):
        table.add_column(column)
    for gpu in snapshot.gpus:
        ident = gpu.identity
        if not gpu.up:
            table.add_row(
                str(ident.index), ident.name, ident.uuid, f"DOWN: {gpu.error}", "", "", "", "", ""
            )
            continue
        table.add_row(
            str(ident.index),
            ident.name,
            ident.uuid,
            _memory(gpu),
            _ratio(gpu.utilization_ratio),
            _ratio(gpu.sm_active_ratio),
            "n/a" if gpu.power_watts is None else f"{gpu.power_watts:.0f} W",
            "n/a" if gpu.temperature_celsius is None else f"{gpu.temperature_celsius:.0f} °C",
            _processes(gpu),
        )
    console.print(table)
