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
import shutil
import tempfile
from pathlib import Path

from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.kube.podresources import ContainerAllocation, ContainerDevices, PodAllocation
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
                ids = tuple(device_id(nv.devices, d) for d in container.devices)
                devices = (ContainerDevices(container.resource, ids),) if ids else ()
                containers.append(ContainerAllocation(container.name, devices))
            allocations.append(PodAllocation(pod.namespace, pod.name, tuple(containers)))
        for pid in _host_pids(nv, scenario.pods):  # processes outside any pod
            folder = self.proc_root / str(pid)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "cgroup").write_text("0::/system.slice/docker.service\n", "utf-8")
        allocatable = tuple(
            ContainerDevices("nvidia.com/gpu", (device.uuid,)) for device in nv.devices
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
