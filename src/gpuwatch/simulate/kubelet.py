"""A simulated kubelet: a real `grpc.server` answering pod-resources v1 on a unix socket.

Its replies are encoded by protobuf from the 1.36 `api.proto`'s schema
(`gpuwatch.kube.podresources_schema`), DRA's `dynamic_resources` included. It serves
whatever `PodAllocation`s it is given (`set_pods`), so the production client and
collector run unchanged against it. `allocatable=None` leaves `GetAllocatableResources`
unregistered (a kubelet before 1.21: UNIMPLEMENTED); `allocatable_disabled=True` answers
it as a kubelet with the `KubeletPodResourcesGetAllocatable` gate off does (UNKNOWN,
`ALLOCATABLE_DISABLED`); `exhausted = True` answers RESOURCE_EXHAUSTED (the kubelet's
rate limit). `restart()` replaces the socket file, as a restarting kubelet does.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from gpuwatch.kube.podresources import (
    ALLOCATABLE_METHOD,
    LIST_METHOD,
    ClaimAllocation,
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
)
from gpuwatch.kube.podresources_schema import message_classes


def _devices(devices: Sequence[ContainerDevices]) -> list[dict[str, Any]]:
    return [{"resource_name": d.resource_name, "device_ids": list(d.device_ids)} for d in devices]


def _claims(claims: Sequence[ClaimAllocation]) -> list[dict[str, Any]]:
    return [
        {
            "claim_name": claim.claim_name,
            "claim_namespace": claim.claim_namespace,
            "claim_resources": [
                {
                    "cdi_devices": [{"name": name} for name in device.cdi_devices],
                    "driver_name": device.driver_name,
                    "pool_name": device.pool_name,
                    "device_name": device.device_name,
                }
                for device in claim.devices
            ],
        }
        for claim in claims
    ]


def _container(container: ContainerAllocation) -> dict[str, Any]:
    return {
        "name": container.name,
        "devices": _devices(container.devices),
        "dynamic_resources": _claims(container.claims),
    }


def encode_list(pods: Sequence[PodAllocation]) -> bytes:
    """`pods` as a serialised `ListPodResourcesResponse`."""
    reply = message_classes()["ListPodResourcesResponse"](
        pod_resources=[
            {
                "name": pod.name,
                "namespace": pod.namespace,
                "containers": [_container(c) for c in pod.containers],
            }
            for pod in pods
        ]
    )
    data: bytes = reply.SerializeToString()
    return data


def encode_allocatable(devices: Sequence[ContainerDevices]) -> bytes:
    """`devices` as a serialised `AllocatableResourcesResponse`."""
    reply = message_classes()["AllocatableResourcesResponse"](devices=_devices(devices))
    data: bytes = reply.SerializeToString()
    return data


def _identity(data: bytes) -> bytes:
    return data


ALLOCATABLE_DISABLED = "Pod Resources API GetAllocatableResources disabled"
"""The kubelet's error text with its GetAllocatable feature gate off (gRPC status UNKNOWN)."""


class SimulatedKubelet:
    """The pod-resources server; `start()` binds `socket_path`, `stop()` removes it."""

    def __init__(
        self,
        socket_path: Path,
        pods: Sequence[PodAllocation] = (),
        allocatable: Sequence[ContainerDevices] | None = (),
        *,
        allocatable_disabled: bool = False,
    ) -> None:
        self.socket_path = socket_path
        self._lock = threading.Lock()
        self._pods = tuple(pods)
        self._allocatable = None if allocatable is None else tuple(allocatable)
        self.allocatable_disabled = allocatable_disabled
        self.exhausted = False
        self.list_calls = 0
        self._server: grpc.Server | None = None

    def set_pods(self, pods: Sequence[PodAllocation]) -> None:
        """What the next `List` answers."""
        with self._lock:
            self._pods = tuple(pods)

    def _list(self, _request: bytes, context: grpc.ServicerContext) -> bytes:
        with self._lock:
            self.list_calls += 1
            pods = self._pods
        if self.exhausted:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit")
        return encode_list(pods)

    def _allocatable_reply(self, _request: bytes, context: grpc.ServicerContext) -> bytes:
        if self.allocatable_disabled:
            context.abort(grpc.StatusCode.UNKNOWN, ALLOCATABLE_DISABLED)
        return encode_allocatable(self._allocatable or ())

    def start(self) -> None:
        """Bind the socket (replacing a stale file) and serve on two threads."""
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        handlers = {
            "List": grpc.unary_unary_rpc_method_handler(
                self._list, request_deserializer=_identity, response_serializer=_identity
            )
        }
        if self._allocatable is not None:
            handlers["GetAllocatableResources"] = grpc.unary_unary_rpc_method_handler(
                self._allocatable_reply,
                request_deserializer=_identity,
                response_serializer=_identity,
            )
        service = LIST_METHOD.split("/")[1]
        assert service == ALLOCATABLE_METHOD.split("/")[1]
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
        server.add_insecure_port(f"unix:{self.socket_path}")
        server.start()
        self._server = server

    def stop(self) -> None:
        """Stop serving and remove the socket file."""
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None
        self.socket_path.unlink(missing_ok=True)

    def restart(self) -> None:
        """Stop and start again on the same path: a new socket file (a new inode)."""
        self.stop()
        self.start()
