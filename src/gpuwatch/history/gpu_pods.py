"""The pods ("namespace/pod") and DRA claims on each GPU of a snapshot, as the history
names them (pure)."""

from __future__ import annotations

from gpuwatch.core.snapshot import FleetSnapshot, GpuSample, PodRef
from gpuwatch.kube.dra import NVIDIA_GPU_DRIVER

__all__ = ["dra_gpus", "pod_name", "pods_by_gpu"]


def pod_name(pod: PodRef) -> str:
    """A pod as the history names it: "namespace/pod"."""
    return f"{pod.namespace}/{pod.pod}"


def pods_by_gpu(snapshot: FleetSnapshot) -> dict[str, set[str]]:
    """The pods ("namespace/pod") holding or using each GPU (by uuid) in a snapshot:
    attribution's allocations and pods running on it without one, the GPU's holder and
    its processes' pods; empty without attribution."""
    pods: dict[str, set[str]] = {}
    attribution = snapshot.attribution
    if attribution is not None:
        for gpu_attribution in attribution.gpus:
            names = pods.setdefault(gpu_attribution.uuid, set())
            names.update(pod_name(a.pod) for a in gpu_attribution.allocations)
            names.update(pod_name(pod) for pod, _ in gpu_attribution.unallocated)
    for gpu in snapshot.gpus:
        names = pods.setdefault(gpu.identity.uuid, set())
        names.update(pod_name(pod) for pod in _sample_pods(gpu))
    return pods


def dra_gpus(snapshot: FleetSnapshot) -> set[str]:
    """The GPUs (uuids) a container holds through a DRA claim of NVIDIA's driver."""
    attribution = snapshot.attribution
    if attribution is None:
        return set()
    return {
        g.uuid
        for g in attribution.gpus
        if any(a.resource_name == NVIDIA_GPU_DRIVER for a in g.allocations)
    }


def _sample_pods(gpu: GpuSample) -> list[PodRef]:
    found = [] if gpu.pod is None else [gpu.pod]
    found += [p.pod for p in gpu.processes or () if p.pod is not None]
    return found
