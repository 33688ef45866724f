"""Scenario pods (`[[pods]]`): a simulated Kubernetes node's pods, their GPU allocations
and which simulated processes run in which container.

    [[pods]]
    namespace = "team-a"
    name = "trainer-0"
    uid = "..."                        # optional: derived from the scenario and names
    qos = "guaranteed"                 # guaranteed, burstable, besteffort (cgroup path)
    cgroup = "systemd-v2"              # systemd-v2, cgroupfs-v1, namespaced-v2
    [[pods.containers]]
    name = "trainer"
    resource = "nvidia.com/gpu"        # or nvidia.com/gpu.shared, nvidia.com/mig-1g.10gb
    devices = [{ gpu = 0 }]            # replica = 1: GPU-<uuid>::1; mig = 0: the GPU's
                                       # first MIG device; form = "gke": nvidia<minor>...,
                                       # form = "index": "<gpu>", "<gpu>::<replica>";
                                       # form = "dra", claim = "<name>": through a DRA
                                       # ResourceClaim of gpu.nvidia.com (device
                                       # gpu-<minor>, with mig: gpu-<minor>-mig-...;
                                       # `resource` is not used then)
    pids = [48213]                     # simulated processes (gpus.processes) it runs

Validated like the rest of the scenario: a device names an existing GPU (and MIG
device), a pid is one of the scenario's processes and in one container only, a DRA claim
(`form = "dra"`, no replica) names the same devices wherever its namespace uses it
(several containers sharing one claim share its devices, as with TimeSlicing or MPS).

    [kubernetes]
    host_proc = false                  # the agent sees the node as the chart's container
                                       # does without the host's /proc (default true)
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_UUID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeConfig(_Model):
    """`[kubernetes]`: how the agent sees the simulated node."""

    # true: `proc_root` is the node's /proc (the chart's /host/proc mount), where NVML's
    # PIDs have their cgroup files; false: the agent's own /proc, without the host's
    # (the chart with `attribution.hostProc: ""`): no GPU process can be mapped to a pod
    host_proc: bool = True


class PodDevice(_Model):
    """One device allocated to a container, named by the scenario's GPU index: a device
    plugin's ID, or (`form = "dra"`) a DRA claim's device."""

    gpu: int = Field(ge=0)
    mig: int | None = Field(default=None, ge=0)  # position in gpus[gpu].mig
    replica: int | None = Field(default=None, ge=0)  # time-slicing replica
    # index: --device-id-strategy=index; dra: a gpu.nvidia.com device of `claim`
    form: Literal["uuid", "gke", "index", "dra"] = "uuid"
    claim: str | None = Field(default=None, min_length=1)  # the ResourceClaim's name (dra)

    @model_validator(mode="after")
    def _claim_with_dra(self) -> PodDevice:
        if (self.form == "dra") != (self.claim is not None):
            raise ValueError('claim is given with form = "dra", and only then')
        if self.form == "dra" and self.replica is not None:
            raise ValueError('form = "dra" has no replica (a shared claim shares its devices)')
        return self


class PodContainer(_Model):
    """A container, its GPU devices and its processes."""

    name: str = Field(min_length=1)
    resource: str = Field(default="nvidia.com/gpu", min_length=1)
    devices: tuple[PodDevice, ...] = ()
    pids: tuple[int, ...] = ()


class PodConfig(_Model):
    """A pod on the simulated node."""

    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)
    uid: str | None = Field(default=None, pattern=_UUID)
    qos: Literal["guaranteed", "burstable", "besteffort"] = "burstable"
    cgroup: Literal["systemd-v2", "cgroupfs-v1", "namespaced-v2"] = "systemd-v2"
    containers: tuple[PodContainer, ...] = Field(min_length=1)

    def pod_uid(self, scenario_name: str) -> str:
        """`uid`, else one derived from the scenario, namespace and name."""
        if self.uid is not None:
            return self.uid
        h = hashlib.sha256(f"{scenario_name}/{self.namespace}/{self.name}".encode()).hexdigest()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
