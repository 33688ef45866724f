"""The attribution join, pure: the kubelet's holds resolved to this host's GPUs, then
each GPU's NVML processes joined with them.

`resolve_holds` maps every container's device IDs (UUID, MIG UUID, minor number or
NVML index) and DRA claim devices (`gpu.nvidia.com`'s `gpu-<minor>`: `gpuwatch.kube.dra`)
to a GPU or MIG device here; `join_gpu` sets each process's pod from its
cgroup and the pod names, and the GPU's own pod when exactly one container holds the
whole GPU. No I/O, no state, no logging: the kubelet, `/proc` and the pod-log folder are
read by `gpuwatch.collectors.attribution`, which calls these once a tick.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace

from gpuwatch.analysis.activity import works_alone
from gpuwatch.core.snapshot import (
    GpuAttribution,
    GpuSample,
    MigInstanceSample,
    PodAllocationSample,
    PodRef,
    ProcessSample,
)
from gpuwatch.kube.cgroup import PodCgroup
from gpuwatch.kube.device_ids import DeviceRef, is_gpu_resource, parse_device_id
from gpuwatch.kube.dra import NVIDIA_GPU_DRIVER, parse_device_name
from gpuwatch.kube.podlogs import PodName
from gpuwatch.kube.podresources import PodAllocation


@dataclass(frozen=True, slots=True)
class Hold:
    """One (container, GPU or MIG device) hold, before the processes are joined."""

    gpu_index: int
    uuid: str
    mig_uuid: str | None
    gpu_instance_id: int | None
    pod: PodRef
    resource_name: str
    device_ids: tuple[str, ...]
    claim: str = ""  # the DRA claim that gave it; "" for a device plugin's


@dataclass(frozen=True, slots=True)
class Resolved:
    """The kubelet's holds resolved to this host's GPUs: the holds, the device plugins'
    IDs that name no GPU here (sorted), the `gpu.nvidia.com` DRA devices that name none
    ((driver, pool, device, reason), sorted) and the devices of other DRA drivers
    ((driver, count), sorted)."""

    holds: list[Hold]
    unresolved: list[str]
    dra_unresolved: list[tuple[str, str, str, str]]
    dra_ignored: list[tuple[str, int]]


_Key = tuple[int, str | None, PodRef, str, str]


def resolve_holds(
    pods: Iterable[PodAllocation], gpus: tuple[GpuSample, ...], extra_resources: Iterable[str]
) -> Resolved:
    """Every container's GPU holds — device plugins' IDs and DRA claims — resolved to
    this host's GPUs. Replicas of one GPU held by one container are one hold; one DRA
    device shared by several containers (a claim they share) is one hold each."""
    extra = tuple(extra_resources)
    by_uuid = {g.identity.uuid.lower(): g for g in gpus}  # keys and lookups: lower case
    by_minor = {g.identity.minor_number: g for g in gpus if g.identity.minor_number is not None}
    by_index = gpus_by_index(gpus)
    mig_by_uuid = {m.uuid.lower(): (g, m) for g in gpus for m in g.mig_instances}
    merged: dict[_Key, list[str]] = {}
    instances: dict[tuple[int, str | None], int | None] = {}
    unresolved: set[str] = set()
    dra_unresolved: set[tuple[str, str, str, str]] = set()
    ignored: Counter[str] = Counter()
    for pod in pods:
        for container in pod.containers:
            ref = PodRef(pod.namespace, pod.name, container.name)
            for devices in container.devices:
                if not is_gpu_resource(devices.resource_name, extra):
                    continue
                for raw in devices.device_ids:
                    target = _resolve(
                        parse_device_id(raw), by_uuid, by_minor, by_index, mig_by_uuid
                    )
                    if target is None:
                        unresolved.add(raw)
                        continue
                    gpu, mig_uuid, gi = target
                    key = (gpu.identity.index, mig_uuid, ref, devices.resource_name, "")
                    merged.setdefault(key, []).append(raw)
                    instances[(gpu.identity.index, mig_uuid)] = gi
            for claim in container.claims:
                for device in claim.devices:
                    if device.driver_name != NVIDIA_GPU_DRIVER:
                        ignored[device.driver_name] += 1
                        continue
                    found = _resolve_dra(device.device_name, by_minor)
                    if isinstance(found, str):
                        dra_unresolved.add(
                            (device.driver_name, device.pool_name, device.device_name, found)
                        )
                        continue
                    gpu, mig = found
                    mig_uuid = None if mig is None else mig.uuid
                    key = (gpu.identity.index, mig_uuid, ref, device.driver_name, claim.claim_name)
                    merged.setdefault(key, []).append(f"{device.pool_name}/{device.device_name}")
                    instances[(gpu.identity.index, mig_uuid)] = (
                        None if mig is None else mig.gpu_instance_id
                    )
    holds = [
        Hold(
            index,
            by_index[index].identity.uuid,
            mig_uuid,
            instances[(index, mig_uuid)],
            ref,
            resource,
            tuple(ids),
            claim,
        )
        for (index, mig_uuid, ref, resource, claim), ids in merged.items()
    ]
    return Resolved(holds, sorted(unresolved), sorted(dra_unresolved), sorted(ignored.items()))


def _resolve_dra(
    device_name: str, by_minor: dict[int, GpuSample]
) -> tuple[GpuSample, MigInstanceSample | None] | str:
    """The GPU (and MIG device) a `gpu.nvidia.com` device names, or why none
    (`dra.UNRESOLVED_REASONS`): a whole GPU by minor number; a MIG device by its parent's
    minor number, its GPU instance's profile ID and placement start."""
    named = parse_device_name(device_name)
    if isinstance(named, str):
        return named
    gpu = by_minor.get(named.minor)
    if gpu is None:
        return "no_such_gpu"
    if not named.is_mig:
        return gpu, None
    instances = gpu.mig_instances
    if any(m.gpu_instance_profile_id is None or m.placement_start is None for m in instances):
        return "mig_placement"
    for mig in instances:
        if (mig.gpu_instance_profile_id, mig.placement_start) == (
            named.gi_profile_id,
            named.placement_start,
        ):
            return gpu, mig
    return "no_such_mig"


