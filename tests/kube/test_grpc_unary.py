"""The unary gRPC client on h2 against a real `grpc.server` on a unix socket, and against
raw servers (h2's server side, plain sockets) for what a grpc server never sends; on those
raw replies grpcio's own client is the oracle for the status (`AGREEMENT`)."""

from __future__ import annotations

import contextlib
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import StreamEnded
from h2.exceptions import ProtocolError

from gpuwatch.kube.grpc_unary import (
    STATUS_NAMES,
    UnaryChannel,
    UnaryError,
    decode_message,
    status_name,
    timeout_header,
)

MIB = 1024 * 1024
BIG = 8 * MIB  # over every default HTTP/2 window (64 KiB) and gRPC's 4 MB limit
MESSAGE = "naïve 100% sûr: a%20b ✓ /\\ 'x'"  # non-ASCII and '%' (grpc percent-encodes them)


def _echo(request: bytes, _context: grpc.ServicerContext) -> bytes:
    return request


def _big(request: bytes, _context: grpc.ServicerContext) -> bytes:
    size = int(request.decode("ascii"))
    return bytes(i % 251 for i in range(251)) * (size // 251) + b"x" * (size % 251)


def _abort(_request: bytes, context: grpc.ServicerContext) -> bytes:
    context.abort(grpc.StatusCode.FAILED_PRECONDITION, MESSAGE)
    raise AssertionError("abort returns no value")


def _sleep(_request: bytes, _context: grpc.ServicerContext) -> bytes:
    time.sleep(3)
    return b"late"


def _handler(fn: Callable[[bytes, grpc.ServicerContext], bytes]) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(
        fn, request_deserializer=None, response_serializer=None
    )


def start_grpc_server(path: Path) -> grpc.Server:
    """A real grpc server of `/t.T/{Echo,Big,Abort,Sleep}` on the unix socket `path`."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handlers = {
        "Echo": _handler(_echo),
        "Big": _handler(_big),
        "Abort": _handler(_abort),
        "Sleep": _handler(_sleep),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.T", handlers),))
    server.add_insecure_port(f"unix:{path}")
    server.start()
    return server


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # unix socket paths must stay under 108 bytes: a short temp folder, not tmp_path
    with tempfile.TemporaryDirectory(prefix="gw-") as folder:
        yield Path(folder)


@pytest.fixture
def grpc_sock(sock_dir: Path) -> Iterator[Path]:
    path = sock_dir / "grpc.sock"
    server = start_grpc_server(path)
    yield path
    server.stop(None)


class CountingProxy:
    """Forwards each connection on `path` to the unix socket `upstream`; counts them."""

    def __init__(self, path: Path, upstream: Path) -> None:
        self.upstream = upstream
        self.accepted = 0
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(str(self.upstream))
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(src, dst), daemon=True).start()

    def close(self) -> None:
        self._listener.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        src.close()
        dst.close()


Respond = Callable[[H2Connection, int], bool]
"""A raw server's answer to the request on a stream; False closes the connection."""


class RawH2Server:
    """An HTTP/2 server (h2's server side) on a unix socket, one connection at a time."""

    def __init__(self, path: Path, respond: Respond, calls_per_connection: int = 0) -> None:
        """`calls_per_connection`: hang up after that many replies (0: never)."""
        self.respond = respond
        self.calls_per_connection = calls_per_connection
        self.accepted = 0
        self.hung_up = threading.Semaphore(0)  # released as each connection closes
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            with client, contextlib.suppress(OSError, ProtocolError):
                self._connection(client)  # the client hung up, or broke HTTP/2 after GOAWAY
            self.hung_up.release()

    def _connection(self, client: socket.socket) -> None:
        conn = H2Connection(H2Configuration(client_side=False, header_encoding=None))
        conn.initiate_connection()
        client.sendall(conn.data_to_send())
        replies = 0
        while data := client.recv(65536):
            for event in conn.receive_data(data):
                if isinstance(event, StreamEnded):
                    if not self.respond(conn, event.stream_id):
                        return
                    replies += 1
            client.sendall(conn.data_to_send())
            if replies == self.calls_per_connection > 0:
                return

    def close(self) -> None:
        self._listener.close()


def _grpc_frame(message: bytes, flag: int = 0) -> bytes:
    return bytes([flag]) + len(message).to_bytes(4, "big") + message


def _reply(messages: list[bytes], trailers: list[tuple[bytes, bytes]], flag: int = 0) -> Respond:
    def respond(conn: H2Connection, stream_id: int) -> bool:
        conn.send_headers(stream_id, [(b":status", b"200"), (b"content-type", b"application/grpc")])
        for message in messages:
            conn.send_data(stream_id, _grpc_frame(message, flag))
        if trailers:
            conn.send_headers(stream_id, trailers, end_stream=True)
        else:
            conn.end_stream(stream_id)
        return True

    return respond


def _raw_call(sock_dir: Path, respond: Respond, timeout: float = 5) -> bytes:
    server = RawH2Server(sock_dir / "raw.sock", respond)
    channel = UnaryChannel(sock_dir / "raw.sock", max_receive_bytes=MIB)
    try:
        return channel.call("/t.T/Echo", b"hi", timeout)
    finally:
        channel.close()
        server.close()


def test_status_names_and_header_values() -> None:
    assert STATUS_NAMES[14] == "UNAVAILABLE"
    assert len(STATUS_NAMES) == 17
    assert status_name(b"0") == "OK"
    assert status_name(b"16") == "UNAUTHENTICATED"
    assert status_name(b"17") == "UNKNOWN"
    assert status_name(b"-1") == "UNKNOWN"
    assert status_name(b"x") == "UNKNOWN"
    assert decode_message(b"100%25 s%C3%BBr %E2%9C%93") == "100% sûr ✓"
    assert decode_message(b"bad %FF") == "bad \ufffd"
    assert timeout_header(5.0) == b"5000m"
    assert timeout_header(0.0001) == b"1m"
    assert timeout_header(10**6) == b"1000000S"


def test_echo_and_an_empty_request(grpc_sock: Path) -> None:
    channel = UnaryChannel(grpc_sock, max_receive_bytes=MIB)
    try:
        assert channel.call("/t.T/Echo", b"\x00hello\xff", 5) == b"\x00hello\xff"
        assert channel.call("/t.T/Echo", b"", 5) == b""
    finally:
        channel.close()


def test_unknown_method_is_a_trailers_only_unimplemented(grpc_sock: Path) -> None:
    channel = UnaryChannel(grpc_sock, max_receive_bytes=MIB)
    try:
        with pytest.raises(UnaryError) as caught:
            channel.call("/t.T/Nope", b"", 5)
        assert caught.value.code == "UNIMPLEMENTED"
        assert caught.value.detail == "Method not found!"
    finally:
        channel.close()


def test_abort_message_is_percent_decoded(grpc_sock: Path) -> None:
    channel = UnaryChannel(grpc_sock, max_receive_bytes=MIB)
    try:
        with pytest.raises(UnaryError) as caught:
            channel.call("/t.T/Abort", b"", 5)
        assert caught.value.code == "FAILED_PRECONDITION"
        assert caught.value.detail == MESSAGE
    finally:
        channel.close()


def test_a_reply_over_every_default_window_arrives_intact(grpc_sock: Path) -> None:
    channel = UnaryChannel(grpc_sock, max_receive_bytes=16 * MIB)
    try:
        expected = _big(str(BIG).encode(), None)
        for _ in range(5):  # 40 MiB on one connection: its window must be given back
            started = time.monotonic()
            reply = channel.call("/t.T/Big", str(BIG).encode(), 30)
            elapsed = time.monotonic() - started
            assert reply == expected
            assert elapsed < 10, elapsed  # about 0.1 s here: the windows never stall it
    finally:
        channel.close()


def test_a_reply_over_the_limit_is_resource_exhausted_from_its_prefix(grpc_sock: Path) -> None:
    channel = UnaryChannel(grpc_sock, max_receive_bytes=MIB)
    try:
        with pytest.raises(UnaryError) as caught:
            channel.call("/t.T/Big", str(BIG).encode(), 10)
        assert caught.value.code == "RESOURCE_EXHAUSTED"
        assert caught.value.detail == f"Received message larger than max ({BIG} vs. {MIB})"
        assert channel.call("/t.T/Echo", b"after", 5) == b"after"  # a new connection
    finally:
        channel.close()


def test_one_connection_serves_every_call(sock_dir: Path, grpc_sock: Path) -> None:
    proxy = CountingProxy(sock_dir / "proxy.sock", grpc_sock)
    channel = UnaryChannel(sock_dir / "proxy.sock", max_receive_bytes=MIB)
    try:
        for i in range(20):
            assert channel.call("/t.T/Echo", b"%d" % i, 5) == b"%d" % i
        with pytest.raises(UnaryError):
            channel.call("/t.T/Abort", b"", 5)  # the server's answer keeps the connection
        threads = [
            threading.Thread(target=channel.call, args=("/t.T/Echo", b"t", 5)) for _ in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert proxy.accepted == 1
        channel.close()
        assert channel.call("/t.T/Echo", b"x", 5) == b"x"
        assert proxy.accepted == 2
    finally:
        channel.close()
        proxy.close()


def test_a_server_that_never_answers_is_deadline_exceeded(sock_dir: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_dir / "mute.sock"))
    listener.listen()  # connections queue, nothing reads them
    channel = UnaryChannel(sock_dir / "mute.sock", max_receive_bytes=MIB)
    try:
        started = time.monotonic()
        with pytest.raises(UnaryError) as caught:
            channel.call("/t.T/Echo", b"", 0.5)
        elapsed = time.monotonic() - started
        assert caught.value.code == "DEADLINE_EXCEEDED"
        assert 0.45 <= elapsed < 2.0, elapsed
    finally:
        channel.close()
        listener.close()


def test_a_slow_handler_is_deadline_exceeded_within_the_timeout(grpc_sock: Path) -> None:
    channel = UnaryChannel(grpc_sock, max_receive_bytes=MIB)
    try:
        started = time.monotonic()
        with pytest.raises(UnaryError) as caught:
            channel.call("/t.T/Sleep", b"", 0.5)
        assert caught.value.code == "DEADLINE_EXCEEDED"
        assert time.monotonic() - started < 2.0
        assert channel.call("/t.T/Echo", b"next", 5) == b"next"
    finally:
        channel.close()


def test_no_socket_and_refused_are_unavailable(sock_dir: Path) -> None:
    channel = UnaryChannel(sock_dir / "none.sock", max_receive_bytes=MIB)
    with pytest.raises(UnaryError) as caught:
        channel.call("/t.T/Echo", b"", 5)
    assert (caught.value.code, caught.value.detail) == (
        "UNAVAILABLE",
        "connect: No such file or directory",
    )
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_dir / "none.sock"))
    listener.close()  # the file stays, nobody listens
    with pytest.raises(UnaryError) as caught:
        channel.call("/t.T/Echo", b"", 5)
    assert (caught.value.code, caught.value.detail) == (
        "UNAVAILABLE",
        "connect: Connection refused",
    )


