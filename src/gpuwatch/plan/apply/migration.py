"""The order to apply the plan in (`migration.yaml`): capacity first, then moves, then
releases, then removals, so no workload is ever without a place.

1. add every node to add, with its labels; wait until the mig-manager reports
   `nvidia.com/mig.config.state=success` and the device plugin advertises the resources;
2. move each unit (its new request and node selector, `workloads.yaml`): its target
   exists since step 1, and its old GPU is still there until the move completes;
3. release idle and held units (their GPUs are not in the plan);
4. remove each host none of whose units stays, once every unit on it has moved or been
   released.

Kept nodes are never relabelled (a MIG or plugin change there would stop the workloads
running on them). `check_order` replays a list of steps and names the first that breaks
the rule; the tests run it on every plan they emit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuwatch.plan.apply import nodes as node_labels
from gpuwatch.plan.apply.layout import Layout
from gpuwatch.plan.apply.yaml_text import YamlValue, dump


def steps(layout: Layout) -> list[dict[str, YamlValue]]:
    """The steps in order, numbered from 1."""
    out: list[dict[str, YamlValue]] = []
    for node in layout.nodes:
        if node.new:
            out.append(
                {
                    "action": "add-node",
                    "node": node.name,
                    "instance_type": node.instance_type,
                    "labels": node_labels.labels(node),
                }
            )
    for node in layout.nodes:
        if not node.new:
            continue
        moved: set[str] = set()
        for gpu in node.gpus:
            for unit in gpu.units:
                if unit.key not in moved:
                    moved.add(unit.key)
                    out.append(
                        {
                            "action": "move",
                            "workload": unit.label,
                            "unit": unit.key,
                            "from_node": unit.host,
                            "to_node": node.name,
                        }
                    )
    for unit in layout.released:
        out.append(
            {
                "action": "release",
                "workload": unit.label,
                "unit": unit.key,
                "from_node": unit.host,
            }
        )
    for host, _, _ in layout.removed_hosts:
        out.append({"action": "remove-node", "node": host})
    return [{"step": n, **step} for n, step in enumerate(out, start=1)]


def check_order(
    order: Sequence[Mapping[str, YamlValue]],
    placed_on: Mapping[str, str],
    kept_nodes: Sequence[str],
) -> str | None:
    """Replay `order` and return what first leaves a workload without a place (None: never).

    `placed_on` maps each unit (its key) to its node at the start; `kept_nodes` are the
    nodes present at the start. A move needs its target node present; removing a node
    needs no workload still placed on it."""
    present = set(kept_nodes) | set(placed_on.values())
    where = dict(placed_on)
    for step in order:
        action = step["action"]
        if action == "add-node":
            present.add(str(step["node"]))
        elif action == "move":
            target = str(step["to_node"])
            if target not in present:
                return f"step {step['step']}: moves onto {target!r} before it is added"
            where[str(step["unit"])] = target
        elif action == "release":
            where.pop(str(step["unit"]), None)
        elif action == "remove-node":
            node = str(step["node"])
            left = sorted(w for w, n in where.items() if n == node)
            if left:
                return f"step {step['step']}: removes {node!r} while {left[0]!r} is on it"
            present.discard(node)
    return None


def render(layout: Layout) -> str:
    """`migration.yaml`."""
    return dump(
        {"steps": steps(layout)},
        (
            "gpuwatch plan: apply in this order (add capacity, move, release, remove).",
            "Wait after each add-node until nvidia.com/mig.config.state=success.",
        ),
    )
