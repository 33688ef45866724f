"""DRA's `dynamic_resources` in the kubelet's List reply: the hand decoder against
messages protobuf builds from the 1.36 `api.proto` schema (every field of it set, the
ones the agent does not read included), and the client against a real `grpc.server` on
a unix socket serving claims."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwatch.kube.podresources import (
    ClaimAllocation,
    ClaimDevice,
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
    PodResourcesClient,
    decode_list,
)
from gpuwatch.kube.podresources_schema import API, file_descriptor, message_classes
from gpuwatch.simulate.kubelet import SimulatedKubelet, encode_list

CLAIM_UID = "dab5ab50-d59a-42a6-af16-cfd4628c0f7a"
GPU0 = ClaimDevice(
    "gpu.nvidia.com", "node-a", "gpu-0", (f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-0",)
)
MIG = ClaimDevice(
    "gpu.nvidia.com",
    "node-a",
    "gpu-1-mig-1g10gb-19-6",
    (f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-1-mig-1g10gb-19-6",),
)


def test_the_dra_messages_have_the_1_36_field_numbers() -> None:
    numbers = {m: {f[0]: f[1] for f in fields} for m, fields in API.items()}
    assert numbers["ContainerResources"]["dynamic_resources"] == 5
    assert numbers["DynamicResource"] == {
        "claim_name": 2,
        "claim_namespace": 3,
        "claim_resources": 4,
    }
    assert numbers["ClaimResource"] == {
        "cdi_devices": 1,
        "driver_name": 2,
        "pool_name": 3,
        "device_name": 4,
        "share_id": 5,
    }
    assert numbers["CDIDevice"] == {"name": 1}
    service = file_descriptor().service[0]
    assert [m.name for m in service.method] == ["List", "GetAllocatableResources", "Get"]


def _full_reply() -> bytes:
    """A List reply with every field of the schema set, as a 1.36 kubelet may send it."""
    m = message_classes()
    topology = m["TopologyInfo"](nodes=[m["NUMANode"](ID=1)])
    memory = m["ContainerMemory"](memory_type="hugepages-2Mi", size=2 << 20, topology=topology)
    plugin = m["ContainerDevices"](
        resource_name="nvidia.com/gpu", device_ids=["GPU-a"], topology=topology
    )
    claim = m["DynamicResource"](
        claim_name="trainer-gpu",
        claim_namespace="team-a",
        claim_resources=[
            m["ClaimResource"](
                cdi_devices=[m["CDIDevice"](name=name) for name in GPU0.cdi_devices],
                driver_name=GPU0.driver_name,
                pool_name=GPU0.pool_name,
                device_name=GPU0.device_name,
                share_id="0b1f7c9e-share",
            ),
            m["ClaimResource"](
                cdi_devices=[m["CDIDevice"](name=name) for name in MIG.cdi_devices],
                driver_name=MIG.driver_name,
                pool_name=MIG.pool_name,
                device_name=MIG.device_name,
            ),
        ],
    )
    other = m["DynamicResource"](
        claim_name="nic",
        claim_namespace="team-a",
        claim_resources=[
            m["ClaimResource"](driver_name="dra.net", pool_name="node-a", device_name="eth1")
        ],
    )
    container = m["ContainerResources"](
        name="trainer",
        devices=[plugin],
        cpu_ids=[2, 3],
        memory=[memory],
        dynamic_resources=[claim, other],
    )
    pod = m["PodResources"](name="trainer-0", namespace="team-a", containers=[container])
    data: bytes = m["ListPodResourcesResponse"](pod_resources=[pod]).SerializeToString()
    return data


EXPECTED = (
    PodAllocation(
        "team-a",
        "trainer-0",
        (
            ContainerAllocation(
                "trainer",
                (ContainerDevices("nvidia.com/gpu", ("GPU-a",)),),
                (
                    ClaimAllocation("trainer-gpu", "team-a", (GPU0, MIG)),
                    ClaimAllocation("nic", "team-a", (ClaimDevice("dra.net", "node-a", "eth1"),)),
                ),
            ),
        ),
    ),
)


def test_dynamic_resources_decode_as_protobuf_encodes_them() -> None:
    assert decode_list(_full_reply()) == EXPECTED


def test_the_simulated_kubelet_encodes_what_the_decoder_reads() -> None:
    data = encode_list(EXPECTED)
    assert decode_list(data) == EXPECTED
    reply = message_classes()["ListPodResourcesResponse"].FromString(data)
    resource = reply.pod_resources[0].containers[0].dynamic_resources[0].claim_resources[1]
    assert (resource.driver_name, resource.pool_name, resource.device_name) == (
        "gpu.nvidia.com",
        "node-a",
        "gpu-1-mig-1g10gb-19-6",
    )
    assert not resource.HasField("share_id")


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # unix socket paths must stay under 108 bytes: a short temp folder, not tmp_path
    with tempfile.TemporaryDirectory(prefix="gw-") as folder:
        yield Path(folder)


def test_claims_over_a_real_grpc_server(sock_dir: Path) -> None:
    kubelet = SimulatedKubelet(sock_dir / "kubelet.sock", EXPECTED)
    kubelet.start()
    client = PodResourcesClient(sock_dir / "kubelet.sock", timeout_seconds=5)
    try:
        assert client.list() == EXPECTED
    finally:
        client.close()
        kubelet.stop()