def test_a_connection_closed_mid_call_is_unavailable_then_a_new_one_works(
    sock_dir: Path,
) -> None:
    path = sock_dir / "k.sock"
    closing = RawH2Server(path, lambda _conn, _stream: False)  # reads the request, hangs up
    channel = UnaryChannel(path, max_receive_bytes=MIB)
    try:
        with pytest.raises(UnaryError) as caught:
            channel.call("/t.T/Echo", b"secret-payload", 5)
        assert caught.value.code == "UNAVAILABLE"
        assert "secret" not in str(caught.value)
        closing.close()
        path.unlink()
        server = start_grpc_server(path)
        try:
            assert channel.call("/t.T/Echo", b"back", 5) == b"back"
        finally:
            server.stop(None)
    finally:
        channel.close()


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (b"503", "UNAVAILABLE"),
        (b"404", "UNIMPLEMENTED"),
        (b"401", "UNAUTHENTICATED"),
        (b"500", "UNKNOWN"),
    ],
)
def test_http_status_maps_to_grpc(sock_dir: Path, status: bytes, code: str) -> None:
    with pytest.raises(UnaryError) as caught:
        _raw_call(sock_dir, _http(status))
    assert caught.value.code == code
    assert caught.value.detail == f"Received http2 header with status: {status.decode()}"


