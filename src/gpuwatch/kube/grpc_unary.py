"""One unary gRPC call at a time over HTTP/2 on a unix socket, with `h2` (pure Python).

The only module that imports `h2` (pyproject's one-door contract). It speaks what
`gpuwatch.kube.podresources` needs of gRPC (gRPC's doc/PROTOCOL-HTTP2.md): a POST with
`te: trailers` and `grpc-timeout`, one length-prefixed uncompressed request message, one
reply message, the status from `grpc-status`/`grpc-message` in the trailers (or in a
trailers-only HEADERS frame). No compression, no retries, no TLS, no streaming.

`UnaryChannel` holds one connection, opened by the first call and reused by the next
ones as a grpc channel is; a lock makes calls from several threads take turns. Every
failure is a `UnaryError` whose `code` is a gRPC status name, chosen as grpcio's client
chooses it:

- no connection (refused, no socket file), or the connection closed, reset or sent
  GOAWAY before the reply: UNAVAILABLE, the detail saying which (never payload bytes);
- no complete reply before the call's deadline (connect, send and receive share it):
  DEADLINE_EXCEEDED;
- the server's `grpc-status` (0-16; an unknown number is UNKNOWN) and its percent-decoded
  `grpc-message`; a reply without `grpc-status`: UNKNOWN ("No status received", as
  grpc's core says);
- an HTTP `:status` other than 200: gRPC's doc/http-grpc-status-mapping.txt (400
  INTERNAL, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 UNIMPLEMENTED, 429, 502, 503
  and 504 UNAVAILABLE, any other UNKNOWN);
- RST_STREAM: REFUSED_STREAM UNAVAILABLE, CANCEL CANCELLED, ENHANCE_YOUR_CALM
  RESOURCE_EXHAUSTED, any other INTERNAL;
- a reply message longer than `max_receive_bytes` (seen in its 5-byte prefix, before it
  is buffered): RESOURCE_EXHAUSTED; the compressed flag or a broken HTTP/2 frame:
  INTERNAL;
- no message, or several, in an OK reply: INTERNAL (grpc-go's "cardinality violation").
  Here alone grpcio differs: it returns None for no message and waits for the deadline
  after a second one (tests/kube/test_grpc_unary.py runs both clients on the same raw
  replies).

After a transport failure (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, INTERNAL), or a
call that gave up before its stream ended (an oversized reply: its frames are still on the
way), the connection is closed and the next call opens a new one; so does a call that
finds the idle connection closed or sent GOAWAY by the server since the last one.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote_to_bytes

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
)
from h2.exceptions import ProtocolError
from h2.settings import SettingCodes, Settings

STATUS_NAMES = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)
"""gRPC status names by their number (doc/statuscodes.md)."""

_HTTP_STATUS = {
    400: "INTERNAL",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "UNIMPLEMENTED",
    429: "UNAVAILABLE",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "UNAVAILABLE",
}
"""gRPC status of an HTTP status other than 200 (doc/http-grpc-status-mapping.txt)."""

_RESET_STATUS = {
    ErrorCodes.REFUSED_STREAM: "UNAVAILABLE",
    ErrorCodes.CANCEL: "CANCELLED",
    ErrorCodes.ENHANCE_YOUR_CALM: "RESOURCE_EXHAUSTED",
}
"""gRPC status of a RST_STREAM error code (PROTOCOL-HTTP2.md, "Errors"); others INTERNAL."""

PREFIX_BYTES = 5
"""A gRPC message's prefix: a compressed flag byte and a big-endian 4-byte length."""

RECV_BYTES = 256 * 1024
"""Bytes asked of one recv(2)."""

TRANSPORT_CODES = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "INTERNAL"})
"""Statuses after which the connection is closed (the server's own answers keep it)."""

_MAX_WINDOW = 2**31 - 1
"""HTTP/2's largest flow-control window, bytes."""


