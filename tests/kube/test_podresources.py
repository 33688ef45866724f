"""The pod-resources client against a real `grpc.server` on a unix socket."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwatch.kube.podresources import (
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
    PodResourcesClient,
    PodResourcesError,
)
from gpuwatch.simulate.kubelet import ALLOCATABLE_DISABLED, SimulatedKubelet

U = "2fc0195c-3848-d59d-2cca-b96e3887fa21"
POD = PodAllocation(
    "team-a",
    "trainer-0",
    (
        ContainerAllocation(
            "trainer", (ContainerDevices("nvidia.com/gpu", (f"GPU-{U}", f"GPU-{U}::1")),)
        ),
        ContainerAllocation("sidecar", ()),
    ),
)


def _gpu(device_id: str) -> ContainerDevices:
    return ContainerDevices("nvidia.com/gpu", (device_id,))


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # unix socket paths must stay under 108 bytes: a short temp folder, not tmp_path
    with tempfile.TemporaryDirectory(prefix="gw-") as folder:
        yield Path(folder)


def test_list_and_allocatable(sock_dir: Path) -> None:
    allocatable = (ContainerDevices("nvidia.com/gpu", (f"GPU-{U}",)),)
    kubelet = SimulatedKubelet(sock_dir / "kubelet.sock", [POD], allocatable)
    kubelet.start()
    client = PodResourcesClient(sock_dir / "kubelet.sock", timeout_seconds=5)
    try:
        assert client.list() == (POD,)
        assert client.allocatable() == allocatable
        assert kubelet.list_calls == 1
    finally:
        client.close()
        kubelet.stop()


def test_old_kubelet_without_allocatable_is_none(sock_dir: Path) -> None:
    kubelet = SimulatedKubelet(sock_dir / "kubelet.sock", [POD], allocatable=None)
    kubelet.start()
    client = PodResourcesClient(sock_dir / "kubelet.sock")
    try:
        assert client.allocatable() is None
        assert client.list() == (POD,)
        assert client.reconnects == 0  # UNIMPLEMENTED keeps the channel
    finally:
        client.close()
        kubelet.stop()


def test_rate_limit_is_an_error_with_its_code(sock_dir: Path) -> None:
    kubelet = SimulatedKubelet(sock_dir / "kubelet.sock", [POD])
    kubelet.start()
    kubelet.exhausted = True
    client = PodResourcesClient(sock_dir / "kubelet.sock")
    try:
        with pytest.raises(PodResourcesError) as caught:
            client.list()
        assert caught.value.code == "RESOURCE_EXHAUSTED"
        kubelet.exhausted = False
        assert client.list() == (POD,)
    finally:
        client.close()
        kubelet.stop()


def test_no_kubelet_is_unavailable_then_recovers(sock_dir: Path) -> None:
    client = PodResourcesClient(sock_dir / "kubelet.sock", timeout_seconds=2)
    with pytest.raises(PodResourcesError) as caught:
        client.list()
    assert caught.value.code in {"UNAVAILABLE", "DEADLINE_EXCEEDED"}
    kubelet = SimulatedKubelet(sock_dir / "kubelet.sock", [POD])
    kubelet.start()
    try:
        assert client.list() == (POD,)
    finally:
        client.close()
        kubelet.stop()


def test_kubelet_restart_replaces_the_socket_and_the_client_follows(sock_dir: Path) -> None:
    kubelet = SimulatedKubelet(sock_dir / "kubelet.sock", [POD])
    kubelet.start()
    client = PodResourcesClient(sock_dir / "kubelet.sock", timeout_seconds=5)
    try:
        assert client.list() == (POD,)
        kubelet.restart()
        kubelet.set_pods([])
        assert client.list() == ()  # no failed call in between: the new inode is noticed
        assert client.reconnects == 1
    finally:
        client.close()
        kubelet.stop()


def test_reply_over_the_receive_limit_fails_cleanly(sock_dir: Path) -> None:
    many = [
        PodAllocation(
            "ns",
            f"pod-{i:05d}",
            (ContainerAllocation("c", (ContainerDevices("nvidia.com/gpu", (f"GPU-{U}::{i}",)),)),),
        )
        for i in range(3000)
    ]
    kubelet = SimulatedKubelet(sock_dir / "kubelet.sock", many)
    kubelet.start()
    small = PodResourcesClient(sock_dir / "kubelet.sock", max_receive_bytes=4096)
    default = PodResourcesClient(sock_dir / "kubelet.sock")
    try:
        with pytest.raises(PodResourcesError) as caught:
            small.list()
        assert caught.value.code == "RESOURCE_EXHAUSTED"
        assert len(default.list()) == 3000
    finally:
        small.close()
        default.close()
        kubelet.stop()


def test_allocatable_gate_off_raises_the_kubelets_message_and_keeps_the_channel(
    sock_dir: Path,
) -> None:
    kubelet = SimulatedKubelet(sock_dir / "kubelet.sock", [POD], allocatable_disabled=True)
    kubelet.start()
    client = PodResourcesClient(sock_dir / "kubelet.sock")
    try:
        with pytest.raises(PodResourcesError) as caught:
            client.allocatable()
        assert caught.value.code == "UNKNOWN"
        assert caught.value.detail == ALLOCATABLE_DISABLED
        assert str(caught.value).endswith(f"UNKNOWN: {ALLOCATABLE_DISABLED}")
        assert client.list() == (POD,)
        assert client.reconnects == 0  # the kubelet answered: no new channel
    finally:
        client.close()
        kubelet.stop()