def test_compressed_flag_is_internal(sock_dir: Path) -> None:
    with pytest.raises(UnaryError) as caught:
        _raw_call(sock_dir, _reply([b"zz"], [(b"grpc-status", b"0")], flag=1))
    assert caught.value.code == "INTERNAL"


@pytest.mark.parametrize(
    ("messages", "trailers", "code"),
    [
        ([b"ok"], [(b"grpc-status", b"0")], "OK"),
        ([b"ok"], [], "UNKNOWN"),  # no grpc-status: grpc's core says "No status received"
        ([], [(b"grpc-status", b"0")], "INTERNAL"),  # a unary reply without its message
        ([b"a", b"b"], [(b"grpc-status", b"0")], "INTERNAL"),  # two messages
        ([b"a"], [(b"grpc-status", b"99"), (b"grpc-message", b"odd%20one")], "UNKNOWN"),
        ([], [(b"grpc-status", b"8"), (b"grpc-message", b"slow%20down")], "RESOURCE_EXHAUSTED"),
    ],
)
def test_reply_shapes(
    sock_dir: Path, messages: list[bytes], trailers: list[tuple[bytes, bytes]], code: str
) -> None:
    if code == "OK":
        assert _raw_call(sock_dir, _reply(messages, trailers)) == b"ok"
        return
    with pytest.raises(UnaryError) as caught:
        _raw_call(sock_dir, _reply(messages, trailers))
    assert caught.value.code == code
    if any(name == b"grpc-message" for name, _ in trailers):
        assert " " in caught.value.detail
        assert "%" not in caught.value.detail


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ErrorCodes.REFUSED_STREAM, "UNAVAILABLE"),
        (ErrorCodes.CANCEL, "CANCELLED"),
        (ErrorCodes.ENHANCE_YOUR_CALM, "RESOURCE_EXHAUSTED"),
        (ErrorCodes.PROTOCOL_ERROR, "INTERNAL"),
        (ErrorCodes.INTERNAL_ERROR, "INTERNAL"),
    ],
)
def test_rst_stream_maps_to_grpc(sock_dir: Path, error: ErrorCodes, code: str) -> None:
    with pytest.raises(UnaryError) as caught:
        _raw_call(sock_dir, _reset(error))
    assert caught.value.code == code
    assert caught.value.detail == f"RST_STREAM with error code {error.name} ({int(error)})"