def gpus_by_index(gpus: tuple[GpuSample, ...]) -> dict[int, GpuSample]:
    """The GPU samples by NVML index."""
    return {g.identity.index: g for g in gpus}


def _resolve(
    ref: DeviceRef | None,
    by_uuid: dict[str, GpuSample],
    by_minor: dict[int, GpuSample],
    by_index: dict[int, GpuSample],
    mig_by_uuid: dict[str, tuple[GpuSample, MigInstanceSample]],
) -> tuple[GpuSample, str | None, int | None] | None:
    """(GPU, MIG device UUID or None, GPU instance ID or None) a device ID names here."""
    if ref is None:
        return None
    gpu: GpuSample | None = None
    if ref.uuid is not None and ref.uuid.startswith("MIG-"):
        found = mig_by_uuid.get(ref.uuid.lower())
        if found is None:
            return None
        parent, mig = found
        return parent, mig.uuid, mig.gpu_instance_id
    if ref.uuid is not None:
        gpu = by_uuid.get(ref.uuid.lower())
    elif ref.minor is not None:
        gpu = by_minor.get(ref.minor)
    elif ref.index is not None:
        gpu = by_index.get(ref.index)
    if gpu is None:
        return None
    if ref.gpu_instance_id is None:
        return gpu, None, None
    for mig in gpu.mig_instances:
        if mig.gpu_instance_id == ref.gpu_instance_id:
            return gpu, mig.uuid, mig.gpu_instance_id
    return None


@dataclass(frozen=True, slots=True)
class Processes:
    """What this tick knows of the GPU processes: each readable PID's pod (None: in no
    pod), the PIDs whose cgroup cannot be read, and pod names by UID."""

    cgroups: dict[int, PodCgroup | None]
    unmapped: set[int]
    names: dict[str, PodName]


