"""The NVIDIA device plugin's config per node kind (`device-plugin-configs.yaml`).

Format (NVIDIA/k8s-device-plugin, api/config/v1): `version: v1`, `flags.migStrategy`
(none | single | mixed), and `sharing.timeSlicing` or `sharing.mps` with
`renameByDefault` and `resources: [{name, replicas >= 2}]`. The GPU operator (and the
plugin's Helm chart) read a ConfigMap whose keys are config names and whose values are
such files; a node's `nvidia.com/device-plugin.config` label (`DEVICE_PLUGIN_LABEL`)
picks one. With `renameByDefault: true` a shared GPU is advertised as
`nvidia.com/gpu.shared`, so a pod asks for a share explicitly; the replica count is the
most units the plan puts on one GPU of that node. MIG nodes use the mixed strategy (one
`nvidia.com/mig-<profile>` resource per profile).
"""

from __future__ import annotations

from typing import Literal

from gpuwatch.plan.apply.layout import Layout, Node
from gpuwatch.plan.apply.yaml_text import Block, YamlValue, dump

DEVICE_PLUGIN_LABEL = "nvidia.com/device-plugin.config"
CONFIG_MAP_NAME = "gpuwatch-device-plugin-configs"

Sharing = Literal["timeSlicing", "mps"]


def device_plugin_config(
    mig_strategy: str, sharing: Sharing | None = None, replicas: int = 0
) -> dict[str, YamlValue]:
    """One plugin config: the MIG strategy and, when shared, the replicated resource."""
    config: dict[str, YamlValue] = {"version": "v1", "flags": {"migStrategy": mig_strategy}}
    if sharing is not None:
        if replicas < 2:
            raise ValueError(f"a shared GPU needs at least 2 replicas, not {replicas}")
        config["sharing"] = {
            sharing: {
                "renameByDefault": True,
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}],
            }
        }
    return config


def config_name(node: Node) -> str:
    """The config a node gets: gpuwatch-whole, gpuwatch-mig-mixed or gpuwatch-time-slicing-<n>."""
    if node.kind[0] == "mig":
        return "gpuwatch-mig-mixed"
    if node.kind[0] == "shared":
        return f"gpuwatch-time-slicing-{node.kind[1]}"
    return "gpuwatch-whole"


def configs(layout: Layout) -> dict[str, dict[str, YamlValue]]:
    """Config name -> config, for every kind of node in the plan."""
    out: dict[str, dict[str, YamlValue]] = {}
    for node in layout.nodes:
        if not node.new:
            continue  # a kept node keeps its labels: nothing is reconfigured under a workload
        name = config_name(node)
        if node.kind[0] == "mig":
            out[name] = device_plugin_config("mixed")
        elif node.kind[0] == "shared":
            out[name] = device_plugin_config("none", "timeSlicing", int(node.kind[1]))
        else:
            out[name] = device_plugin_config("none")
    return dict(sorted(out.items()))


def node_labels(node: Node) -> dict[str, str]:
    """The label that selects the node's plugin config."""
    return {DEVICE_PLUGIN_LABEL: config_name(node)}


def render(layout: Layout, namespace: str = "gpu-operator") -> str:
    """`device-plugin-configs.yaml`: a ConfigMap, one key per config (each a YAML file)."""
    data: dict[str, YamlValue] = {
        name: Block(dump(config)) for name, config in configs(layout).items()
    }
    config_map: dict[str, YamlValue] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP_NAME, "namespace": namespace},
        "data": data,
    }
    return dump(
        config_map,
        (
            "gpuwatch plan: NVIDIA device plugin configs (api/config/v1), one per node kind.",
            f"A node picks one through its {DEVICE_PLUGIN_LABEL} label (nodes.yaml); point the",
            "GPU operator's devicePlugin.config.name at this ConfigMap.",
        ),
    )