class UnaryError(Exception):
    """A failed call: `code` is a gRPC status name, `detail` what went wrong (the
    server's message or what the connection did), never payload bytes."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}{': ' + detail if detail else ''}")
        self.code = code
        self.detail = detail


def status_name(number: bytes) -> str:
    """The gRPC status name of a `grpc-status` header value; UNKNOWN when it is none."""
    text = number.decode("ascii", "replace")
    if text.isdigit() and int(text) < len(STATUS_NAMES):
        return STATUS_NAMES[int(text)]
    return "UNKNOWN"


def decode_message(value: bytes) -> str:
    """A `grpc-message` header value, percent-decoded UTF-8 (undecodable bytes replaced)."""
    return unquote_to_bytes(value).decode("utf-8", "replace")


def timeout_header(seconds: float) -> bytes:
    """`grpc-timeout` for `seconds`: whole milliseconds rounded up (at most 8 digits,
    then whole seconds)."""
    millis = max(1, math.ceil(seconds * 1000))
    if millis < 10**8:
        return b"%dm" % millis
    return b"%dS" % min(math.ceil(seconds), 10**8 - 1)


@dataclass
class _Reply:
    """What one call has received so far."""

    stream_id: int
    max_bytes: int
    http_status: bytes = b""
    grpc_status: bytes | None = None
    grpc_message: bytes = b""
    buffer: bytearray = field(default_factory=bytearray)
    messages: list[bytes] = field(default_factory=list)
    ended: bool = False

    def headers(self, headers: list[tuple[bytes, bytes]]) -> None:
        for name, value in headers:
            if name == b":status":
                self.http_status = value
            elif name == b"grpc-status":
                self.grpc_status = value
            elif name == b"grpc-message":
                self.grpc_message = value

    def data(self, chunk: bytes) -> None:
        """Take `chunk` of the body, splitting off each complete message; raises
        UnaryError for a compressed message or one over the limit (from its prefix)."""
        self.buffer += chunk
        while len(self.buffer) >= PREFIX_BYTES:
            flag = self.buffer[0]
            length = int.from_bytes(self.buffer[1:PREFIX_BYTES], "big")
            if flag != 0:
                raise UnaryError("INTERNAL", "compressed message without negotiated encoding")
            if length > self.max_bytes:
                raise UnaryError(
                    "RESOURCE_EXHAUSTED",
                    f"Received message larger than max ({length} vs. {self.max_bytes})",
                )
            if len(self.buffer) < PREFIX_BYTES + length:
                return
            self.messages.append(bytes(self.buffer[PREFIX_BYTES : PREFIX_BYTES + length]))
            del self.buffer[: PREFIX_BYTES + length]

    def result(self) -> bytes:
        """The one reply message; raises UnaryError for any other outcome."""
        if self.http_status != b"200":
            code = _HTTP_STATUS.get(int(self.http_status or b"0"), "UNKNOWN")
            status = self.http_status.decode("ascii", "replace")
            raise UnaryError(code, f"Received http2 header with status: {status}")
        if self.grpc_status is None:
            raise UnaryError("UNKNOWN", "No status received")
        code = status_name(self.grpc_status)
        if code != "OK":
            raise UnaryError(code, decode_message(self.grpc_message))
        if self.buffer:
            raise UnaryError("INTERNAL", "reply ended inside a message")
        if len(self.messages) != 1:
            raise UnaryError("INTERNAL", f"{len(self.messages)} messages in a unary reply")
        return self.messages[0]


class _Connection:
    """One HTTP/2 connection over a connected unix socket."""

    def __init__(self, sock: socket.socket, window_bytes: int) -> None:
        self.sock = sock
        self.h2 = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self.h2.local_settings = Settings(  # sent in the connection's first SETTINGS frame
            client=True,
            initial_values={
                SettingCodes.ENABLE_PUSH: 0,
                SettingCodes.INITIAL_WINDOW_SIZE: window_bytes,
            },
        )
        self.h2.initiate_connection()
        if window_bytes > self.h2.inbound_flow_control_window:  # the connection's, 64 KiB
            self.h2.increment_flow_control_window(
                window_bytes - self.h2.inbound_flow_control_window
            )
        self.last_stream_id: int | None = None  # GOAWAY's: streams above it are not served
        self.idle = True  # no call's stream is open (false: frames may still arrive)

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def usable(self) -> bool:
        """Read, without waiting, what the server sent since the last call (SETTINGS, PING,
        GOAWAY, its end of the connection); whether the connection can take a new call.
        A server that closed an idle connection thus costs no failed call."""
        if self.last_stream_id is not None:
            return False
        try:
            self.sock.settimeout(0)
            while data := self.sock.recv(RECV_BYTES):
                for event in self.h2.receive_data(data):
                    if isinstance(event, ConnectionTerminated):
                        return False
                self.flush()
        except BlockingIOError:
            return True  # nothing more to read: open
        except (OSError, ProtocolError):
            return False
        return False  # end of file: the server closed it

    def close(self) -> None:
        self.sock.close()


class UnaryChannel:
    """Unary gRPC calls to the server at a unix socket path over one reused connection."""

    def __init__(self, socket_path: Path, *, max_receive_bytes: int) -> None:
        self.socket_path = socket_path
        self.max_receive_bytes = max_receive_bytes
        self._window = min(_MAX_WINDOW, max(65535, 2 * (max_receive_bytes + PREFIX_BYTES)))
        self._lock = threading.Lock()
        self._connection: _Connection | None = None

    def call(self, method: str, request: bytes, timeout_seconds: float) -> bytes:
        """The reply message of `method` (a path, `/package.Service/Method`) to the
        serialised `request`; raises UnaryError."""
        deadline = time.monotonic() + timeout_seconds
        with self._lock:
            connection = self._connect(deadline)
            try:
                return self._exchange(connection, method, request, deadline)
            except UnaryError as exc:
                if exc.code in TRANSPORT_CODES or not connection.idle:
                    self._drop()
                raise
            except TimeoutError:
                self._drop()
                raise UnaryError("DEADLINE_EXCEEDED", "Deadline Exceeded") from None
            except ProtocolError as exc:
                self._drop()
                raise UnaryError("INTERNAL", f"HTTP/2 protocol error: {exc}") from None
            except OSError as exc:
                self._drop()
                reason = exc.strerror or type(exc).__name__
                raise UnaryError("UNAVAILABLE", f"connection: {reason}") from None

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connect(self, deadline: float) -> _Connection:
        if self._connection is not None:
            if self._connection.usable():
                return self._connection
            self._drop()
        remaining = _remaining(deadline)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(remaining)
            sock.connect(os.fspath(self.socket_path))
            connection = _Connection(sock, self._window)
            connection.flush()
        except TimeoutError:
            sock.close()
            raise UnaryError("DEADLINE_EXCEEDED", "connect: timed out") from None
        except OSError as exc:
            sock.close()
            reason = exc.strerror or type(exc).__name__
            raise UnaryError("UNAVAILABLE", f"connect: {reason}") from None
        self._connection = connection
        return connection

    def _exchange(
        self, connection: _Connection, method: str, request: bytes, deadline: float
    ) -> bytes:
        h2 = connection.h2
        stream_id = h2.get_next_available_stream_id()
        h2.send_headers(
            stream_id,
            [
                (b":method", b"POST"),
                (b":scheme", b"http"),
                (b":path", method.encode("ascii")),
                (b":authority", b"localhost"),
                (b"content-type", b"application/grpc"),
                (b"te", b"trailers"),
                (b"grpc-timeout", timeout_header(_remaining(deadline))),
            ],
        )
        pending: bytes | None = len(request).to_bytes(PREFIX_BYTES, "big") + request  # flag 0
        reply = _Reply(stream_id, self.max_receive_bytes)
        connection.idle = False
        while True:
            pending = _send_body(h2, stream_id, pending)
            connection.sock.settimeout(_remaining(deadline))
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                connection.flush()  # a server that hung up may still have sent the reply
            data = connection.sock.recv(RECV_BYTES)
            if not data:
                raise UnaryError("UNAVAILABLE", "the server closed the connection")
            for event in h2.receive_data(data):
                _handle(connection, reply, event)
            if reply.ended:
                connection.idle = True
                with contextlib.suppress(OSError):  # a server gone since: the next call sees it
                    connection.flush()  # window updates, acknowledgements
                return reply.result()


def _send_body(h2: H2Connection, stream_id: int, pending: bytes | None) -> bytes | None:
    """Send what flow control allows of `pending` (None once the stream is half-closed);
    what is left."""
    if pending is None:
        return None
    size = min(len(pending), h2.local_flow_control_window(stream_id), h2.max_outbound_frame_size)
    if size < len(pending):
        if size > 0:
            h2.send_data(stream_id, pending[:size])
        return pending[size:]
    h2.send_data(stream_id, pending, end_stream=True)
    return None


def _handle(connection: _Connection, reply: _Reply, event: Event) -> None:
    """Apply one h2 event to the call's `reply`."""
    h2 = connection.h2
    if isinstance(event, ConnectionTerminated):
        connection.last_stream_id = event.last_stream_id or 0
        if connection.last_stream_id < reply.stream_id:
            raise UnaryError("UNAVAILABLE", "the server sent GOAWAY")
        return
    if getattr(event, "stream_id", reply.stream_id) != reply.stream_id:
        return  # a stream of an earlier, abandoned call
    if isinstance(event, ResponseReceived):
        reply.headers(list(event.headers or ()))  # trailers-only: grpc-status is here
        if reply.http_status != b"200":
            reply.ended = event.stream_ended is not None
            connection.idle = reply.ended
            reply.result()  # raises: the HTTP status says why, whatever the body holds
    elif isinstance(event, TrailersReceived):
        reply.headers(list(event.headers or ()))
    elif isinstance(event, DataReceived):
        h2.acknowledge_received_data(event.flow_controlled_length or 0, reply.stream_id)
        reply.data(event.data or b"")
    elif isinstance(event, StreamEnded):
        reply.ended = True
    elif isinstance(event, StreamReset):
        connection.idle = True  # the stream is closed
        error = event.error_code
        code = _RESET_STATUS.get(error, "INTERNAL") if isinstance(error, ErrorCodes) else "INTERNAL"
        name = error.name if isinstance(error, ErrorCodes) else "unknown"
        raise UnaryError(code, f"RST_STREAM with error code {name} ({int(error or 0)})")


def _remaining(deadline: float) -> float:
    """Seconds left before `deadline`; DEADLINE_EXCEEDED when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise UnaryError("DEADLINE_EXCEEDED", "Deadline Exceeded")
    return left


__all__ = [
    "STATUS_NAMES",
    "TRANSPORT_CODES",
    "UnaryChannel",
    "UnaryError",
    "decode_message",
    "status_name",
]
