"""Kubernetes attribution families, rendered from `FleetSnapshot.attribution`.

No GPU value is copied per pod: who holds a GPU is an info series
(`gpuwatch_gpu_pod_info`, one per container and GPU or MIG device) to join on `uuid`;
processes carry their own pod labels (`gpuwatch_process_*`); the DCGM-compatible set
keeps one series per GPU, with pod labels only when one container holds the whole GPU
(plus, on a shared GPU, OpenCost's two families split by activity: `export/dcgm.py`).
Absent entirely while attribution is off (but `gpuwatch_attribution_reason_info` says
`disabled`); a pod gone from the kubelet's listing is gone from the next scrape after the
next listing. While the kubelet does not answer, the last listing's holds stay (marked by
`gpuwatch_attribution_stale`), so alerts and OpenCost keep their pods. A hold whose
allocated-idle is unknown has no `gpuwatch_gpu_pod_allocated_idle` series but a
`gpuwatch_gpu_pod_allocated_idle_unknown` one naming the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.core.snapshot import FleetSnapshot, PodRef

_GPU = ("gpu", "uuid")
_POD = ("namespace", "pod", "container")


def _pod(ref: PodRef) -> list[str]:
    return [ref.namespace, ref.pod, ref.container]


def attribution_families(snapshot: FleetSnapshot) -> Iterator[Metric]:
    """The attribution families of one snapshot (none while attribution is off)."""
    attribution = snapshot.attribution
    if attribution is None:
        return
    pods = GaugeMetricFamily(
        "gpuwatch_attribution_pods",
        "Pods in the kubelet's newest pod-resources listing (0: none yet).",
    )
    pods.add_metric([], float(attribution.pods_listed))
    yield pods
    stale = GaugeMetricFamily(
        "gpuwatch_attribution_stale",
        "1 while no kubelet listing younger than 3 list intervals is in use (none yet, or "
        "the kubelet stopped answering): the last listing's pods are kept until the kubelet "
        "answers, pod cost counters hold.",
    )
    stale.add_metric([], 0.0 if attribution.fresh else 1.0)
    yield stale
    unresolved = GaugeMetricFamily(
        "gpuwatch_attribution_unresolved_devices",
        "GPU device IDs allocated to pods that name no GPU of this host (or an unknown form).",
    )
    unresolved.add_metric([], float(len(attribution.unresolved_device_ids)))
    yield unresolved
    yield from _dra_families(attribution.dra_unresolved, attribution.dra_ignored)
    if attribution.listed_at_seconds is not None:
        listed = GaugeMetricFamily(
            "gpuwatch_attribution_listed_timestamp_seconds",
            "When the pod-resources listing in use was taken (Unix time).",
        )
        listed.add_metric([], attribution.listed_at_seconds)
        yield listed
    labels = (*_GPU, "mig_uuid", *_POD)
    info = InfoMetricFamily(
        "gpuwatch_gpu_pod",
        "A container holds this GPU (or MIG device): one series per holder; join on uuid. "
        "resource: the device plugin's resource or the DRA driver; claim: the DRA "
        "ResourceClaim that gave it (empty for a device plugin's).",
        labels=(*labels, "resource", "claim"),
    )
    idle = GaugeMetricFamily(
        "gpuwatch_gpu_pod_allocated_idle",
        "1 when the container holds this GPU (or MIG device) and runs no process on it; "
        "absent while unknown (gpuwatch_gpu_pod_allocated_idle_unknown).",
        labels=labels,
    )
    unknown = GaugeMetricFamily(
        "gpuwatch_gpu_pod_allocated_idle_unknown",
        "1 while the container's allocated-idle is unknown, with the reason: pid_unmapped "
        "(a process on the GPU whose /proc/<pid>/cgroup cannot be read: no host /proc) or "
        "no_process_list (NVML lists no processes for the GPU).",
        labels=(*labels, "reason"),
    )
    unmapped = GaugeMetricFamily(
        "gpuwatch_gpu_unmapped_processes",
        "Processes on the GPU whose pod cannot be read (/proc/<pid>/cgroup not under "
        "kubernetes.proc_root: mount the host's /proc).",
        labels=_GPU,
    )
    unowned = GaugeMetricFamily(
        "gpuwatch_gpu_unowned_processes",
        "Processes on a GPU that no pod holds.",
        labels=_GPU,
    )
    stray = GaugeMetricFamily(
        "gpuwatch_pod_unallocated_gpu_processes",
        "Processes of a pod on a GPU (or MIG device) it was not allocated.",
        labels=(*_GPU, *_POD),
    )
    for gpu in attribution.gpus:
        gpu_values = [str(gpu.gpu_index), gpu.uuid]
        for hold in gpu.allocations:
            values = [*gpu_values, hold.mig_uuid or "", *_pod(hold.pod)]
            info.add_metric(values, {"resource": hold.resource_name, "claim": hold.claim})
            allocated_idle = hold.allocated_idle
            if allocated_idle is not None:
                idle.add_metric(values, 1.0 if allocated_idle else 0.0)
            elif hold.unknown_reason is not None:
                unknown.add_metric([*values, hold.unknown_reason], 1.0)
        unowned.add_metric(gpu_values, float(len(gpu.unowned_pids)))
        unmapped.add_metric(gpu_values, float(len(gpu.unmapped_pids)))
        for ref, count in sorted(
            Counter(ref for ref, _ in gpu.unallocated).items(),
            key=lambda item: _pod(item[0]),
        ):
            stray.add_metric([*gpu_values, *_pod(ref)], float(count))
    for family in (info, idle, unknown, unowned, unmapped, stray):
        if family.samples:
            yield family


def _dra_families(
    unresolved: tuple[tuple[str, str, str, str], ...], ignored: tuple[tuple[str, int], ...]
) -> Iterator[Metric]:
    """DRA devices not attributed: `gpu.nvidia.com` devices that name no GPU here (one
    series each, bounded by the node's devices), other drivers' devices (per driver)."""
    if unresolved:
        family = GaugeMetricFamily(
            "gpuwatch_dra_devices_unresolved",
            "1 for each gpu.nvidia.com DRA device allocated to a container that names no "
            "GPU of this host, with the reason: unknown_name, no_such_gpu, no_such_mig, "
            "mig_placement (NVML gave no GPU-instance placement), vfio. Never attributed "
            "to a guess.",
            labels=("driver", "pool", "device", "reason"),
        )
        for values in unresolved:
            family.add_metric(list(values), 1.0)
        yield family
    if ignored:
        family = GaugeMetricFamily(
            "gpuwatch_dra_devices_ignored",
            "DRA devices of other drivers than gpu.nvidia.com allocated to containers "
            "(claim devices counted once per container): not GPUs gpuwatch reads.",
            labels=("driver",),
        )
        for driver, count in ignored:
            family.add_metric([driver], float(count))
        yield family


def attribution_health_families(reason: str | None) -> Iterator[Metric]:
    """The kubelet's health as the attribution collector last saw it: `reason` is `ok`,
    a cause from `gpuwatch.kube.podresources.FAILURE_REASONS`, `disabled` (attribution
    off: no `gpuwatch_attribution_up` then) or None (not asked yet: up 0, no reason)."""
    if reason != "disabled":
        up = GaugeMetricFamily(
            "gpuwatch_attribution_up",
            "1 when the kubelet's pod-resources List last answered, 0 when it failed.",
        )
        up.add_metric([], 1.0 if reason == "ok" else 0.0)
        yield up
    if reason is not None:
        info = GaugeMetricFamily(
            "gpuwatch_attribution_reason_info",
            "Why attribution works or not, value 1: ok, disabled, permission_denied, "
            "no_socket, unavailable, timeout, not_implemented or error.",
            labels=("reason",),
        )
        info.add_metric([reason], 1.0)
        yield info


ATTRIBUTION_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gpuwatch_attribution_pods", "gauge"),
    ("gpuwatch_attribution_stale", "gauge"),
    ("gpuwatch_attribution_unresolved_devices", "gauge"),
    ("gpuwatch_dra_devices_unresolved", "gauge"),
    ("gpuwatch_dra_devices_ignored", "gauge"),
    ("gpuwatch_attribution_listed_timestamp_seconds", "gauge"),
    ("gpuwatch_gpu_pod", "info"),
    ("gpuwatch_gpu_pod_allocated_idle", "gauge"),
    ("gpuwatch_gpu_pod_allocated_idle_unknown", "gauge"),
    ("gpuwatch_gpu_unmapped_processes", "gauge"),
    ("gpuwatch_gpu_unowned_processes", "gauge"),
    ("gpuwatch_pod_unallocated_gpu_processes", "gauge"),
)
"""(name, type) of every family `attribution_families` may yield: its `describe()`.
(`attribution_health_families` are the agent's, published with each tick.)"""