def test_goaway_before_the_reply_is_unavailable(sock_dir: Path) -> None:
    with pytest.raises(UnaryError) as caught:
        _raw_call(sock_dir, _goaway)
    assert caught.value.code == "UNAVAILABLE"


def _http(status: bytes) -> Respond:
    def respond(conn: H2Connection, stream_id: int) -> bool:
        conn.send_headers(stream_id, [(b":status", status)])
        conn.send_data(stream_id, b"<html>busy</html>", end_stream=True)
        return True

    return respond


def _reset(error: ErrorCodes) -> Respond:
    def respond(conn: H2Connection, stream_id: int) -> bool:
        conn.reset_stream(stream_id, error)
        return True

    return respond


def _goaway(conn: H2Connection, _stream_id: int) -> bool:
    conn.close_connection(last_stream_id=0)
    return True


AGREEMENT: dict[str, Respond] = {
    "ok": _reply([b"ok"], [(b"grpc-status", b"0")]),
    "no grpc-status": _reply([b"ok"], []),
    "compressed": _reply([b"zz"], [(b"grpc-status", b"0")], flag=1),
    "status 99": _reply([b"a"], [(b"grpc-status", b"99"), (b"grpc-message", b"odd%20one")]),
    "status 8": _reply([], [(b"grpc-status", b"8"), (b"grpc-message", b"100%25 %E2%9C%93")]),
    "http 503": _http(b"503"),
    "http 404": _http(b"404"),
    "http 500": _http(b"500"),
    "rst refused": _reset(ErrorCodes.REFUSED_STREAM),
    "rst cancel": _reset(ErrorCodes.CANCEL),
    "rst calm": _reset(ErrorCodes.ENHANCE_YOUR_CALM),
    "rst protocol": _reset(ErrorCodes.PROTOCOL_ERROR),
    "goaway": _goaway,
    "hang up": lambda _conn, _stream: False,
}
"""Raw replies on which our client must say what grpcio's says (its status code; the
detail too where it is the server's)."""


def _grpcio_answer(path: Path) -> tuple[str, str]:
    channel = grpc.insecure_channel(f"unix:{path}", options=[("grpc.enable_retries", 0)])
    call = channel.unary_unary(
        "/t.T/Echo", request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    try:
        return "OK", repr(call(b"hi", timeout=5))
    except grpc.RpcError as exc:
        return exc.code().name, exc.details() or ""
    finally:
        channel.close()


@pytest.mark.parametrize("case", sorted(AGREEMENT))
def test_grpcio_says_the_same_on_raw_replies(sock_dir: Path, case: str) -> None:
    respond = AGREEMENT[case]
    path = sock_dir / "raw.sock"
    server = RawH2Server(path, respond)
    try:
        expected = _grpcio_answer(path)
    finally:
        server.close()
    path.unlink()
    try:
        got = "OK", repr(_raw_call(sock_dir, respond))
    except UnaryError as exc:
        got = exc.code, exc.detail
    assert got[0] == expected[0]
    if case.startswith(("ok", "status", "http")):
        assert got[1] == expected[1]


@pytest.mark.parametrize("goaway", [True, False])
def test_a_connection_the_server_closed_while_idle_costs_no_failed_call(
    sock_dir: Path, goaway: bool
) -> None:
    ok = _reply([b"ok"], [(b"grpc-status", b"0")])

    def respond_then_hang_up(conn: H2Connection, stream_id: int) -> bool:
        ok(conn, stream_id)
        if goaway:
            conn.close_connection(last_stream_id=stream_id)
        return True  # the server thread sends the reply (and GOAWAY), keeps the socket

    path = sock_dir / "raw.sock"
    server = RawH2Server(path, respond_then_hang_up, calls_per_connection=1)
    channel = UnaryChannel(path, max_receive_bytes=MIB)
    try:
        for _ in range(3):
            assert channel.call("/t.T/Echo", b"hi", 5) == b"ok"
            assert server.hung_up.acquire(timeout=5)  # then the connection is idle, closed
        assert server.accepted == 3
    finally:
        channel.close()
        server.close()
