"""DRA devices of `gpu.nvidia.com` resolved to this host's GPUs by the driver's device
names, on literals: a GPU exactly by NVML minor number, a MIG device by its parent's
minor, GPU-instance profile ID and placement; never a guess (VFIO, unknown minors, MIG
devices not there or whose placement NVML did not give, unknown names are unresolved
with a reason); other drivers counted."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwatch.collectors.attribution_join import resolve_holds
from gpuwatch.core.snapshot import GpuIdentity, GpuSample, MigInstanceSample, PodRef
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


def _mig_gpu(profile_ids: tuple[int | None, ...]) -> GpuSample:
    """GPU index 1 (minor 2) split into MIG devices of these profile IDs, placed in order
    one memory slice apart (None: NVML did not give the GPU instance's info)."""
    instances = tuple(
        MigInstanceSample(
            f"MIG-{k}",
            gpu_instance_id=k + 5,
            compute_instance_id=0,
            memory_total_bytes=None,
            memory_used_bytes=None,
            gpu_instance_profile_id=profile,
            placement_start=None if profile is None else k,
        )
        for k, profile in enumerate(profile_ids)
    )
    return replace(GPUS[1], mig_enabled=True, mig_instances=instances)


def test_a_mig_device_is_the_one_with_that_profile_and_placement() -> None:
    gpus = (GPUS[0], _mig_gpu((19, 19, 19)), *GPUS[2:])
    claim = _claim("mig", ("gpu.nvidia.com", "gpu-2-mig-1g10gb-19-1"))
    resolved = resolve_holds([_pod("p", claim)], gpus, ())
    (hold,) = resolved.holds
    assert (hold.gpu_index, hold.mig_uuid, hold.gpu_instance_id) == (1, "MIG-1", 6)
    assert (hold.claim, hold.device_ids) == ("mig", ("node-a/gpu-2-mig-1g10gb-19-1",))
    assert resolved.dra_unresolved == []


def test_a_mig_device_not_there_or_unknown_is_never_guessed() -> None:
    names = ("gpu-2-mig-1g10gb-19-3", "gpu-2-mig-3g40gb-9-0", "gpu-7-mig-1g10gb-19-0")
    claim = _claim("mig", *(("gpu.nvidia.com", name) for name in names))
    gpus = (GPUS[0], _mig_gpu((19, 19, 19)), *GPUS[2:])
    resolved = resolve_holds([_pod("p", claim)], gpus, ())
    assert resolved.holds == []
    assert [(d, r) for _, _, d, r in resolved.dra_unresolved] == [
        ("gpu-2-mig-1g10gb-19-3", "no_such_mig"),  # no instance placed at 3
        ("gpu-2-mig-3g40gb-9-0", "no_such_mig"),  # the one at 0 is a 1g
        ("gpu-7-mig-1g10gb-19-0", "no_such_gpu"),
    ]
    unknown = (GPUS[0], _mig_gpu((19, None, 19)), *GPUS[2:])
    resolved = resolve_holds([_pod("p", claim)], unknown, ())
    assert resolved.holds == []
    assert [r for _, _, _, r in resolved.dra_unresolved] == [
        "mig_placement",
        "mig_placement",
        "no_such_gpu",
    ]


def test_unresolved_and_ignored_devices_are_named_never_guessed() -> None:
    claim = _claim(
        "mixed",
        ("gpu.nvidia.com", "gpu-7"),  # no GPU has minor 7
        ("gpu.nvidia.com", "gpu-1-mig-1g10gb-19-6"),  # MIG on a GPU without MIG devices
        ("gpu.nvidia.com", "gpu-vfio-0"),
        ("gpu.nvidia.com", "gpu-x"),
        ("compute-domain.nvidia.com", "channel-0"),
        ("dra.net", "eth1"),
        ("dra.net", "eth2"),
    )
    resolved = resolve_holds([_pod("p", claim)], GPUS, ())
    assert resolved.holds == []
    assert resolved.dra_unresolved == [
        ("gpu.nvidia.com", "node-a", "gpu-1-mig-1g10gb-19-6", "no_such_mig"),
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
