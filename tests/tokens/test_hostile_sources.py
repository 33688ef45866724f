"""Token sources that attack or stall: gzip bombs, drip-feeders, silent servers.

Each hostile server is a raw loopback socket server that stops by itself (a bounded
number of bytes, a bounded time, and a stop event the fixture sets); none of these tests
waits longer than a few seconds.
"""

from __future__ import annotations

import socket
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator

import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.tokens import TokenCollector, UrllibFetch
from gpuwatch.tokens.fetch import MAX_BODY_BYTES, gunzip
from tests.tokens.conftest import PageServer, vllm_page
from tests.tokens.test_collector import collector_for, source

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
Behaviour = Callable[[socket.socket, threading.Event], None]


def _bomb(decoded_bytes: int) -> bytes:
    """A gzip body that decodes to `decoded_bytes` zero bytes (about 1/1000 the size)."""
    encoder = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1024 * 1024)
    parts = [encoder.compress(block) for _ in range(decoded_bytes // len(block))]
    return b"".join([*parts, encoder.flush()])


class HostileServer:
    """Accepts connections on 127.0.0.1 and runs `behaviour(conn, stop)` on each."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.stop = threading.Event()
        self._behaviour = behaviour
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = int(self._listener.getsockname()[1])
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)  # the request head (small, one segment on loopback)
                self._behaviour(conn, self.stop)
            except OSError:
                pass  # the client gave up: that is the point

    def close(self) -> None:
        self.stop.set()
        self._acceptor.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=5)
        self._listener.close()


@pytest.fixture
def hostile() -> Iterator[Callable[[Behaviour], HostileServer]]:
    servers: list[HostileServer] = []

    def make(behaviour: Behaviour) -> HostileServer:
        server = HostileServer(behaviour)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def drip_body(conn: socket.socket, stop: threading.Event) -> None:
    """Headers at once, then one byte of a page every 50 ms, for at most 5 s."""
    page = vllm_page(1.0, 1.0).encode()
    conn.sendall(HEAD + f"Content-Length: {len(page)}\r\n\r\n".encode())
    for byte in page[:100]:
        if stop.wait(0.05):
            return
        conn.sendall(bytes([byte]))


def drip_headers(conn: socket.socket, stop: threading.Event) -> None:
    """The status line and one header byte every 50 ms, for at most 5 s."""
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for byte in b"X-Slow: " + b"a" * 100:
        if stop.wait(0.05):
            return
        conn.sendall(bytes([byte]))


def silent(conn: socket.socket, stop: threading.Event) -> None:
    """Accept, read the request, answer nothing for at most 5 s."""
    del conn
    stop.wait(5.0)


@pytest.mark.parametrize("behaviour", [drip_body, drip_headers, silent])
def test_a_slow_source_is_down_within_its_timeout(
    hostile: Callable[[Behaviour], HostileServer], behaviour: Behaviour
) -> None:
    server = hostile(behaviour)
    collector, _ = collector_for(source(server.url, timeout_seconds=0.5))
    start = time.monotonic()
    reading = collector.scrape("llm")
    elapsed = time.monotonic() - start
    assert not reading.up
    assert reading.error == "timed out"
    assert elapsed < 1.5, f"the scrape took {elapsed:.2f} s with a 0.5 s timeout"


def test_a_drip_feeder_does_not_starve_the_other_sources(
    hostile: Callable[[Behaviour], HostileServer], page_server: PageServer
) -> None:
    slow = hostile(drip_body)
    page_server.serve(vllm_page(5.0, 2.0))
    clock = ManualClock()
    collector = TokenCollector(
        [
            source(slow.url, name="slow", timeout_seconds=3.0),
            source(page_server.url, name="good"),
        ],
        clock,
    )
    start = time.monotonic()
    collector.scrape_due(wait=False)
    while not collector.readings()[1].up and time.monotonic() - start < 2.0:
        time.sleep(0.01)
    good_after = time.monotonic() - start
    assert collector.readings()[1].up
    assert good_after < 1.0, f"the good source waited {good_after:.2f} s behind the slow one"
    assert collector.readings()[0].error is None  # the slow one is still being read
    clock.advance(15.0)
    collector.scrape_due(wait=True)  # the slow source is skipped while in flight
    assert page_server.requests == 2
    slow.stop.set()


def test_a_gzip_bomb_is_refused_without_decoding_it(page_server: PageServer) -> None:
    bomb = _bomb(MAX_BODY_BYTES * 4)  # 64 MiB of zeros in about 64 KB
    page_server.serve(bomb, content_encoding="gzip")
    collector, _ = collector_for(source(page_server.url))
    tracemalloc.start()
    try:
        reading = collector.scrape("llm")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not reading.up
    assert reading.error is not None
    assert "decodes to more than" in reading.error
    assert peak < 2 * MAX_BODY_BYTES + 4 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"


def test_a_small_limit_holds_memory_small(page_server: PageServer) -> None:
    page_server.serve(_bomb(32 * 1024 * 1024), content_encoding="gzip")
    fetch = UrllibFetch(max_body_bytes=256 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="decodes to more than 262144 bytes"):
            fetch(page_server.url, 2.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB for a 256 KiB limit"


def test_gunzip_at_the_limit_and_truncated() -> None:
    body = zlib.compress(b"x" * 1000, wbits=16 + zlib.MAX_WBITS)
    assert gunzip(body, 1000) == b"x" * 1000
    with pytest.raises(ValueError, match="more than 999"):
        gunzip(body, 999)
    with pytest.raises(ValueError, match="truncated"):
        gunzip(body[:-8], 1000)
    with pytest.raises(ValueError, match="invalid gzip"):
        gunzip(b"\x1f\x8b\x08\x00 not gzip", 1000)
