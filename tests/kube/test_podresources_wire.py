"""The client's own decoding of the kubelet's replies against protobuf's encoding: the
same values, the fields the subset leaves out skipped (as the real kubelet sends them:
topology, CPU IDs, memory), malformed bytes a PodResourcesError; and
the agent's attribution path does not import protobuf."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuwatch.kube.podresources import (
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
    PodResourcesError,
    decode_allocatable,
    decode_list,
    failure_reason,
)
from gpuwatch.kube.podresources_schema import message_classes


def _key(number: int, wire_type: int) -> bytes:
    return bytes([number << 3 | wire_type])


def _delimited(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return _key(number, 2) + bytes([len(payload)]) + payload


# fields the subset does not declare (numbers none of its messages uses), one of each
# wire type; the kubelet's own are ContainerDevices.topology (3), ContainerResources'
# cpu_ids (3, packed) and memory (4)
TOPOLOGY = _delimited(15, _delimited(1, _key(1, 0) + b"\x01"))  # a message
VARINT = _key(9, 0) + b"\xac\x02"  # 300
FIXED64 = _key(10, 1) + b"\x00" * 8
FIXED32 = _key(11, 5) + b"\x00" * 4
UNKNOWN = TOPOLOGY + VARINT + FIXED64 + FIXED32


def _encoded_list() -> bytes:
    messages = message_classes()
    devices = messages["ContainerDevices"](
        resource_name="nvidia.com/gpu", device_ids=["GPU-a", "GPU-b::1"]
    )
    containers = [
        messages["ContainerResources"](name="trainer", devices=[devices]),
        messages["ContainerResources"](name="sidecar"),
    ]
    pods = [
        messages["PodResources"](name="trainer-0", namespace="team-a", containers=containers),
        messages["PodResources"](name="é-ü", namespace="ns"),
    ]
    data: bytes = messages["ListPodResourcesResponse"](pod_resources=pods).SerializeToString()
    return data


def test_list_decodes_as_protobuf_does() -> None:
    assert decode_list(_encoded_list()) == (
        PodAllocation(
            "team-a",
            "trainer-0",
            (
                ContainerAllocation(
                    "trainer", (ContainerDevices("nvidia.com/gpu", ("GPU-a", "GPU-b::1")),)
                ),
                ContainerAllocation("sidecar", ()),
            ),
        ),
        PodAllocation("ns", "é-ü", ()),
    )
    assert decode_list(b"") == ()


def test_fields_outside_the_subset_are_skipped() -> None:
    devices = _delimited(1, b"nvidia.com/gpu") + UNKNOWN + _delimited(2, b"GPU-a")
    container = _delimited(1, b"c") + _delimited(2, devices) + UNKNOWN
    pod = UNKNOWN + _delimited(1, b"p") + _delimited(2, b"n") + _delimited(3, container)
    data = _delimited(1, pod) + UNKNOWN
    expected = (
        PodAllocation(
            "n", "p", (ContainerAllocation("c", (ContainerDevices("nvidia.com/gpu", ("GPU-a",)),)),)
        ),
    )
    assert decode_list(data) == expected
    # protobuf reads the same bytes to the same values
    reply = message_classes()["ListPodResourcesResponse"].FromString(data)
    assert reply.pod_resources[0].containers[0].devices[0].device_ids == ["GPU-a"]


def test_the_kubelets_own_extra_fields_are_skipped() -> None:
    topology = _delimited(3, _delimited(1, _key(1, 0) + b"\x01"))  # TopologyInfo{nodes{id 1}}
    devices = _delimited(1, b"nvidia.com/gpu") + _delimited(2, b"GPU-a") + topology
    cpu_ids = _delimited(3, b"\x02\x03")  # packed int64s
    memory = _delimited(4, _delimited(1, b"memory"))
    container = _delimited(1, b"c") + _delimited(2, devices) + cpu_ids + memory
    data = _delimited(1, _delimited(1, b"p") + _delimited(2, b"n") + _delimited(3, container))
    assert decode_list(data) == (
        PodAllocation(
            "n", "p", (ContainerAllocation("c", (ContainerDevices("nvidia.com/gpu", ("GPU-a",)),)),)
        ),
    )


def test_allocatable_decodes_as_protobuf_does() -> None:
    reply = message_classes()["AllocatableResourcesResponse"](
        devices=[
            message_classes()["ContainerDevices"](
                resource_name="nvidia.com/gpu", device_ids=["GPU-a"]
            ),
            message_classes()["ContainerDevices"](
                resource_name="nvidia.com/mig-1g.10gb", device_ids=[]
            ),
        ]
    )
    assert decode_allocatable(reply.SerializeToString() + UNKNOWN) == (
        ContainerDevices("nvidia.com/gpu", ("GPU-a",)),
        ContainerDevices("nvidia.com/mig-1g.10gb", ()),
    )


@pytest.mark.parametrize(
    "data",
    [
        b"\x0a\x05ab",  # a field longer than the message
        b"\x0a",  # a key and no length
        b"\x08\xff",  # a varint cut short
        b"\x08" + b"\xff" * 10 + b"\x01",  # a varint of 11 bytes
        b"\x0b",  # wire type 3 (a proto2 group)
        b"\x02\x00",  # field number 0
        b"\x11\x00\x00",  # fixed64 cut short
        _delimited(1, _delimited(1, b"\xff\xfe")),  # a name that is not UTF-8
    ],
)
def test_malformed_replies_are_errors(data: bytes) -> None:
    with pytest.raises(PodResourcesError) as caught:
        decode_list(data)
    assert caught.value.code == "DATA_LOSS"
    assert caught.value.method == "/v1.PodResourcesLister/List"
    assert failure_reason(caught.value, Path("/nonexistent")) == (
        "error",
        "the server answered",
    )
    with pytest.raises(PodResourcesError, match="GetAllocatableResources: DATA_LOSS"):
        decode_allocatable(data)


def test_the_client_does_not_import_protobuf() -> None:
    code = (
        "import sys, gpuwatch.collectors.attribution, gpuwatch.kube.podresources as p\n"
        "p.decode_list(b'')\n"
        "print(sorted(m for m in sys.modules if m.startswith('google.protobuf')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
