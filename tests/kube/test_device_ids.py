"""Every device-ID form device plugins use, and the GPU resource names."""

from __future__ import annotations

import pytest

from gpuwatch.kube.device_ids import DeviceRef, is_gpu_resource, parse_device_id

U = "2fc0195c-3848-d59d-2cca-b96e3887fa21"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (f"GPU-{U}", DeviceRef(f"GPU-{U}", uuid=f"GPU-{U}")),
        (f"GPU-{U}::3", DeviceRef(f"GPU-{U}::3", uuid=f"GPU-{U}", replica=3)),
        (f"GPU-{U.upper()}", DeviceRef(f"GPU-{U.upper()}", uuid=f"GPU-{U}")),
        (f"MIG-{U}", DeviceRef(f"MIG-{U}", uuid=f"MIG-{U}")),
        (f"MIG-{U}::0", DeviceRef(f"MIG-{U}::0", uuid=f"MIG-{U}", replica=0)),
        (f"MIG-GPU-{U}/2/0", DeviceRef(f"MIG-GPU-{U}/2/0", uuid=f"GPU-{U}", gpu_instance_id=2)),
        ("nvidia0", DeviceRef("nvidia0", minor=0)),
        ("nvidia7/vgpu3", DeviceRef("nvidia7/vgpu3", minor=7, replica=3)),
        ("nvidia1/gi2", DeviceRef("nvidia1/gi2", minor=1, gpu_instance_id=2)),
        (
            "nvidia1/gi2/vgpu0",
            DeviceRef("nvidia1/gi2/vgpu0", minor=1, gpu_instance_id=2, replica=0),
        ),
        # the NVIDIA plugin's --device-id-strategy=index: NVML indexes, replicas after ::
        ("0", DeviceRef("0", index=0)),
        ("12", DeviceRef("12", index=12)),
        ("0::1", DeviceRef("0::1", index=0, replica=1)),
    ],
)
def test_known_forms(raw: str, expected: DeviceRef) -> None:
    assert parse_device_id(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "GPU-",
        f"GPU-{U}::",
        f"GPU-{U}::x",
        "nvidia",
        "nvidiaX",
        "nvidia0/gpu1",
        "amd.com/gpu0",
        f"GPU-{U}/extra",
        "MIG-short",
        "0:1",  # the index strategy's MIG form: the MIG slot is not sampled
        "0::",
        "-1",
    ],
)
def test_unknown_forms_are_none(raw: str) -> None:
    assert parse_device_id(raw) is None


def test_mig_flag() -> None:
    assert parse_device_id(f"MIG-{U}").is_mig  # type: ignore[union-attr]
    assert parse_device_id("nvidia1/gi2").is_mig  # type: ignore[union-attr]
    assert not parse_device_id(f"GPU-{U}::1").is_mig  # type: ignore[union-attr]
    assert not parse_device_id("nvidia1/vgpu2").is_mig  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "extra", "expected"),
    [
        ("nvidia.com/gpu", (), True),
        ("nvidia.com/gpu.shared", (), True),
        ("nvidia.com/mig-1g.10gb", (), True),
        ("nvidia.com/mig-3g.40gb", (), True),
        ("example.com/fast-gpu", (), False),
        ("example.com/fast-gpu", ("example.com/fast-gpu",), True),
        ("cpu", (), False),
        ("nvidia.com/gpux", (), False),
    ],
)
def test_gpu_resources(name: str, extra: tuple[str, ...], expected: bool) -> None:
    assert is_gpu_resource(name, extra) is expected
