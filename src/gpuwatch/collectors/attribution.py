"""The attribution collector: which pod holds each GPU, and which pod each process runs in.

Two halves, so the kubelet is never asked on the scrape path or the sampling tick:

- `refresh()` runs on the agent's scheduler every `kubernetes.list_interval_seconds`:
  the kubelet's pod-resources `List` (and `GetAllocatableResources` where it exists)
  and a scan of the pod-log folder (pod UID -> namespace and name). Its outcome is
  `gpuwatch_collector_success{collector="attribution"}` and `reason` (`ok` or a
  `FAILURE_REASONS` cause found by probing the socket), one log line per change. A
  failed `GetAllocatableResources` degrades to `List` alone. A listing older than
  `STALE_LISTINGS` intervals is *stale*: its holds are kept (a kubelet restart must not
  resolve alerts nor drop pods from OpenCost) until the kubelet answers with a listing
  that drops them, but no stale tick is charged to pods.
- `attribute(gpus)` runs in every tick: it joins the newest listing with NVML's
  processes (device IDs by UUID, MIG UUID, minor number for GKE's forms, or NVML
  index for the NVIDIA plugin's index strategy;
  processes by `<proc_root>/<pid>/cgroup` -> pod UID -> name) and returns the GPU
  samples with `pod` set, plus an `Attribution`. NVML reports host PIDs: in a container
  `proc_root` must be the host's `/proc` (the chart mounts it at `/host/proc`). A PID
  whose cgroup cannot be read leaves its GPU's holders' allocated-idle unknown, never 1.

Rules: a GPU's own series carry a pod only when exactly one container holds the whole
GPU; processes carry the pod their cgroup names (the container: the one of that pod
holding the GPU, else its only container). Nothing is ever copied to several pods.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from gpuwatch.analysis.activity import activity_of
from gpuwatch.collectors.base import timed
from gpuwatch.core.clock import Clock
from gpuwatch.core.failures import CollectorFailedError
from gpuwatch.core.health import Outage
from gpuwatch.core.snapshot import (
    Attribution,
    CollectorResult,
    GpuAttribution,
    GpuSample,
    MigInstanceSample,
    PodAllocationSample,
    PodRef,
    ProcessSample,
)
from gpuwatch.kube.cgroup import PodCgroup, parse_cgroup
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.kube.device_ids import DeviceRef, is_gpu_resource, parse_device_id
from gpuwatch.kube.podlogs import PodName, scan_pod_logs
from gpuwatch.kube.podresources import (
    ContainerDevices,
    PodAllocation,
    PodResourcesClient,
    PodResourcesError,
    failure_reason,
)

log = logging.getLogger(__name__)

_UNREADABLE = "unreadable"
"""`_cgroup`'s answer for a PID whose cgroup file cannot be read (not cached)."""

STALE_LISTINGS = 3
"""A listing older than this many list intervals is stale: kept, marked, charged nothing."""

_HINTS = {
    "permission_denied": "the kubelet makes pod-resources/ root-only (0750): run the agent "
    "as uid 0 (every capability may be dropped) or give it CAP_DAC_OVERRIDE",
    "no_socket": "mount the kubelet's pod-resources folder (hostPath, read-only) and check "
    "kubernetes.pod_resources_socket",
    "unavailable": "nothing accepts on the socket: the kubelet is down or restarting",
    "timeout": "the kubelet did not answer within kubernetes.timeout_seconds",
    "not_implemented": "the server has no pod-resources v1 List (a kubelet before 1.20?)",
}
"""What to do, per failure reason, in the one log line (`error`: the gRPC status says)."""


@dataclass(frozen=True, slots=True)
class Listing:
    """What one refresh read: the kubelet's pods, allocatable devices and pod names."""

    taken_at_seconds: float
    pods: tuple[PodAllocation, ...]
    allocatable: tuple[ContainerDevices, ...] | None
    names_by_uid: dict[str, PodName]


@dataclass(frozen=True, slots=True)
class _Hold:
    """One (container, GPU or MIG device) hold, before the processes are joined."""

    gpu_index: int
    uuid: str
    mig_uuid: str | None
    gpu_instance_id: int | None
    pod: PodRef
    resource_name: str
    device_ids: tuple[str, ...]


