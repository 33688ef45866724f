"""A simulated Kubernetes node around a scenario's GPUs: the kubelet's pod-resources
socket (a real gRPC server), a `/proc`-like tree of `<pid>/cgroup` files and a
`/var/log/pods`-like folder, all under one temporary folder, so the production
attribution collector runs unchanged on it (`kubernetes_config()`).

The cgroup files come in the shapes real nodes write (`PodConfig.cgroup`): cgroup v2
with the systemd driver, v1 with cgroupfs, and v2 seen from inside a cgroup namespace
(a relative path with `../`); Guaranteed pods have no QoS level in the path. A scenario
whose `[kubernetes]` says `host_proc = false` points the agent at the container's own
`/proc` instead (an empty folder: none of NVML's host PIDs is there), as the chart's
agent sees the node without the host's `/proc` mounted.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from pathlib import Path

from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.kube.dra import NVIDIA_GPU_DRIVER
from gpuwatch.kube.podresources import (
    ClaimAllocation,
    ClaimDevice,
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
)
from gpuwatch.simulate.device import GpuDevice
from gpuwatch.simulate.kubelet import SimulatedKubelet
from gpuwatch.simulate.pods import PodConfig, PodDevice
from gpuwatch.simulate.stand_in import SimulatedNvml


def device_id(devices: tuple[GpuDevice, ...], ref: PodDevice) -> str:
    """The device plugin's ID for `ref` (NVIDIA's UUID or index forms, or GKE's
    minor-number forms)."""
    gpu = devices[ref.gpu]
    mig = None if ref.mig is None else gpu.mig[ref.mig]
    if ref.form == "index":  # the NVIDIA plugin's index strategy: "<i>", MIG "<i>:<j>"
        text = str(ref.gpu) if ref.mig is None else f"{ref.gpu}:{ref.mig}"
        return text if ref.replica is None else f"{text}::{ref.replica}"
    if ref.form == "gke":
        text = f"nvidia{gpu.minor_number}"
        if mig is not None:
            text += f"/gi{mig.gpu_instance_id}"
        return text if ref.replica is None else f"{text}/vgpu{ref.replica}"
    text = gpu.uuid if mig is None else mig.uuid
    return text if ref.replica is None else f"{text}::{ref.replica}"


def dra_claims(
    devices: tuple[GpuDevice, ...], namespace: str, refs: tuple[PodDevice, ...], pool: str
) -> tuple[ClaimAllocation, ...]:
    """The DRA claims among `refs` as the kubelet reports them: NVIDIA's driver
    (`gpu.nvidia.com`) names a whole GPU `gpu-<minor>` and a MIG device
    `gpu-<parent minor>-mig-<profile>-<GI profile ID>-<placement start>` in its node's
    pool, and its CDI device `k8s.gpu.nvidia.com/claim=<claim uid>-<device name>`."""
    by_claim: dict[str, list[ClaimDevice]] = {}
    for ref in refs:
        if ref.form != "dra" or ref.claim is None:
            continue
        uid = _uid(f"claim/{namespace}/{ref.claim}")
        name = dra_device_name(devices[ref.gpu], ref.mig)
        cdi = f"k8s.{NVIDIA_GPU_DRIVER}/claim={uid}-{name}"
        by_claim.setdefault(ref.claim, []).append(
            ClaimDevice(NVIDIA_GPU_DRIVER, pool, name, (cdi,))
        )
    return tuple(
        ClaimAllocation(claim, namespace, tuple(found)) for claim, found in by_claim.items()
    )


def dra_device_name(gpu: GpuDevice, mig_position: int | None) -> str:
    """NVIDIA's DRA driver's name for a GPU or one of its MIG devices (its
    `CanonicalName()`: the profile without dots, made an RFC 1123 label)."""
    if mig_position is None:
        return f"gpu-{gpu.minor_number}"
    mig = gpu.mig[mig_position]
    profile = re.sub(r"[^a-z0-9-.]", "-", mig.profile.replace(".", "").lower()).strip("-")
    return (
        f"gpu-{gpu.minor_number}-mig-{profile}-{mig.gpu_instance_profile_id}-{mig.placement_start}"
    )


def _uid(text: str) -> str:
    h = hashlib.sha256(text.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def container_id(uid: str, container: str) -> str:
    """A stable 64-hex container ID."""
    return hashlib.sha256(f"{uid}/{container}".encode()).hexdigest()


def cgroup_text(pod: PodConfig, uid: str, cid: str) -> str:
    """The `/proc/<pid>/cgroup` a process of this pod shows, in the pod's shape."""
    if pod.cgroup == "cgroupfs-v1":
        qos = "" if pod.qos == "guaranteed" else f"{pod.qos}/"
        path = f"/kubepods/{qos}pod{uid}/{cid}"
        return (
            "".join(
                f"{n}:{c}:{path}\n"
                for n, c in ((12, "memory"), (11, "devices"), (4, "cpu,cpuacct"))
            )
            + "1:name=systemd:/init.scope\n"
        )
    slice_uid = uid.replace("-", "_")
    qos = "" if pod.qos == "guaranteed" else f"-{pod.qos}"
    pod_slice = f"kubepods{qos}-pod{slice_uid}.slice"
    scope = f"cri-containerd-{cid}.scope"
    if pod.cgroup == "namespaced-v2":
        return f"0::/../../{pod_slice}/{scope}\n"
    parent = "kubepods.slice/" + ("" if not qos else f"kubepods{qos}.slice/")
    return f"0::/{parent}{pod_slice}/{scope}\n"