def join_gpu(
    gpu: GpuSample, holds: list[Hold], known: Processes, noise_floor: float
) -> tuple[GpuSample, GpuAttribution]:
    """One GPU's processes joined with its holds."""
    processes: list[ProcessSample] = []
    running: dict[int, list[int]] = {i: [] for i in range(len(holds))}
    unknown: dict[int, str] = {}
    if gpu.processes is None:
        unknown = dict.fromkeys(range(len(holds)), "no_process_list")
    unowned: list[int] = []
    unallocated: list[tuple[PodRef, int]] = []
    unmapped: list[int] = []
    for proc in gpu.processes or ():
        pod = _process_pod(holds, known.cgroups.get(proc.pid), known.names)
        processes.append(replace(proc, pod=pod))
        if proc.pid in known.unmapped:
            unmapped.append(proc.pid)
            for i, h in enumerate(holds):
                if h.gpu_instance_id is None or h.gpu_instance_id == proc.gpu_instance_id:
                    unknown.setdefault(i, "pid_unmapped")
        if not holds:
            unowned.append(proc.pid)
            continue
        if pod is None:
            continue  # a host process on a held GPU (or one we cannot read): nobody's
        matched = [
            i
            for i, h in enumerate(holds)
            if (h.pod.namespace, h.pod.pod) == (pod.namespace, pod.pod)
            and (h.gpu_instance_id is None or h.gpu_instance_id == proc.gpu_instance_id)
        ]
        if not matched:
            unallocated.append((pod, proc.pid))
            continue
        for i in matched:
            running[i].append(proc.pid)
    whole = [h for h in holds if h.mig_uuid is None]
    gpu_pod = None
    if len(whole) == 1 and len(holds) == 1:
        gpu_pod = whole[0].pod
    sample = replace(
        gpu,
        pod=gpu_pod,
        processes=None if gpu.processes is None else tuple(processes),
    )
    allocations = tuple(
        PodAllocationSample(
            gpu.identity.index,
            h.uuid,
            h.mig_uuid,
            h.pod,
            h.resource_name,
            h.device_ids,
            tuple(sorted(set(running[i]))),
            unknown.get(i),
            _works_alone(gpu, h, holds, noise_floor),
            h.claim,
        )
        for i, h in enumerate(holds)
    )
    return sample, GpuAttribution(
        gpu.identity.index,
        gpu.identity.uuid,
        allocations,
        tuple(unowned),
        tuple(unallocated),
        tuple(sorted(set(unmapped))),
    )


def _works_alone(gpu: GpuSample, hold: Hold, holds: list[Hold], noise_floor: float) -> bool:
    """The hold is the only one of its GPU (or MIG device) and that works (`works_alone`)."""
    return works_alone(gpu, hold.mig_uuid, [h.mig_uuid for h in holds], noise_floor)


def _process_pod(
    holds: list[Hold], cgroup: PodCgroup | None, names: dict[str, PodName]
) -> PodRef | None:
    """The pod of one process: its cgroup's pod UID named from the pod-log folder; the
    container is the one of that pod holding this GPU, else the pod's only one."""
    if cgroup is None:
        return None
    name = names.get(cgroup.pod_uid)
    if name is None:
        pods = {(h.pod.namespace, h.pod.pod) for h in holds}
        if len(pods) != 1:
            return None  # in a pod we cannot name, on a GPU that is not one pod's
        namespace, pod = next(iter(pods))
    else:
        namespace, pod = name.namespace, name.pod
    containers = sorted(
        {h.pod.container for h in holds if (h.pod.namespace, h.pod.pod) == (namespace, pod)}
    )
    if len(containers) == 1:
        container = containers[0]
    elif name is not None and len(name.containers) == 1:
        container = name.containers[0]
    else:
        container = ""
    return PodRef(namespace, pod, container)