class AttributionCollector:
    """Lists pods off the tick; attributes GPUs and processes in the tick."""

    name = "attribution"

    def __init__(
        self,
        config: KubernetesConfig,
        clock: Clock,
        *,
        list_interval_seconds: float | None = None,
        noise_floor_ratio: float = 0.01,
    ) -> None:
        """`list_interval_seconds`: the refresh period in the clock's seconds (the
        agent passes the configured one; simulated time may stretch it);
        `noise_floor_ratio`: activity above it shows work (`[analysis]`'s)."""
        self._config = config
        self._clock = clock
        self._interval = list_interval_seconds or config.list_interval_seconds
        self._noise_floor = noise_floor_ratio
        self._client = PodResourcesClient(
            config.pod_resources_socket, timeout_seconds=config.timeout_seconds
        )
        self._lock = threading.Lock()
        self._listing: Listing | None = None
        self._result = CollectorResult(self.name, False, 0.0)
        self._failure: tuple[str, str] | None = None  # (reason, gRPC code) being logged
        self._reason: str | None = None
        self._allocatable_failure: str | None = None  # the kubelet's message, logged once
        self._names_outage = Outage(settle=1)  # one WARNING per outage, no recovery line
        self._cgroups: dict[int, PodCgroup | None] = {}
        self._unmapped_outage = Outage(settle=1)

    @property
    def result(self) -> CollectorResult:
        """How the last refresh went (success 0 before the first)."""
        return self._result

    @property
    def reason(self) -> str | None:
        """`ok`, or why the last kubelet call failed (`FAILURE_REASONS`); None before the
        first refresh."""
        return self._reason

    def refresh(self) -> None:
        """Ask the kubelet and scan the pod-log folder (blocking I/O: the scheduler's)."""
        listing, result = timed(self.name, self._clock, self._list, failed=lambda: None)
        with self._lock:
            if listing is not None:
                self._listing = listing
            self._result = result

    def _list(self) -> Listing:
        try:
            pods = self._client.list()
        except PodResourcesError as exc:
            reason, probed = failure_reason(exc, self._config.pod_resources_socket)
            if (reason, exc.code) != self._failure:
                log.warning(
                    "kubelet pod-resources at %s: %s (%s; %s): %s; pod holds are kept, "
                    "marked stale after %d intervals, pod counters hold",
                    self._config.pod_resources_socket,
                    reason,
                    exc,
                    probed,
                    _HINTS.get(reason, "see the gRPC status"),
                    STALE_LISTINGS,
                )
            self._failure = (reason, exc.code)
            self._reason = reason
            raise CollectorFailedError(f"{reason}: {exc}") from exc
        if self._failure is not None:
            log.info("kubelet pod-resources answers again")
        self._failure = None
        self._reason = "ok"
        return Listing(self._clock.time(), pods, self._allocatable(), self._pod_names())

    def _allocatable(self) -> tuple[ContainerDevices, ...] | None:
        """`GetAllocatableResources`, or None: any failure degrades to `List` alone,
        logged once per kubelet message (an old kubelet's gate answers UNKNOWN)."""
        try:
            devices = self._client.allocatable()
        except PodResourcesError as exc:
            message = f"{exc.code}: {exc.detail}" if exc.detail else exc.code
            if message != self._allocatable_failure:
                log.warning(
                    "kubelet GetAllocatableResources at %s failed (%s): attribution goes "
                    "on from List alone",
                    self._config.pod_resources_socket,
                    message,
                )
            self._allocatable_failure = message
            return None
        if self._allocatable_failure is not None:
            log.info("kubelet GetAllocatableResources answers again")
        self._allocatable_failure = None
        return devices

    def _pod_names(self) -> dict[str, PodName]:
        try:
            names = scan_pod_logs(self._config.pod_logs_dir)
        except OSError as exc:
            if self._names_outage.fail():
                log.warning(
                    "cannot list %s (%s): processes are attributed only where one pod "
                    "holds their GPU",
                    self._config.pod_logs_dir,
                    exc.strerror or type(exc).__name__,
                )
            return {}
        self._names_outage.succeed()
        return names

    def close(self) -> None:
        """Close the kubelet channel."""
        self._client.close()

    def current_listing(self) -> Listing | None:
        """The newest listing the kubelet gave (fresh or stale), else None."""
        with self._lock:
            return self._listing

    def is_stale(self, listing: Listing) -> bool:
        """The listing is older than `STALE_LISTINGS` list intervals."""
        age = self._clock.time() - listing.taken_at_seconds
        return age > STALE_LISTINGS * self._interval

    def attribute(
        self, gpus: tuple[GpuSample, ...]
    ) -> tuple[tuple[GpuSample, ...], Attribution, CollectorResult]:
        """GPU samples with pods set, the tick's `Attribution`, the last refresh's result."""
        listing = self.current_listing()
        if listing is None:
            self._cgroups.clear()
            return gpus, Attribution(None, 0), self._result
        holds, unresolved = resolve_holds(listing.pods, gpus, self._config.resource_names)
        pids = {p.pid for g in gpus for p in g.processes or ()}
        read = {pid: self._cgroup(pid) for pid in pids}
        self._cgroups = {pid: c for pid, c in read.items() if not isinstance(c, str)}
        unmapped = {pid for pid, c in read.items() if isinstance(c, str)}
        self._log_unmapped(unmapped, gpus)
        out_gpus: list[GpuSample] = []
        out_attr: list[GpuAttribution] = []
        for gpu in gpus:
            mine = [h for h in holds if h.uuid == gpu.identity.uuid]
            sample, gpu_attribution = _join(
                gpu,
                mine,
                _Processes(self._cgroups, unmapped, listing.names_by_uid),
                self._noise_floor,
            )
            out_gpus.append(sample)
            out_attr.append(gpu_attribution)
        attribution = Attribution(
            listing.taken_at_seconds,
            len(listing.pods),
            tuple(out_attr),
            tuple(unresolved),
            stale=self.is_stale(listing),
        )
        return tuple(out_gpus), attribution, self._result

    def _cgroup(self, pid: int) -> PodCgroup | str | None:
        """The PID's pod (None: in no pod), or `_UNREADABLE` (retried every tick)."""
        if pid in self._cgroups:
            return self._cgroups[pid]
        try:
            text = (Path(self._config.proc_root) / str(pid) / "cgroup").read_text(
                "utf-8", "replace"
            )
        except OSError:
            return _UNREADABLE  # not in this /proc (another PID namespace), or just gone
        return parse_cgroup(text)

    def _log_unmapped(self, unmapped: set[int], gpus: tuple[GpuSample, ...]) -> None:
        """One line when GPU processes start (and stop) being unreadable in `proc_root`."""
        if not unmapped:
            if self._unmapped_outage.succeed():
                log.info(
                    "every GPU process's pod is readable under %s again", self._config.proc_root
                )
            return
        if not self._unmapped_outage.fail():
            return
        on = sorted(
            {g.identity.index for g in gpus for p in g.processes or () if p.pid in unmapped}
        )
        log.warning(
            "cannot read <pid>/cgroup under %s for %d GPU process(es) on GPU(s) %s: NVML "
            "reports host PIDs, so kubernetes.proc_root must be the host's /proc (the chart "
            "mounts it at /host/proc); their holders' allocated-idle is unknown",
            self._config.proc_root,
            len(unmapped),
            ", ".join(map(str, on)),
        )


