"""The kubelet pod-resources API v1 client (`/v1.PodResourcesLister/*`) over its unix socket.

The client decodes the replies itself (`decode_list`, `decode_allocatable`): what
attribution reads of the kubelet's `pkg/apis/podresources/v1/api.proto` (the 1.36 schema
is `gpuwatch.kube.podresources_schema.API`) is a few string and message fields, read
straight from the protobuf wire format, skipping every other field (CPU IDs, memory,
topology, a claim's `share_id`) as proto3 does: the device plugins' `devices` and DRA's
`dynamic_resources` (claim, driver, pool, device, CDI device names). So the agent does
not import the protobuf runtime (about 1.3 MiB of its memory, docs/benchmarks.md);
servers that encode replies (the simulated kubelet, the tests' fake ones) use
`podresources_schema.message_classes()`.

The transport is `gpuwatch.kube.grpc_unary`, a small unary gRPC client on `h2` (pure
Python), not grpcio: the agent makes two unary calls every few seconds, and grpcio (its
C extension, asyncio and its Python modules) was about 10 MiB of the agent's memory as
the chart runs it, the largest single cost (docs/benchmarks.md, "grpcio replaced by an h2
client"). Calls have a timeout and a 16 MiB receive limit (a busy node's reply can exceed
gRPC's 4 MB default). After a transport failure, or when the socket file was replaced (a
kubelet restart), the next call opens a new channel (connection). `GetAllocatableResources` answers
UNIMPLEMENTED on kubelets older than 1.21: None then (with the
`KubeletPodResourcesGetAllocatable` gate off it answers UNKNOWN, an error the caller
degrades).

A connection failure is UNAVAILABLE, as grpcio says it, with what happened in its text;
`failure_reason` names the cause (one of `FAILURE_REASONS`) by probing the socket path
with stat(2) and connect(2) after a failed call.
"""

from __future__ import annotations

import errno
import os
import socket
import stat as stat_module
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuwatch.kube.grpc_unary import TRANSPORT_CODES, UnaryChannel, UnaryError

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
MAX_RECEIVE_BYTES = 16 * 1024 * 1024
DEFAULT_TIMEOUT_SECONDS = 5.0
LIST_METHOD = "/v1.PodResourcesLister/List"
ALLOCATABLE_METHOD = "/v1.PodResourcesLister/GetAllocatableResources"


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    """Devices of one resource allocated to a container (or allocatable on the node)."""

    resource_name: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClaimDevice:
    """One device a DRA claim gave a container (`ClaimResource`): the driver/pool/device
    triplet names it, `cdi_devices` are the CDI device names the driver prepared for it."""

    driver_name: str
    pool_name: str
    device_name: str
    cdi_devices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """The devices of one DRA ResourceClaim a container uses (`DynamicResource`)."""

    claim_name: str
    claim_namespace: str
    devices: tuple[ClaimDevice, ...]


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    """One container's devices: the device plugins' and, through DRA claims, the
    drivers' (`dynamic_resources`, kubelet 1.34 and newer)."""

    name: str
    devices: tuple[ContainerDevices, ...]
    claims: tuple[ClaimAllocation, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAllocation:
    """One pod the kubelet lists, with its containers' devices."""

    namespace: str
    name: str
    containers: tuple[ContainerAllocation, ...]


class PodResourcesError(Exception):
    """A call failed; the message names the method, the gRPC status and its details (the
    server's message or gRPC's connection error), never the payload."""

    def __init__(self, method: str, code: str, detail: str = "") -> None:
        super().__init__(f"{method}: {code}{': ' + detail if detail else ''}")
        self.method = method
        self.code = code
        self.detail = detail


FAILURE_REASONS = (
    "permission_denied",
    "no_socket",
    "unavailable",
    "timeout",
    "not_implemented",
    "error",
)
"""Why a pod-resources call failed (`failure_reason`), a closed set:

- `permission_denied`: stat(2) or connect(2) on the socket got EACCES/EPERM (the kubelet
  makes `pod-resources/` root-only, mode 0750);
- `no_socket`: nothing at the path (ENOENT/ENOTDIR), or a file that is not a socket;
- `unavailable`: the socket refuses connections (ECONNREFUSED: kubelet down or
  restarting) or gRPC could not talk over it;
- `timeout`: no answer within the deadline (DEADLINE_EXCEEDED);
- `not_implemented`: the server has no `List` (UNIMPLEMENTED);
- `error`: any other status (RESOURCE_EXHAUSTED from the rate limit or an oversized
  reply, INTERNAL, ...); the log line names it.
"""

PROBE_TIMEOUT_SECONDS = 1.0
"""connect(2) deadline of the socket probe (a unix socket answers in microseconds)."""


def probe_socket(path: Path) -> tuple[str | None, str]:
    """(failure reason or None when a connection opens, what the probe saw) for the
    unix socket at `path`: stat(2), then connect(2) as this process's user."""
    try:
        info = path.stat()
    except OSError as exc:
        return _errno_reason(exc), f"stat: {exc.strerror or type(exc).__name__}"
    if not stat_module.S_ISSOCK(info.st_mode):
        return "no_socket", "stat: not a socket"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PROBE_TIMEOUT_SECONDS)
        try:
            probe.connect(os.fspath(path))
        except TimeoutError:
            return "timeout", "connect: timed out"
        except OSError as exc:
            return _errno_reason(exc), f"connect: {exc.strerror or type(exc).__name__}"
    return None, "connect: ok"


