"""Nodes to add and remove per instance type, and the labels of each node to add
(`nodes.yaml`). A kept node keeps its labels: nothing is reconfigured under a workload.
"""

from __future__ import annotations

from collections import Counter

from gpuwatch.plan.apply import device_plugin, dra, mig_parted
from gpuwatch.plan.apply.layout import Layout, Node
from gpuwatch.plan.apply.yaml_text import YamlValue, dump

POOL_LABEL = "gpuwatch/pool"
"""The label a node to add carries so that the workloads planned on it can select it."""


def labels(node: Node) -> dict[str, str]:
    """Every label a node to add must carry (the operator acts on the first two; a DRA
    node has no device plugin config to pick)."""
    plugin = {} if dra.is_dra_node(node) else device_plugin.node_labels(node)
    return {**mig_parted.node_labels(node), **plugin, POOL_LABEL: node.pool}


def _node(node: Node) -> dict[str, YamlValue]:
    used = len(node.gpus)
    entry: dict[str, YamlValue] = {
        "name": node.name,
        "instance_type": node.instance_type,
        "gpus": node.gpus_per_node,
        "planned_gpus": used,
        "kind": node.kind[0],
    }
    if node.kind[0] == "mig":
        entry["mig_devices_per_gpu"] = mig_parted.mig_devices(node)
    if node.kind[0] == "shared":
        entry["replicas_per_gpu"] = int(node.kind[1])
    entry["labels"] = labels(node) if node.new else {}
    return entry


def nodes_document(layout: Layout) -> dict[str, YamlValue]:
    """Per instance type: nodes to add, to remove, the net; then every node."""
    added = Counter(node.instance_type for node in layout.nodes if node.new)
    removed = Counter(f"{model or 'unknown'} x{count}" for _, model, count in layout.removed_hosts)
    summary: list[YamlValue] = [
        {
            "instance_type": kind,
            "add": added[kind],
            "remove": removed[kind],
            "net": added[kind] - removed[kind],
        }
        for kind in sorted(set(added) | set(removed))
    ]
    return {
        "instance_types": summary,
        "add": [_node(node) for node in layout.nodes if node.new],
        "keep": [_node(node) for node in layout.nodes if not node.new],
        "remove": [
            {"name": host, "instance_type": f"{model or 'unknown'} x{count}"}
            for host, model, count in layout.removed_hosts
        ],
    }


def render(layout: Layout) -> str:
    """`nodes.yaml`."""
    return dump(
        nodes_document(layout),
        (
            "gpuwatch plan: nodes to add (with their labels), keep and remove.",
            "An instance type is the GPU model and its GPUs per node.",
        ),
    )
