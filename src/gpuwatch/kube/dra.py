"""DRA devices of NVIDIA's GPU driver (`gpu.nvidia.com`) named by the kubelet: which GPU
of this node each one is, from the device's name alone.

The driver (kubernetes-sigs/dra-driver-nvidia-gpu, `cmd/gpu-kubelet-plugin`, read at
commit 95932046) publishes one pool per node, named after the node, and names each
device by `CanonicalName()`:

- `gpu-<minor>`: a whole GPU; `<minor>` is NVML's minor number (`/dev/nvidia<minor>`)
  (`deviceinfo.go` `GpuInfo.CanonicalName`, the minor from `nvmlDeviceGetMinorNumber`
  in `nvlib.go`);
- `gpu-<minor>-mig-<profile>-<gi profile id>-<placement start>`: a MIG device, by its
  parent's minor, GPU-instance profile and placement (`mig.go`
  `MigSpecTuple.ToCanonicalName`);
- `gpu-vfio-<index>`: a GPU passed through with VFIO, which NVML on the host does not
  see (`deviceinfo.go` `VfioDeviceInfo.CanonicalName`).

So a whole GPU is resolved exactly by its minor number, as NVML reports it on this node
(the same number the driver read): no API server, no ResourceSlice. The CDI spec the
driver writes for a claim (`/var/run/cdi/k8s.gpu.nvidia.com-claim_<claim uid>.yaml`,
devices `<claim uid>-<device name>`, `cdi.go`) adds nothing more exact: its device
nodes are `/dev/nvidia<minor>` (and, for MIG, the `nvidia-caps` nodes of the GI and CI),
its common environment `NVIDIA_VISIBLE_DEVICES=void`, no UUID. A MIG device is the one
of its parent whose GPU instance has the name's profile ID and placement start
(`nvmlGpuInstanceGetInfo`, read by `gpuwatch.nvml.mig`): static and dynamic MIG alike,
no UUID needed (dynamic MIG devices have none in the ResourceSlice). Never a guess: when
NVML does not give those, the device is unresolved (`mig_placement`).

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NVIDIA_GPU_DRIVER = "gpu.nvidia.com"
"""The only DRA driver whose devices gpuwatch resolves; others are counted, not read."""

UNRESOLVED_REASONS = ("unknown_name", "no_such_gpu", "no_such_mig", "mig_placement", "vfio")
"""Why a `gpu.nvidia.com` device is not attributed:

- `unknown_name`: a device name in none of the driver's forms;
- `no_such_gpu`: the minor number is no GPU's that NVML reports here;
- `no_such_mig`: no MIG device of that GPU has the name's profile ID and placement;
- `mig_placement`: a MIG device on a GPU whose GPU instances' profile ID or placement
  NVML did not give (`nvmlGpuInstanceGetInfo`);
- `vfio`: a GPU passed through to a VM (NVML does not see it on the host).
"""

_GPU = re.compile(r"^gpu-(?P<minor>\d+)$")
_MIG = re.compile(
    r"^gpu-(?P<minor>\d+)-mig-(?P<profile>.+)-(?P<profile_id>\d+)-(?P<placement>\d+)$"
)
_VFIO = re.compile(r"^gpu-vfio-\d+$")


@dataclass(frozen=True, slots=True)
class DraDeviceName:
    """What a `gpu.nvidia.com` device name says: the GPU's minor number and, for a MIG
    device, the GPU-instance profile (name and ID) and placement start."""

    minor: int
    mig_profile: str | None = None
    gi_profile_id: int | None = None
    placement_start: int | None = None

    @property
    def is_mig(self) -> bool:
        """True for a MIG device."""
        return self.gi_profile_id is not None


def parse_device_name(name: str) -> DraDeviceName | str:
    """The `DraDeviceName` of a `gpu.nvidia.com` device, or the reason (in
    `UNRESOLVED_REASONS`) it names none."""
    match = _GPU.match(name)
    if match:
        return DraDeviceName(int(match.group("minor")))
    match = _MIG.match(name)
    if match:
        return DraDeviceName(
            int(match.group("minor")),
            match.group("profile"),
            int(match.group("profile_id")),
            int(match.group("placement")),
        )
    if _VFIO.match(name):
        return "vfio"
    return "unknown_name"
