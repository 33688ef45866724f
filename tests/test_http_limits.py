"""The HTTP server under hostile clients: floods of silent sockets, drip-feeders, resets,
HEAD, IPv6 listen hosts. Every socket is on loopback, bounded in count and closed by the
test; each wait is bounded in time."""

from __future__ import annotations

import contextlib
import http.client
import logging
import socket
import ssl
import struct
import time
from collections.abc import Iterator

import pytest

from gpuwatch.export.server import MetricsServer, TlsFiles
from tests.test_http_server import (
    Readiness,
    _fetch,
    _registry,
    _stop,
    _trusting,
    tls_files,  # noqa: F401 - the module-scoped fixture
)

FLOOD = 300  # silent sockets; well under the 1024 descriptors of a default ulimit
CAP = 16


@pytest.fixture
def small_server() -> Iterator[MetricsServer]:
    """A server with a 16-connection cap and a 1 s request deadline."""
    server = MetricsServer(
        "127.0.0.1", 0, _registry(), Readiness(), max_connections=CAP, request_seconds=1.0
    )
    server.start()
    yield server
    _stop(server)


def _silent_sockets(port: int, count: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5.0)
        sockets.append(sock)
    return sockets


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """True when the server closes `sock` (EOF or reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_flood_of_silent_sockets_does_not_stop_metrics(small_server: MetricsServer) -> None:
    flood = _silent_sockets(small_server.port, FLOOD)
    try:
        start = time.monotonic()
        reply = _fetch(f"http://127.0.0.1:{small_server.port}/metrics", timeout=2.0)
        health = _fetch(f"http://127.0.0.1:{small_server.port}/healthz", timeout=2.0)
        elapsed = time.monotonic() - start
        assert reply.status == 200
        assert b"gpuwatch_test_value" in reply.body
        assert health.status == 200
        assert elapsed < 1.0, f"/metrics and /healthz took {elapsed:.2f} s under a flood"
        assert small_server._httpd.open_connections() <= CAP
        assert small_server._httpd.evicted_total > 0  # the rest ran out their deadline
    finally:
        for sock in flood:
            sock.close()


def test_a_silent_connection_is_closed_at_the_deadline(small_server: MetricsServer) -> None:
    with socket.create_connection(("127.0.0.1", small_server.port), timeout=5.0) as sock:
        start = time.monotonic()
        assert _closed_by_server(sock, within=4.0)
        assert 0.8 <= time.monotonic() - start < 3.0


def test_a_drip_feeder_is_closed_at_the_deadline(small_server: MetricsServer) -> None:
    """One byte every 0.1 s never completes a request head: the deadline is for the whole
    head, not for each byte."""
    with socket.create_connection(("127.0.0.1", small_server.port), timeout=5.0) as sock:
        start = time.monotonic()
        head = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 100
        closed = False
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(0.1)
            if time.monotonic() - start > 4.0:
                break
        assert closed or _closed_by_server(sock, within=1.0)
        assert time.monotonic() - start < 3.0


def test_a_kept_alive_connection_serves_many_requests(small_server: MetricsServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", small_server.port, timeout=5.0)
    try:
        for _ in range(5):
            connection.request("GET", "/metrics")
            response = connection.getresponse()
            assert response.status == 200
            assert b"gpuwatch_test_value" in response.read()
    finally:
        connection.close()


def test_head_answers_headers_without_a_body(small_server: MetricsServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", small_server.port, timeout=5.0)
    try:
        connection.request("GET", "/metrics")
        get = connection.getresponse()
        body = get.read()
        connection.request("HEAD", "/metrics")
        head = connection.getresponse()
        assert head.status == 200
        assert head.read() == b""
        assert head.headers["Content-Length"] == str(len(body))
        assert head.headers["Content-Type"] == get.headers["Content-Type"]
        connection.request("HEAD", "/healthz")  # the connection is still in step
        assert connection.getresponse().status == 200
    finally:
        connection.close()


def test_a_client_that_resets_is_not_a_traceback(
    small_server: MetricsServer,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(5):
        sock = socket.create_connection(("127.0.0.1", small_server.port), timeout=5.0)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # half a head, then RST
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    time.sleep(0.3)
    assert _fetch(f"http://127.0.0.1:{small_server.port}/healthz").status == 200
    assert "Traceback" not in capsys.readouterr().err
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]


def test_tls_flood_of_silent_sockets_does_not_stop_metrics(tls_files: TlsFiles) -> None:  # noqa: F811
    server = MetricsServer(
        "127.0.0.1", 0, _registry(), Readiness(), tls=tls_files, max_connections=CAP
    )
    server.start()
    flood: list[socket.socket] = []
    try:
        flood = _silent_sockets(server.port, 100)
        context = _trusting(tls_files)
        reply = _fetch(f"https://localhost:{server.port}/metrics", context=context, timeout=2.0)
        assert reply.status == 200
        assert server._httpd.open_connections() <= CAP
    finally:
        for sock in flood:
            sock.close()
        _stop(server)


def _ipv6_loopback() -> bool:
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET6) as sock:
        sock.bind(("::1", 0))
        return True
    return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
@pytest.mark.parametrize("host", ["::1", "[::1]", "::"])
def test_ipv6_listen_hosts(host: str) -> None:
    server = MetricsServer(host, 0, _registry(), Readiness())
    server.start()
    try:
        reply = _fetch(f"http://[::1]:{server.port}/metrics")
        assert reply.status == 200
        assert b"gpuwatch_test_value" in reply.body
    finally:
        server.stop()


def test_tls_silent_client_is_closed_at_the_deadline(tls_files: TlsFiles) -> None:  # noqa: F811
    server = MetricsServer(
        "127.0.0.1", 0, _registry(), Readiness(), tls=tls_files, request_seconds=1.0
    )
    server.start()
    try:
        context = _trusting(tls_files)
        with (
            socket.create_connection(("127.0.0.1", server.port), timeout=5.0) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as sock,
        ):
            start = time.monotonic()
            with contextlib.suppress(ssl.SSLError, ConnectionResetError):
                sock.settimeout(4.0)
                assert sock.recv(1) == b""
            assert time.monotonic() - start < 3.0
    finally:
        _stop(server)
