"""Where each planned GPU goes: a node the fleet keeps, or a node to add.

A "keep" (one unit, or one multi-GPU job, planned on the part it runs on, whole) stays on
its host; so do units the plan leaves unplaced. Every other planned GPU goes on a node to
add, packed per GPU model into nodes of one kind (whole, one MIG layout, or time-sliced
with one replica count) because the GPU operator configures MIG and the device plugin per
node. A time-sliced class's GPUs (`Placement.share_class`: one pool, model and replica
count) get nodes of their own, with a `gpuwatch/pool` label value of their own: the
scheduler may put any `replicas` of the pods that select that label on one GPU, so two
classes (two namespaces, or two replica counts) never share a node. A multi-GPU job's
GPUs go on one node. A host none of whose units stays is removed
once its units have moved (`migration.py`).

Node size: the most GPUs of that model one host of the fleet has, else `DEFAULT_GPUS_PER_NODE`
(most data-centre parts are sold as 8-GPU instances). The instance type is named by the
GPU model and that count ("H100-SXM-80GB x8") until the plan knows the provider's
instance types. No I/O here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuwatch.plan.model import Placement, Plan, WorkloadNeed

DEFAULT_GPUS_PER_NODE = 8

LABEL_VALUE_MAX_CHARS = 63
"""Kubernetes' limit on a label value (alphanumerics, '-', '_', '.'; alphanumeric ends)."""

_NOT_LABEL = re.compile(r"[^a-z0-9._-]+")


def label_value(text: str) -> str:
    """`text` as a valid Kubernetes label value: lower-case, other characters as '-',
    alphanumeric at both ends, at most 63 characters (a longer one cut and given 8 hex
    digits of its SHA-1 so two long names stay apart)."""
    value = _NOT_LABEL.sub("-", text.lower()).strip("-._") or "x"
    if len(value) > LABEL_VALUE_MAX_CHARS:
        digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]  # noqa: S324 -- a name, not a secret
        value = value[: LABEL_VALUE_MAX_CHARS - 9].rstrip("-._") + "-" + digest
    return value


NodeKind = tuple[str, ...]
"""("whole",), ("mig", "3g.40gb", "3g.40gb") (the layout, sorted), or ("shared", "3")."""


@dataclass(frozen=True, slots=True)
class PlannedGpu:
    """One GPU of the plan on its node: the placement and the units on it."""

    placement: Placement
    units: tuple[WorkloadNeed, ...]
    peers: tuple[WorkloadNeed, ...] = ()  # time-sliced: every unit of its class

    @property
    def replicas(self) -> int:
        """Time-sliced: the replicas per GPU of its class (0 otherwise)."""
        p = self.placement
        replicas = p.replicas or len(p.units)
        return replicas if p.mode == "shared" and replicas > 1 else 0

    @property
    def kind(self) -> NodeKind:
        """What the node must be configured as for this GPU."""
        p = self.placement
        if p.mode == "mig":
            return ("mig", *sorted(p.mig_profiles))
        if self.replicas:
            return ("shared", str(self.replicas))
        return ("whole",)


@dataclass(frozen=True, slots=True)
class Node:
    """A node of the planned fleet: kept (`host` is its name) or to add (`new`)."""

    name: str  # the host's name, or "new-<model>-<n>" for a node to add
    gpu_id: str  # catalog id of its GPUs
    gpus_per_node: int
    kind: NodeKind
    gpus: tuple[PlannedGpu, ...]  # one per planned GPU on it (multi-GPU jobs: one each)
    new: bool
    pool: str = ""  # nodes to add: the `gpuwatch/pool` label value that selects them

    @property
    def instance_type(self) -> str:
        """The GPU model and its count per node, e.g. "H100-SXM-80GB x8"."""
        return f"{self.gpu_id} x{self.gpus_per_node}"


@dataclass(frozen=True, slots=True)
class Layout:
    """The planned fleet by node, and the hosts to remove."""

    nodes: tuple[Node, ...]
    removed_hosts: tuple[tuple[str, str | None, int], ...]  # (host, GPU model, GPUs seen)
    target: Mapping[str, str]  # unit key -> node name
    released: tuple[WorkloadNeed, ...]  # idle and held units (no GPU in the plan)
    unplaced: tuple[WorkloadNeed, ...] = ()  # units that keep their GPU (no candidate holds them)


def _host_inventory(needs: Sequence[WorkloadNeed]) -> dict[str, tuple[str | None, set[str]]]:
    hosts: dict[str, tuple[str | None, set[str]]] = {}
    for need in needs:
        _, uuids = hosts.setdefault(need.host, (need.current_gpu_id, set()))
        uuids.update(need.gpu_uuids)
    return hosts


