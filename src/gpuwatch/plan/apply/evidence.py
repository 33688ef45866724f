"""Why each planned GPU holds what it holds (`evidence.yaml`): per unit, the basis of its
memory need, the need the plan sized on (the largest seen on that basis: the need's
peak), the need's 95th percentile, NVML's peak memory used (an upper bound: servers
preallocate), its p95 SM activity, kernel-busy time and DRAM bandwidth; per GPU, the
isolation (whole, MIG, time-sliced) and what happens if each unit's peak need is
`STRESS_RATIO` higher.

The stress test: on a MIG instance or a GPU alone, the unit's peak need x 1.2 against the
device's memory; on a time-sliced GPU, the sum over its units of (peak need x 1.2)
against the GPU's memory (time-slicing isolates no memory: all may peak together). The
verdict is "fits with headroom" (within memory / (1 + headroom)), "fits without headroom"
or "overflows" with the bytes missing.

Time-slicing lets the scheduler put any `replicas` of a node's shared units on one GPU,
not only the ones the plan grouped: `worst_landing` checks, per time-sliced node, the
`replicas` largest needs of all its units together against one GPU's memory.
"""

from __future__ import annotations

from gpuwatch.core.units import HOURS_PER_MONTH
from gpuwatch.plan.apply.layout import Layout, Node, PlannedGpu
from gpuwatch.plan.apply.workloads import device_memory_bytes
from gpuwatch.plan.apply.yaml_text import YamlValue, dump
from gpuwatch.plan.model import WorkloadNeed
from gpuwatch.sizing import GpuCatalog

STRESS_RATIO = 1.2
"""The peak multiplier of the "what if the peak is 20 % higher" check."""

ISOLATION = {"whole": "whole", "mig": "MIG", "shared": "time-sliced"}


def _peak(unit: WorkloadNeed) -> float:
    """The unit's peak need (bytes): what the plan sized it on."""
    return unit.memory_bytes or 0.0


def _unit(unit: WorkloadNeed) -> dict[str, YamlValue]:
    return {
        "workload": unit.label,
        "need_basis": unit.memory_basis,
        "memory_need_peak_bytes": unit.memory_bytes,
        "memory_need_p95_bytes": unit.memory_p95_bytes,
        "nvml_memory_used_peak_bytes": unit.memory_peak_bytes,
        "activity_p95_ratio": unit.activity_ratio,
        "kernel_busy_p95_ratio": unit.kernel_busy_ratio,  # what a time-sliced GPU adds up
        "bandwidth_p95_bytes_per_second": unit.bandwidth_bytes_per_second,
    }


def stress(gpu: PlannedGpu, catalog: GpuCatalog, headroom: float) -> dict[str, YamlValue]:
    """The peak + 20 % check of one planned GPU (module docstring)."""
    p = gpu.placement
    if p.mode == "mig":
        worst: dict[str, YamlValue] = {}
        worst_margin = float("inf")
        for unit in gpu.units:
            memory = device_memory_bytes(gpu, unit, catalog)
            check = _verdict(_peak(unit) * STRESS_RATIO, memory, headroom)
            margin = memory - _peak(unit) * STRESS_RATIO
            if margin < worst_margin:
                worst, worst_margin = {"workload": unit.label, **check}, margin
        return worst
    memory = float(catalog.get(p.gpu_id).memory_bytes)
    return _verdict(sum(_peak(u) for u in gpu.units) * STRESS_RATIO, memory, headroom)


def _verdict(load: float, memory: float, headroom: float) -> dict[str, YamlValue]:
    if load <= memory / (1 + headroom):
        verdict = "fits with headroom"
    elif load <= memory:
        verdict = "fits without headroom"
    else:
        verdict = "overflows"
    return {
        "memory_bytes": load,
        "device_memory_bytes": memory,
        "verdict": verdict,
        "missing_bytes": max(0.0, load - memory),
    }


def _gpu(node: Node, gpu: PlannedGpu, catalog: GpuCatalog, headroom: float) -> dict[str, YamlValue]:
    p = gpu.placement
    now = sum(u.current_usd_per_hour for u in gpu.units)
    entry: dict[str, YamlValue] = {
        "node": node.name,
        "gpu": p.gpu_id,
        "isolation": ISOLATION[p.mode if p.mode != "shared" or gpu.replicas else "whole"],
    }
    if p.mode == "mig":
        entry["mig_profiles"] = list(p.mig_profiles)
    entry["usd_per_hour"] = p.usd_per_hour
    if p.group == 0:  # a multi-GPU job's saving is counted once, on `moves` in the JSON
        entry["saves_usd_per_month"] = (now - p.usd_per_hour) * HOURS_PER_MONTH
    entry["units"] = [_unit(u) for u in gpu.units]
    entry["if_peak_20_percent_higher"] = stress(gpu, catalog, headroom)
    return entry


def worst_landing(node: Node, catalog: GpuCatalog, headroom: float) -> dict[str, YamlValue]:
    """The largest `replicas` needs of a time-sliced node's class (its units where the
    plan names no class) on one GPU (bytes)."""
    replicas = int(node.kind[1])
    units = {u.key: u for gpu in node.gpus for u in (gpu.peers or gpu.units)}
    needs = sorted((_peak(u) for u in units.values()), reverse=True)
    memory = float(catalog.get(node.gpu_id).memory_bytes)
    return {
        "node": node.name,
        "replicas_per_gpu": replicas,
        **_verdict(sum(needs[:replicas]), memory, headroom),
    }


def evidence_document(layout: Layout, catalog: GpuCatalog, headroom: float) -> dict[str, YamlValue]:
    """One entry per planned GPU on a node to add (the moves), kept GPUs after."""
    moved = [
        _gpu(node, gpu, catalog, headroom) for node in layout.nodes if node.new for gpu in node.gpus
    ]
    kept = [
        _gpu(node, gpu, catalog, headroom)
        for node in layout.nodes
        if not node.new
        for gpu in node.gpus
    ]
    landings = [
        worst_landing(node, catalog, headroom) for node in layout.nodes if node.kind[0] == "shared"
    ]
    return {
        "headroom_ratio": headroom,
        "moves": moved,
        "kept": kept,
        "time_sliced_worst_landing": landings,
    }


def render(layout: Layout, catalog: GpuCatalog, headroom: float) -> str:
    """`evidence.yaml`."""
    return dump(
        evidence_document(layout, catalog, headroom),
        (
            "gpuwatch plan: the evidence behind each planned GPU. Bytes, bytes/s, ratios 0-1.",
            "if_peak_20_percent_higher: every unit's peak x 1.2 against the device's memory.",
        ),
    )
