"""The change each workload needs (`workloads.yaml`): its GPU resource request before
and after, the node pool it moves to, and for a vLLM server the
`--gpu-memory-utilization` that fits its planned share.

Resource names: a whole GPU stays `nvidia.com/gpu` (one per GPU of the unit); a MIG
instance is `nvidia.com/mig-<profile>` (the device plugin's mixed strategy); a time-sliced
share is `nvidia.com/gpu.shared` (the plugin's `renameByDefault`). On a DRA node
(`dra.py`) a MIG or shared unit requests no resource: `resource_claims` is its pods'
`spec.resourceClaims` entry, naming its claim template or its GPU's shared claim (their
containers list `resources.claims: [{name: gpu}]`).

vLLM preallocates `--gpu-memory-utilization` (default 0.9) of the memory its device shows,
so two servers at the default cannot share a GPU. On a time-sliced GPU each server gets
its planned share, need x (1 + headroom) / GPU memory, plus an equal part (1 / replicas)
of what the `replicas` largest shares of its class leave free below `SHARED_BUDGET_RATIO`
(CUDA contexts and the allocator need the rest), rounded down to 0.01: whichever
`replicas` of the class's servers the scheduler puts on one GPU fit together; alone on
a GPU or a MIG instance (which shows only its own memory)
the default stays unless the need with headroom is above it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpuwatch.plan.apply import dra
from gpuwatch.plan.apply.layout import Layout, Node, PlannedGpu
from gpuwatch.plan.apply.yaml_text import YamlValue, dump
from gpuwatch.plan.mig import mig_table
from gpuwatch.plan.model import WorkloadNeed
from gpuwatch.sizing import GpuCatalog

VLLM_DEFAULT_UTILIZATION = 0.9
SHARED_BUDGET_RATIO = 0.95


def _floor2(ratio: float) -> float:
    return math.floor(ratio * 100 + 1e-9) / 100


def _ceil2(ratio: float) -> float:
    return math.ceil(ratio * 100 - 1e-9) / 100


def device_memory_bytes(gpu: PlannedGpu, unit: WorkloadNeed, catalog: GpuCatalog) -> float:
    """The memory the unit's device shows: its MIG instance's, else the GPU's (bytes)."""
    p = gpu.placement
    table = mig_table(p.gpu_id)
    if p.mode == "mig" and table is not None:
        return float(table.profile(p.mig_profiles[p.units.index(unit.key)]).memory_bytes)
    return float(catalog.get(p.gpu_id).memory_bytes)


def vllm_utilization(
    gpu: PlannedGpu, unit: WorkloadNeed, catalog: GpuCatalog, headroom: float
) -> float | None:
    """The `--gpu-memory-utilization` of a vLLM unit on its planned device, None when its
    need is unknown (module docstring)."""
    if unit.memory_bytes is None:
        return None
    memory = device_memory_bytes(gpu, unit, catalog)
    share = unit.memory_bytes * (1 + headroom) / memory
    if gpu.replicas:
        peers = gpu.peers or gpu.units
        shares = [(u.memory_bytes or 0.0) * (1 + headroom) / memory for u in peers]
        largest = sorted(shares, reverse=True)[: gpu.replicas]
        spare = max(0.0, SHARED_BUDGET_RATIO - sum(largest)) / gpu.replicas
        return _floor2(share + spare)
    return min(1.0, max(VLLM_DEFAULT_UTILIZATION, _ceil2(share)))


def resources(gpu: PlannedGpu, unit: WorkloadNeed) -> dict[str, YamlValue]:
    """The unit's GPU request on its planned device."""
    p = gpu.placement
    if p.mode == "mig":
        return {f"nvidia.com/mig-{p.mig_profiles[p.units.index(unit.key)]}": 1}
    if gpu.replicas:
        return {"nvidia.com/gpu.shared": 1}
    return {"nvidia.com/gpu": unit.gpu_count}


def workloads_document(
    layout: Layout, catalog: GpuCatalog, headroom: float
) -> dict[str, YamlValue]:
    """Every unit the plan places or releases, with its change."""
    nodes: Mapping[str, Node] = {node.name: node for node in layout.nodes}
    claims = dra.dra_objects(layout).pod_claims
    entries: list[YamlValue] = []
    seen: set[str] = set()
    for node in layout.nodes:
        for gpu in node.gpus:
            for unit in gpu.units:
                if unit.key in seen:
                    continue  # a multi-GPU job: one entry
                seen.add(unit.key)
                entry = _entry(unit, gpu, nodes[layout.target[unit.key]], catalog, headroom)
                if entry["change"] == "move" and unit.key in claims:
                    entry["to"] = {}
                    entry["resource_claims"] = [claims[unit.key]]
                entries.append(entry)
    for unit in layout.unplaced:
        entries.append(
            {
                **_who(unit),
                "change": "keep",
                "from": {"nvidia.com/gpu": unit.gpu_count},
                "to": {"nvidia.com/gpu": unit.gpu_count},
                "node": unit.host,
                "reason": "unplaced: need unknown or no candidate holds it",
            }
        )
    for unit in layout.released:
        entries.append(
            {
                **_who(unit),
                "change": "release",
                "from": {"nvidia.com/gpu": unit.gpu_count},
                "to": {},
            }
        )
    return {"workloads": entries}


def _who(unit: WorkloadNeed) -> dict[str, YamlValue]:
    return {
        "workload": unit.label,
        "namespace": unit.namespace,
        "pods": list(unit.pods),
        "host": unit.host,
    }


def _entry(
    unit: WorkloadNeed, gpu: PlannedGpu, node: Node, catalog: GpuCatalog, headroom: float
) -> dict[str, YamlValue]:
    entry: dict[str, YamlValue] = _who(unit)
    entry["change"] = "move" if node.new else "keep"
    entry["from"] = {"nvidia.com/gpu": unit.gpu_count}
    entry["to"] = resources(gpu, unit) if node.new else {"nvidia.com/gpu": unit.gpu_count}
    entry["node"] = node.name
    if node.new:
        entry["node_selector"] = {"gpuwatch/pool": node.pool}
    if unit.server == "vllm" and node.new:
        ratio = vllm_utilization(gpu, unit, catalog, headroom)
        if ratio is not None:
            entry["vllm_args"] = {"--gpu-memory-utilization": ratio}
    return entry


def render(layout: Layout, catalog: GpuCatalog, headroom: float) -> str:
    """`workloads.yaml`."""
    return dump(
        workloads_document(layout, catalog, headroom),
        (
            "gpuwatch plan: each workload's GPU request before and after, and where it goes.",
            "Names are data: every string below is quoted.",
        ),
    )
