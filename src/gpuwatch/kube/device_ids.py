"""Device IDs and resource names that GPU device plugins put in the kubelet's pod-resources.

Forms (REFERENCE.md, "Kubernetes attribution"):

| form                          | plugin                                   | names the GPU by |
|-------------------------------|------------------------------------------|------------------|
| `GPU-<uuid>`                  | NVIDIA device plugin                     | NVML UUID        |
| `GPU-<uuid>::<n>`             | NVIDIA time-slicing / MPS replica n      | NVML UUID        |
| `MIG-<uuid>`, `MIG-<uuid>::<n>` | NVIDIA plugin, MIG strategy mixed/single | MIG device UUID  |
| `MIG-GPU-<uuid>/<gi>/<ci>`    | NVIDIA plugin before driver R470         | parent UUID + GI |
| `nvidia<N>`, `nvidia<N>/vgpu<R>` | GKE (shared: replica R)               | minor number N   |
| `nvidia<N>/gi<G>[/vgpu<R>]`   | GKE MIG partition G                      | minor number N   |
| `<i>`, `<i>::<n>`             | NVIDIA plugin `--device-id-strategy=index` | NVML index i   |

The index strategy names MIG devices `<i>:<j>` (j: the MIG handle's slot): that form
is not resolved (NVML's MIG slot is not sampled) and counts as unresolved.

Pure: no I/O. An ID in no known form parses to None (the collector counts it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

GPU_RESOURCES = frozenset({"nvidia.com/gpu", "nvidia.com/gpu.shared"})
"""Resource names of whole or time-sliced GPUs (`.shared`: time-slicing with renaming)."""
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
"""`nvidia.com/mig-<profile>` (the mixed MIG strategy), e.g. `nvidia.com/mig-1g.10gb`."""

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_NVIDIA_UUID = re.compile(rf"^(?P<kind>GPU|MIG)-(?P<uuid>{_UUID})(?:::(?P<replica>\d+))?$")
_OLD_MIG = re.compile(rf"^MIG-(?P<parent>GPU-{_UUID})/(?P<gi>\d+)/(?P<ci>\d+)$")
_GKE = re.compile(r"^nvidia(?P<minor>\d+)(?:/gi(?P<gi>\d+))?(?:/vgpu(?P<replica>\d+))?$")
_INDEX = re.compile(r"^(?P<index>\d+)(?:::(?P<replica>\d+))?$")


@dataclass(frozen=True, slots=True)
class DeviceRef:
    """What one device ID names: a GPU by UUID, minor number or NVML index, maybe a MIG
    part, maybe a replica of a shared GPU.

    `uuid` is NVML's spelling (`GPU-...` for a GPU, `MIG-...` for a MIG device);
    `minor` is the `/dev/nvidia<N>` number (GKE); `index` the NVML device index (the
    NVIDIA plugin's index strategy); `gpu_instance_id` a MIG GPU instance
    of the GPU named by `uuid` (old form) or `minor` (GKE); `replica` the time-slicing
    or MPS replica (several pods may hold replicas of one GPU).
    """

    raw: str
    uuid: str | None = None
    minor: int | None = None
    index: int | None = None
    gpu_instance_id: int | None = None
    replica: int | None = None

    @property
    def is_mig(self) -> bool:
        """True when the ID names a MIG device rather than a whole GPU."""
        return self.gpu_instance_id is not None or (
            self.uuid is not None and self.uuid.startswith("MIG-")
        )


def parse_device_id(raw: str) -> DeviceRef | None:
    """The `DeviceRef` of one device ID, or None when it is in no known form."""
    text = raw.strip()
    match = _NVIDIA_UUID.match(text)
    if match:
        replica = match.group("replica")
        return DeviceRef(
            raw=raw,
            uuid=f"{match.group('kind')}-{match.group('uuid').lower()}",
            replica=None if replica is None else int(replica),
        )
    match = _OLD_MIG.match(text)
    if match:
        parent = match.group("parent")
        return DeviceRef(
            raw=raw, uuid="GPU-" + parent[4:].lower(), gpu_instance_id=int(match.group("gi"))
        )
    match = _GKE.match(text)
    if match:
        gi, replica = match.group("gi"), match.group("replica")
        return DeviceRef(
            raw=raw,
            minor=int(match.group("minor")),
            gpu_instance_id=None if gi is None else int(gi),
            replica=None if replica is None else int(replica),
        )
    match = _INDEX.match(text)
    if match:
        replica = match.group("replica")
        return DeviceRef(
            raw=raw,
            index=int(match.group("index")),
            replica=None if replica is None else int(replica),
        )
    return None


def is_gpu_resource(resource_name: str, extra: Iterable[str] = ()) -> bool:
    """True for NVIDIA GPU resources (`nvidia.com/gpu`, `.shared`, `mig-*`) and for the
    configured names in `extra` (a renamed time-slicing resource, a vendor's own)."""
    return (
        resource_name in GPU_RESOURCES
        or resource_name.startswith(MIG_RESOURCE_PREFIX)
        or resource_name in frozenset(extra)
    )
