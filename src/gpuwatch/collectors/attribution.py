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
from dataclasses import dataclass
from pathlib import Path

from gpuwatch.collectors.attribution_join import Processes, join_gpu, resolve_holds
from gpuwatch.collectors.listing import FailureReason, Listings
from gpuwatch.core.clock import Clock
from gpuwatch.core.failures import CollectorFailedError
from gpuwatch.core.health import Outage
from gpuwatch.core.snapshot import (
    Attribution,
    CollectorResult,
    GpuAttribution,
    GpuSample,
)
from gpuwatch.kube.cgroup import PodCgroup, parse_cgroup
from gpuwatch.kube.config import KubernetesConfig
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
        self._listings = Listings(self.name, clock, self._list)
        self._failure: FailureReason[tuple[str, str]] = FailureReason()  # (reason, gRPC code)
        self._reason: str | None = None
        self._allocatable_failure: FailureReason[str] = FailureReason()  # the kubelet's message
        self._names_outage = Outage(settle=1)  # one WARNING per outage, no recovery line
        self._cgroups: dict[int, PodCgroup | None] = {}
        self._unmapped_outage = Outage(settle=1)

    @property
    def result(self) -> CollectorResult:
        """How the last refresh went (success 0 before the first)."""
        return self._listings.result

    @property
    def reason(self) -> str | None:
        """`ok`, or why the last kubelet call failed (`FAILURE_REASONS`); None before the
        first refresh."""
        return self._reason

    def refresh(self) -> None:
        """Ask the kubelet and scan the pod-log folder (blocking I/O: the scheduler's)."""
        self._listings.refresh()

    def _list(self) -> Listing:
        try:
            pods = self._client.list()
        except PodResourcesError as exc:
            reason, probed = failure_reason(exc, self._config.pod_resources_socket)
            if self._failure.fail((reason, exc.code)):
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
            self._reason = reason
            raise CollectorFailedError(f"{reason}: {exc}") from exc
        if self._failure.succeed():
            log.info("kubelet pod-resources answers again")
        self._reason = "ok"
        return Listing(self._clock.time(), pods, self._allocatable(), self._pod_names())

    def _allocatable(self) -> tuple[ContainerDevices, ...] | None:
        """`GetAllocatableResources`, or None: any failure degrades to `List` alone,
        logged once per kubelet message (an old kubelet's gate answers UNKNOWN)."""
        try:
            devices = self._client.allocatable()
        except PodResourcesError as exc:
            message = f"{exc.code}: {exc.detail}" if exc.detail else exc.code
            if self._allocatable_failure.fail(message):
                log.warning(
                    "kubelet GetAllocatableResources at %s failed (%s): attribution goes "
                    "on from List alone",
                    self._config.pod_resources_socket,
                    message,
                )
            return None
        if self._allocatable_failure.succeed():
            log.info("kubelet GetAllocatableResources answers again")
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
        return self._listings.current()

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
            return gpus, Attribution(None, 0), self._listings.result
        resolved = resolve_holds(listing.pods, gpus, self._config.resource_names)
        holds = resolved.holds
        pids = {p.pid for g in gpus for p in g.processes or ()}
        read = {pid: self._cgroup(pid) for pid in pids}
        self._cgroups = {pid: c for pid, c in read.items() if not isinstance(c, str)}
        unmapped = {pid for pid, c in read.items() if isinstance(c, str)}
        self._log_unmapped(unmapped, gpus)
        out_gpus: list[GpuSample] = []
        out_attr: list[GpuAttribution] = []
        for gpu in gpus:
            mine = [h for h in holds if h.uuid == gpu.identity.uuid]
            sample, gpu_attribution = join_gpu(
                gpu,
                mine,
                Processes(self._cgroups, unmapped, listing.names_by_uid),
                self._noise_floor,
            )
            out_gpus.append(sample)
            out_attr.append(gpu_attribution)
        attribution = Attribution(
            listing.taken_at_seconds,
            len(listing.pods),
            tuple(out_attr),
            tuple(resolved.unresolved),
            stale=self.is_stale(listing),
            dra_unresolved=tuple(resolved.dra_unresolved),
            dra_ignored=tuple(resolved.dra_ignored),
        )
        return tuple(out_gpus), attribution, self._listings.result

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
