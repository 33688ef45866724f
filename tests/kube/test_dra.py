"""DRA devices of `gpu.nvidia.com` resolved to this host's GPUs by the driver's device
names (`gpu-<minor>`), on literals: exact by NVML minor number, never a guess (MIG, VFIO,
unknown minors and names are unresolved with a reason), other drivers counted."""

from __future__ import annotations

import pytest

from gpuwatch.collectors.attribution_join import resolve_holds
from gpuwatch.core.snapshot import GpuIdentity, GpuSample, PodRef
from gpuwatch.kube.dra import DraDeviceName, parse_device_name
from gpuwatch.kube.podresources import (
    ClaimAllocation,
    ClaimDevice,
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpu-0", DraDeviceName(0)),
        ("gpu-13", DraDeviceName(13)),
        ("gpu-1-mig-1g10gb-19-6", DraDeviceName(1, "1g10gb", 19, 6)),
        ("gpu-2-mig-1g24gb-me-all-20-4", DraDeviceName(2, "1g24gb-me-all", 20, 4)),
        ("gpu-vfio-0", "vfio"),
        ("gpu-", "unknown_name"),
        ("GPU-0", "unknown_name"),
        ("gpu-0 ", "unknown_name"),
        ("nvidia0", "unknown_name"),
    ],
)
def test_device_names(name: str, expected: DraDeviceName | str) -> None:
    assert parse_device_name(name) == expected


def _gpu(index: int, minor: int) -> GpuSample:
    identity = GpuIdentity(
        index,
        f"GPU-{index}",
        "NVIDIA H100 80GB HBM3",
        None,
        f"0000:{index}",
        None,
        None,
        False,
        minor_number=minor,
    )
    return GpuSample(identity=identity, up=True)


# indexes 0-3 with minors in reverse order, as on the simulated hosts
GPUS = tuple(_gpu(i, 3 - i) for i in range(4))


def _claim(name: str, *devices: tuple[str, str]) -> ClaimAllocation:
    return ClaimAllocation(
        name, "team-b", tuple(ClaimDevice(driver, "node-a", device) for driver, device in devices)
    )


def _pod(
    name: str, *claims: ClaimAllocation, devices: tuple[ContainerDevices, ...] = ()
) -> PodAllocation:
    return PodAllocation("team-b", name, (ContainerAllocation("c", devices, claims),))


def test_a_whole_gpu_is_the_one_with_that_minor_number() -> None:
    resolved = resolve_holds(
        [_pod("trainer", _claim("gpu", ("gpu.nvidia.com", "gpu-0")))], GPUS, ()
    )
    (hold,) = resolved.holds
    assert (hold.gpu_index, hold.uuid, hold.mig_uuid) == (3, "GPU-3", None)
    assert (hold.resource_name, hold.claim, hold.device_ids) == (
        "gpu.nvidia.com",
        "gpu",
        ("node-a/gpu-0",),
    )
    assert hold.pod == PodRef("team-b", "trainer", "c")
    assert (resolved.unresolved, resolved.dra_unresolved, resolved.dra_ignored) == ([], [], [])


def test_one_claim_shared_by_two_pods_is_one_hold_each() -> None:
    shared = _claim("vllm-gpu", ("gpu.nvidia.com", "gpu-0"))
    resolved = resolve_holds([_pod("server", shared), _pod("canary", shared)], GPUS, ())
    assert sorted((h.pod.pod, h.gpu_index, h.claim, h.device_ids) for h in resolved.holds) == [
        ("canary", 3, "vllm-gpu", ("node-a/gpu-0",)),
        ("server", 3, "vllm-gpu", ("node-a/gpu-0",)),
    ]


def test_dra_and_a_device_plugin_in_one_container() -> None:
    plugin = (ContainerDevices("nvidia.com/gpu", ("nvidia2",)),)  # GKE form: minor 2
    pod = _pod("both", _claim("gpu", ("gpu.nvidia.com", "gpu-1")), devices=plugin)
    resolved = resolve_holds([pod], GPUS, ())
    assert sorted((h.gpu_index, h.resource_name, h.claim) for h in resolved.holds) == [
        (1, "nvidia.com/gpu", ""),
        (2, "gpu.nvidia.com", "gpu"),
    ]


def test_unresolved_and_ignored_devices_are_named_never_guessed() -> None:
    claim = _claim(
        "mixed",
        ("gpu.nvidia.com", "gpu-7"),  # no GPU has minor 7
        ("gpu.nvidia.com", "gpu-1-mig-1g10gb-19-6"),  # MIG: placement not read
        ("gpu.nvidia.com", "gpu-vfio-0"),
        ("gpu.nvidia.com", "gpu-x"),
        ("compute-domain.nvidia.com", "channel-0"),
        ("dra.net", "eth1"),
        ("dra.net", "eth2"),
    )
    resolved = resolve_holds([_pod("p", claim)], GPUS, ())
    assert resolved.holds == []
    assert resolved.dra_unresolved == [
        ("gpu.nvidia.com", "node-a", "gpu-1-mig-1g10gb-19-6", "mig_placement"),
        ("gpu.nvidia.com", "node-a", "gpu-7", "no_such_gpu"),
        ("gpu.nvidia.com", "node-a", "gpu-vfio-0", "vfio"),
        ("gpu.nvidia.com", "node-a", "gpu-x", "unknown_name"),
    ]
    assert resolved.dra_ignored == [("compute-domain.nvidia.com", 1), ("dra.net", 2)]


def test_a_gpu_without_a_minor_number_is_never_matched() -> None:
    gpus = (
        GpuSample(identity=GpuIdentity(0, "GPU-0", "x", None, "0", None, None, False), up=True),
    )
    resolved = resolve_holds([_pod("p", _claim("gpu", ("gpu.nvidia.com", "gpu-0")))], gpus, ())
    assert resolved.holds == []
    assert resolved.dra_unresolved == [("gpu.nvidia.com", "node-a", "gpu-0", "no_such_gpu")]