def _errno_reason(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission_denied"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no_socket"
    return "unavailable"


_CODE_REASONS = {
    "UNAVAILABLE": "unavailable",
    "DEADLINE_EXCEEDED": "timeout",
    "UNIMPLEMENTED": "not_implemented",
    "PERMISSION_DENIED": "permission_denied",
}


def failure_reason(exc: PodResourcesError, socket_path: Path) -> tuple[str, str]:
    """(reason in `FAILURE_REASONS`, what the socket probe saw) for a failed call. After
    a status that may hide a connection failure the socket is probed, and the probe
    decides when it finds the socket unusable (a missing file, EACCES); otherwise (and
    after a status only a server sends) the gRPC status does."""
    if exc.code not in _TRANSPORT_CODES and exc.code != "UNKNOWN":
        return _CODE_REASONS.get(exc.code, "error"), "the server answered"
    probed, seen = probe_socket(socket_path)
    if probed is not None:
        return probed, seen
    return _CODE_REASONS.get(exc.code, "error"), seen


class _WireError(ValueError):
    """Bytes that are no protobuf message."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise _WireError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise _WireError("varint longer than 10 bytes")


def _fields(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(field number, bytes) of each length-delimited field of one message, in order;
    fields of the other wire types (varint, fixed64, fixed32) are skipped."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise _WireError("field number 0")
        if wire_type == 0:
            _, pos = _varint(data, pos)
        elif wire_type in (1, 5):
            pos += 8 if wire_type == 1 else 4
        elif wire_type == 2:
            size, pos = _varint(data, pos)
            if pos + size > end:
                raise _WireError("truncated field")
            yield number, data[pos : pos + size]
            pos += size
        else:  # groups (3, 4) are proto2's, and 6, 7 do not exist
            raise _WireError(f"wire type {wire_type}")
        if pos > end:
            raise _WireError("truncated field")


def _text(data: bytes) -> str:
    return data.decode("utf-8")  # proto3 strings are UTF-8 (UnicodeDecodeError if not)


def _container_devices(data: bytes) -> ContainerDevices:
    resource_name, device_ids = "", []
    for number, value in _fields(data):
        if number == 1:
            resource_name = _text(value)
        elif number == 2:
            device_ids.append(_text(value))
    return ContainerDevices(resource_name, tuple(device_ids))


def _claim_device(data: bytes) -> ClaimDevice:
    """`ClaimResource{cdi_devices=1 (CDIDevice{name=1}), driver_name=2, pool_name=3,
    device_name=4}`."""
    cdi: list[str] = []
    text = {2: "", 3: "", 4: ""}
    for number, value in _fields(data):
        if number == 1:
            cdi.extend(_text(v) for n, v in _fields(value) if n == 1)
        elif number in text:
            text[number] = _text(value)
    return ClaimDevice(text[2], text[3], text[4], tuple(cdi))


def _claim(data: bytes) -> ClaimAllocation:
    """`DynamicResource{claim_name=2, claim_namespace=3, claim_resources=4}`."""
    name, namespace, devices = "", "", []
    for number, value in _fields(data):
        if number == 2:
            name = _text(value)
        elif number == 3:
            namespace = _text(value)
        elif number == 4:
            devices.append(_claim_device(value))
    return ClaimAllocation(name, namespace, tuple(devices))


def _container(data: bytes) -> ContainerAllocation:
    name, devices, claims = "", [], []
    for number, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 2:
            devices.append(_container_devices(value))
        elif number == 5:
            claims.append(_claim(value))
    return ContainerAllocation(name, tuple(devices), tuple(claims))


def _pod(data: bytes) -> PodAllocation:
    name, namespace, containers = "", "", []
    for number, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 2:
            namespace = _text(value)
        elif number == 3:
            containers.append(_container(value))
    return PodAllocation(namespace, name, tuple(containers))


def decode_list(data: bytes) -> tuple[PodAllocation, ...]:
    """A serialised `ListPodResourcesResponse` as plain values; PodResourcesError
    (DATA_LOSS) when the bytes are no such message."""
    try:
        return tuple(_pod(value) for number, value in _fields(data) if number == 1)
    except (_WireError, UnicodeDecodeError) as exc:
        raise PodResourcesError(LIST_METHOD, "DATA_LOSS", f"malformed reply: {exc}") from None


def decode_allocatable(data: bytes) -> tuple[ContainerDevices, ...]:
    """A serialised `AllocatableResourcesResponse` as plain values; PodResourcesError
    (DATA_LOSS) when the bytes are no such message."""
    try:
        return tuple(_container_devices(value) for number, value in _fields(data) if number == 1)
    except (_WireError, UnicodeDecodeError) as exc:
        raise PodResourcesError(
            ALLOCATABLE_METHOD, "DATA_LOSS", f"malformed reply: {exc}"
        ) from None


_TRANSPORT_CODES = TRANSPORT_CODES
"""Statuses after which the channel is replaced (the server's own answers keep it)."""


def _socket_id(path: Path) -> tuple[int, int, int] | None:
    """Which socket file is at `path` (a new file may reuse the inode, not the ctime)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_ctime_ns


class PodResourcesClient:
    """Calls the kubelet's pod-resources API; one channel, replaced after failures."""

    def __init__(
        self,
        socket_path: Path = DEFAULT_SOCKET,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_receive_bytes: int = MAX_RECEIVE_BYTES,
    ) -> None:
        self.socket_path = socket_path
        self._timeout = timeout_seconds
        self._max_receive = max_receive_bytes
        self._channel: UnaryChannel | None = None
        self._socket_id: tuple[int, int, int] | None = None
        self._opened = False
        self.reconnects = 0  # channels opened after the first (a kubelet restart, a failure)

    def _ensure_channel(self) -> UnaryChannel:
        current = _socket_id(self.socket_path)
        if self._channel is not None and current != self._socket_id:
            self._drop_channel()  # the socket was replaced: the kubelet restarted
        if self._channel is None:
            self.reconnects += 1 if self._opened else 0
            self._opened = True
            self._channel = UnaryChannel(self.socket_path, max_receive_bytes=self._max_receive)
            self._socket_id = current
        return self._channel

    def _drop_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _call(self, method: str, request: bytes) -> bytes:
        try:
            return self._ensure_channel().call(method, request, self._timeout)
        except UnaryError as exc:
            if exc.code in _TRANSPORT_CODES:
                self._drop_channel()
            raise PodResourcesError(method, exc.code, exc.detail) from exc

    def list(self) -> tuple[PodAllocation, ...]:
        """Every pod with its containers' devices; raises PodResourcesError."""
        return decode_list(self._call(LIST_METHOD, b""))

    def allocatable(self) -> tuple[ContainerDevices, ...] | None:
        """Devices the node can allocate; None from a kubelet without the method
        (UNIMPLEMENTED); raises PodResourcesError on other failures."""
        try:
            return decode_allocatable(self._call(ALLOCATABLE_METHOD, b""))
        except PodResourcesError as exc:
            if exc.code == "UNIMPLEMENTED":
                return None
            raise

    def close(self) -> None:
        """Close the channel (a later call opens a new one)."""
        self._drop_channel()
        self._socket_id = None


__all__ = [
    "FAILURE_REASONS",
    "ClaimAllocation",
    "ClaimDevice",
    "ContainerAllocation",
    "ContainerDevices",
    "PodAllocation",
    "PodResourcesClient",
    "PodResourcesError",
    "decode_allocatable",
    "decode_list",
    "failure_reason",
    "probe_socket",
]
