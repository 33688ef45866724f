"""The MIG layout per node as mig-parted's config file (`mig-configs.yaml`).

Format (NVIDIA/mig-parted, api/spec/v1/spec.go): `version: v1` and `mig-configs`, a map
of config name -> list of {devices: "all" or GPU indices, mig-enabled, mig-devices:
{profile: count}}. The GPU operator's mig-manager applies the config a node's
`nvidia.com/mig.config` label names (`MIG_CONFIG_LABEL`); the file goes in the
ConfigMap the operator's `migManager.config` points to, which replaces the default one,
so it also carries `all-disabled` for the nodes without MIG.
"""

from __future__ import annotations

from collections import Counter

from gpuwatch.plan.apply.layout import Layout, Node, label_value
from gpuwatch.plan.apply.yaml_text import YamlValue, dump

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
ALL_DISABLED = "all-disabled"


def mig_devices(node: Node) -> dict[str, int]:
    """Instances per profile of one GPU of a MIG node (its kind's layout)."""
    return dict(sorted(Counter(node.kind[1:]).items()))


def config_name(node: Node) -> str:
    """The mig-parted config a node gets: "all-disabled", or "gpuwatch-<model>-<n>x<profile>…"."""
    if node.kind[0] != "mig":
        return ALL_DISABLED
    parts = [f"{count}x{profile}" for profile, count in mig_devices(node).items()]
    return label_value("-".join(("gpuwatch", node.gpu_id, *parts)))


def mig_configs(layout: Layout) -> dict[str, YamlValue]:
    """The mig-configs document: one named config per MIG layout in the plan."""
    configs: dict[str, YamlValue] = {ALL_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for node in layout.nodes:
        if node.kind[0] == "mig":
            configs[config_name(node)] = [
                {"devices": "all", "mig-enabled": True, "mig-devices": mig_devices(node)}
            ]
    return {"version": "v1", "mig-configs": configs}


def node_labels(node: Node) -> dict[str, str]:
    """The label that selects the node's MIG config (nodes to add and kept nodes alike)."""
    return {MIG_CONFIG_LABEL: config_name(node)}


def render(layout: Layout) -> str:
    """`mig-configs.yaml`."""
    return dump(
        mig_configs(layout),
        (
            "gpuwatch plan: MIG layouts for NVIDIA mig-parted (api/spec/v1).",
            f"A node gets a config through its {MIG_CONFIG_LABEL} label (nodes.yaml).",
        ),
    )