def _groups(plan: Plan) -> list[tuple[Placement, ...]]:
    """Placements, a multi-GPU job's placements together."""
    grouped: dict[int, list[Placement]] = {}
    out: list[tuple[Placement, ...]] = []
    for placement in plan.placements:
        if placement.group > 0:
            grouped.setdefault(placement.group, []).append(placement)
        else:
            out.append((placement,))
    out.extend(tuple(group) for _, group in sorted(grouped.items()))
    return out


def _is_keep(group: tuple[Placement, ...], units: Sequence[WorkloadNeed]) -> bool:
    return (
        len(units) == 1
        and all(p.mode == "whole" and p.gpu_id == units[0].current_gpu_id for p in group)
        and len(group) == units[0].gpu_count
    )


def node_size(needs: Sequence[WorkloadNeed], gpu_id: str) -> int:
    """GPUs per node of a model: the most one host of the fleet has, else the default."""
    counts = [len(uuids) for model, uuids in _host_inventory(needs).values() if model == gpu_id]
    return max(counts, default=DEFAULT_GPUS_PER_NODE)


def plan_layout(plan: Plan, needs: Sequence[WorkloadNeed]) -> Layout:
    """Assign every planned GPU to a kept host or a node to add (module docstring)."""
    by_key = {need.key: need for need in needs}
    kept: dict[str, list[PlannedGpu]] = {}
    target: dict[str, str] = {}
    to_add: dict[tuple[str, NodeKind, str], list[tuple[PlannedGpu, ...]]] = {}
    peers: dict[int, list[WorkloadNeed]] = {}
    for p in plan.placements:
        if p.mode == "shared" and p.share_class:
            peers.setdefault(p.share_class, []).extend(by_key[k] for k in p.units if k in by_key)
    for group in _groups(plan):
        units = tuple(by_key[k] for k in group[0].units if k in by_key)
        number = group[0].share_class if group[0].mode == "shared" else 0
        gpus = tuple(PlannedGpu(p, units, tuple(peers.get(number, ()))) for p in group)
        if _is_keep(group, units):
            kept.setdefault(units[0].host, []).extend(gpus)
            target[units[0].key] = units[0].host
            continue
        kind = gpus[0].kind
        to_add.setdefault(
            (group[0].gpu_id, kind, _pool(group[0].gpu_id, kind, gpus[0])), []
        ).append(gpus)
    for key in plan.unplaced:
        if key in by_key:
            target[key] = by_key[key].host
            kept.setdefault(by_key[key].host, [])
    inventory = _host_inventory(needs)
    nodes = [
        Node(
            host,
            inventory[host][0] or "unknown",
            len(inventory[host][1]),
            gpus[0].kind if gpus else ("whole",),
            tuple(gpus),
            new=False,
        )
        for host, gpus in sorted(kept.items())
    ]
    for (gpu_id, kind, pool), items in sorted(to_add.items()):
        nodes.extend(
            _pack(gpu_id, kind, pool, items=items, size=node_size(needs, gpu_id), target=target)
        )
    removed = tuple(
        (host, model, len(uuids))
        for host, (model, uuids) in sorted(inventory.items())
        if host not in kept
    )
    released = tuple(by_key[k] for k in plan.reclaimed if k in by_key)
    unplaced = tuple(by_key[k] for k in plan.unplaced if k in by_key)
    return Layout(tuple(nodes), removed, target, released, unplaced)


def _pool(gpu_id: str, kind: NodeKind, gpu: PlannedGpu) -> str:
    """The `gpuwatch/pool` label value of the nodes a GPU goes on: its model and kind,
    and for a time-sliced class its namespace (where it has one) and number."""
    parts = [gpu_id, *kind]
    number = gpu.placement.share_class
    if kind[0] == "shared" and number:
        namespaces = {unit.namespace for unit in gpu.peers}
        if len(namespaces) == 1 and None not in namespaces:
            parts.append(str(next(iter(namespaces))))
        parts.append(f"c{number}")
    return label_value("-".join(parts))


def _pack(
    gpu_id: str,
    kind: NodeKind,
    pool: str,
    *,
    items: list[tuple[PlannedGpu, ...]],
    size: int,
    target: dict[str, str],
) -> list[Node]:
    """First-fit decreasing of jobs (GPU counts) into nodes of `size` GPUs, one kind."""
    bins: list[list[PlannedGpu]] = []
    sizes: list[int] = []
    for item in sorted(items, key=lambda gpus: -len(gpus)):
        for i, used in enumerate(bins):
            if len(used) + len(item) <= sizes[i]:
                used.extend(item)
                break
        else:
            bins.append(list(item))
            sizes.append(max(size, len(item)))
    out = []
    for n, (gpus, count) in enumerate(zip(bins, sizes, strict=True), start=1):
        name = f"new-{pool}-{n}"
        for gpu in gpus:
            for unit in gpu.units:
                target[unit.key] = name
        out.append(Node(name, gpu_id, count, kind, tuple(gpus), new=True, pool=pool))
    return out