class SimulatedCluster:
    """The node's kubelet and files for a scenario's `[[pods]]`; `start()`, `stop()`."""

    def __init__(self, nv: SimulatedNvml, root: Path | None = None) -> None:
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="gpuwatch-kube-")) if root is None else root
        scenario = nv.scenario
        self.proc_root = self.root / "proc"  # the node's (host's) /proc
        self.agent_proc_root = self.proc_root
        if not scenario.kubernetes.host_proc:
            self.agent_proc_root = self.root / "container-proc"
            self.agent_proc_root.mkdir(parents=True, exist_ok=True)
        self.pod_logs_dir = self.root / "pods"
        self.pool = f"{scenario.name}-node"  # NVIDIA's DRA driver names its pool after the node
        allocations = []
        for pod in scenario.pods:
            uid = pod.pod_uid(scenario.name)
            containers = []
            for container in pod.containers:
                (self.pod_logs_dir / f"{pod.namespace}_{pod.name}_{uid}" / container.name).mkdir(
                    parents=True, exist_ok=True
                )
                cid = container_id(uid, container.name)
                for pid in container.pids:
                    folder = self.proc_root / str(pid)
                    folder.mkdir(parents=True, exist_ok=True)
                    (folder / "cgroup").write_text(cgroup_text(pod, uid, cid), "utf-8")
                plugin = [d for d in container.devices if d.form != "dra"]
                ids = tuple(device_id(nv.devices, d) for d in plugin)
                devices = (ContainerDevices(container.resource, ids),) if ids else ()
                claims = dra_claims(nv.devices, pod.namespace, container.devices, self.pool)
                containers.append(ContainerAllocation(container.name, devices, claims))
            allocations.append(PodAllocation(pod.namespace, pod.name, tuple(containers)))
        for pid in _host_pids(nv, scenario.pods):  # processes outside any pod
            folder = self.proc_root / str(pid)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "cgroup").write_text("0::/system.slice/docker.service\n", "utf-8")
        plugin_node = any(
            d.form != "dra" for pod in scenario.pods for c in pod.containers for d in c.devices
        )  # a node whose GPUs all go through DRA runs no device plugin: nothing allocatable
        allocatable = tuple(
            ContainerDevices("nvidia.com/gpu", (device.uuid,))
            for device in nv.devices
            if plugin_node or not scenario.pods
        )
        self.kubelet = SimulatedKubelet(self.root / "kubelet.sock", allocations, allocatable)

    def start(self) -> None:
        """Start the kubelet's gRPC server."""
        self.kubelet.start()

    def stop(self) -> None:
        """Stop the server; remove the folder when this cluster made it."""
        self.kubelet.stop()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def kubernetes_config(self) -> KubernetesConfig:
        """`[kubernetes]` pointing the production collector at this node."""
        return KubernetesConfig(
            enabled=True,
            pod_resources_socket=self.kubelet.socket_path,
            proc_root=self.agent_proc_root,
            pod_logs_dir=self.pod_logs_dir,
            list_interval_seconds=5.0,
        )


def _host_pids(nv: SimulatedNvml, pods: tuple[PodConfig, ...]) -> list[int]:
    in_pods = {pid for pod in pods for c in pod.containers for pid in c.pids}
    every = {p.pid for device in nv.devices for p in device.every_process()}
    return sorted(every - in_pods)
