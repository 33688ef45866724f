"""The kubelet's pod-resources API v1 as of Kubernetes 1.36, as data, and its protobuf
message classes for servers (`message_classes()`).

`API` is every message and field of `pkg/apis/podresources/v1/api.proto` in
kubernetes/kubelet's `release-1.36` (blob 8b2474e718c3222e967927b694a83fe47488ae2b,
branch tip cfd73d47e972d07fdd34c4de2ec1e58329ee364e; Apache-2.0, The Kubernetes
Authors): names, numbers, types and labels, including what the agent does not read
(CPU IDs, memory, topology, `ClaimResource.share_id`, new in 1.35) and the `Get` call, so the
simulated kubelet and the tests encode exactly what a 1.36 kubelet sends. The file itself
is not copied: the table is its schema, `METHODS` its service. Field 1 of
`DynamicResource` (`class_name`) was removed in 1.31. 1.34's file is the same less
`share_id`; the development branch (1.37) adds `PodResources.cpu_ids = 4`, `memory = 5`,
which the decoder skips like any field it does not read.

The agent never builds these classes: it decodes the replies by hand
(`gpuwatch.kube.podresources`). `message_classes()` imports protobuf on its first call
and builds the file descriptor at runtime (generated `_pb2` modules refuse a protobuf
runtime older than their generator).
"""

from __future__ import annotations

import functools
from typing import Any

PACKAGE = "v1"
SERVICE = "PodResourcesLister"

# FieldDescriptorProto's types and labels
_INT64 = 3
_UINT64 = 4
_STRING = 9
_MESSAGE = 11
_OPTIONAL = 1
_REPEATED = 3

Field = tuple[str, int, int, int, str, bool]
"""(name, number, type, label, message type, proto3 `optional`)."""


def _f(name: str, number: int, kind: int, label: int = _OPTIONAL, of: str = "") -> Field:
    return (name, number, kind, label, f".{PACKAGE}.{of}" if of else "", False)


API: dict[str, tuple[Field, ...]] = {
    "AllocatableResourcesRequest": (),
    "AllocatableResourcesResponse": (
        _f("devices", 1, _MESSAGE, _REPEATED, "ContainerDevices"),
        _f("cpu_ids", 2, _INT64, _REPEATED),
        _f("memory", 3, _MESSAGE, _REPEATED, "ContainerMemory"),
    ),
    "ListPodResourcesRequest": (),
    "ListPodResourcesResponse": (_f("pod_resources", 1, _MESSAGE, _REPEATED, "PodResources"),),
    "PodResources": (
        _f("name", 1, _STRING),
        _f("namespace", 2, _STRING),
        _f("containers", 3, _MESSAGE, _REPEATED, "ContainerResources"),
    ),
    "ContainerResources": (
        _f("name", 1, _STRING),
        _f("devices", 2, _MESSAGE, _REPEATED, "ContainerDevices"),
        _f("cpu_ids", 3, _INT64, _REPEATED),
        _f("memory", 4, _MESSAGE, _REPEATED, "ContainerMemory"),
        _f("dynamic_resources", 5, _MESSAGE, _REPEATED, "DynamicResource"),
    ),
    "ContainerMemory": (
        _f("memory_type", 1, _STRING),
        _f("size", 2, _UINT64),
        _f("topology", 3, _MESSAGE, _OPTIONAL, "TopologyInfo"),
    ),
    "ContainerDevices": (
        _f("resource_name", 1, _STRING),
        _f("device_ids", 2, _STRING, _REPEATED),
        _f("topology", 3, _MESSAGE, _OPTIONAL, "TopologyInfo"),
    ),
    "TopologyInfo": (_f("nodes", 1, _MESSAGE, _REPEATED, "NUMANode"),),
    "NUMANode": (_f("ID", 1, _INT64),),
    "DynamicResource": (
        _f("claim_name", 2, _STRING),
        _f("claim_namespace", 3, _STRING),
        _f("claim_resources", 4, _MESSAGE, _REPEATED, "ClaimResource"),
    ),
    "ClaimResource": (
        _f("cdi_devices", 1, _MESSAGE, _REPEATED, "CDIDevice"),
        _f("driver_name", 2, _STRING),
        _f("pool_name", 3, _STRING),
        _f("device_name", 4, _STRING),
        ("share_id", 5, _STRING, _OPTIONAL, "", True),  # `optional string share_id = 5;`
    ),
    "CDIDevice": (_f("name", 1, _STRING),),
    "GetPodResourcesRequest": (
        _f("pod_name", 1, _STRING),
        _f("pod_namespace", 2, _STRING),
    ),
    "GetPodResourcesResponse": (_f("pod_resources", 1, _MESSAGE, _OPTIONAL, "PodResources"),),
}
"""Every message of the 1.36 `api.proto` by name, its fields in file order."""

METHODS: dict[str, tuple[str, str]] = {
    "List": ("ListPodResourcesRequest", "ListPodResourcesResponse"),
    "GetAllocatableResources": ("AllocatableResourcesRequest", "AllocatableResourcesResponse"),
    "Get": ("GetPodResourcesRequest", "GetPodResourcesResponse"),
}
"""The service's unary methods: name -> (request, response)."""


def file_descriptor() -> Any:
    """`API` and `METHODS` as a `FileDescriptorProto` (imports protobuf)."""
    # lazy: the protobuf runtime for servers and tests only, never the agent's client
    from google.protobuf import descriptor_pb2  # noqa: PLC0415

    proto = descriptor_pb2.FileDescriptorProto(
        name="k8s.io/kubelet/pkg/apis/podresources/v1/api.proto",
        package=PACKAGE,
        syntax="proto3",
    )
    proto.options.go_package = "k8s.io/kubelet/pkg/apis/podresources/v1"
    for message_name, fields in API.items():
        message = proto.message_type.add(name=message_name)
        for name, number, kind, label, type_name, optional in fields:
            field = message.field.add(name=name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name
            if optional:  # proto3 `optional`: a synthetic oneof `_<name>`
                field.proto3_optional = True
                field.oneof_index = len(message.oneof_decl)
                message.oneof_decl.add(name=f"_{name}")
    service = proto.service.add(name=SERVICE)
    for method, (request, response) in METHODS.items():
        service.method.add(
            name=method, input_type=f".{PACKAGE}.{request}", output_type=f".{PACKAGE}.{response}"
        )
    return proto


@functools.cache
def message_classes() -> dict[str, Any]:
    """The message classes of `API` by name, in a private descriptor pool, for servers
    (the simulated kubelet, tests' fake ones) that encode replies; built once."""
    # lazy: the protobuf runtime for servers and tests only, never the agent's client
    from google.protobuf import descriptor_pool, message_factory  # noqa: PLC0415

    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_descriptor())
    get_class = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    if get_class is None:  # protobuf 4.21
        get_class = message_factory.MessageFactory(pool).GetPrototype
    return {name: get_class(pool.FindMessageTypeByName(f"{PACKAGE}.{name}")) for name in API}