def resolve_holds(
    pods: Iterable[PodAllocation], gpus: tuple[GpuSample, ...], extra_resources: Iterable[str]
) -> tuple[list[_Hold], list[str]]:
    """Every container's GPU holds resolved to this host's GPUs, and the device IDs that
    name no GPU here (sorted). Replicas of one GPU held by one container are one hold."""
    extra = tuple(extra_resources)
    by_uuid = {g.identity.uuid.lower(): g for g in gpus}  # keys and lookups: lower case
    by_minor = {g.identity.minor_number: g for g in gpus if g.identity.minor_number is not None}
    by_index = gpus_by_index(gpus)
    mig_by_uuid = {m.uuid.lower(): (g, m) for g in gpus for m in g.mig_instances}
    merged: dict[tuple[int, str | None, PodRef, str], list[str]] = {}
    instances: dict[tuple[int, str | None], int | None] = {}
    unresolved: set[str] = set()
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
                    key = (gpu.identity.index, mig_uuid, ref, devices.resource_name)
                    merged.setdefault(key, []).append(raw)
                    instances[(gpu.identity.index, mig_uuid)] = gi
    holds = [
        _Hold(
            index,
            by_index[index].identity.uuid,
            mig_uuid,
            instances[(index, mig_uuid)],
            ref,
            resource,
            tuple(ids),
        )
        for (index, mig_uuid, ref, resource), ids in merged.items()
    ]
    return holds, sorted(unresolved)


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
class _Processes:
    """What this tick knows of the GPU processes: each readable PID's pod (None: in no
    pod), the PIDs whose cgroup cannot be read, and pod names by UID."""

    cgroups: dict[int, PodCgroup | None]
    unmapped: set[int]
    names: dict[str, PodName]


def _join(
    gpu: GpuSample, holds: list[_Hold], known: _Processes, noise_floor: float
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


def _works_alone(gpu: GpuSample, hold: _Hold, holds: list[_Hold], noise_floor: float) -> bool:
    """The hold is the only one of its GPU (or MIG device), and that shows activity above
    the noise floor: the work is the holder's, whatever its processes show."""
    if sum(h.mig_uuid == hold.mig_uuid for h in holds) != 1:
        return False
    if hold.mig_uuid is None:
        if len(holds) != 1:
            return False  # MIG devices of this GPU held by others: not the whole GPU's work
        activity = activity_of(gpu)
    else:
        activity = next(
            (m.sm_active_ratio for m in gpu.mig_instances if m.uuid == hold.mig_uuid), None
        )
    return activity is not None and activity > noise_floor


def _process_pod(
    holds: list[_Hold], cgroup: PodCgroup | None, names: dict[str, PodName]
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
