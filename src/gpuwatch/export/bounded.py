"""A threaded HTTP server whose connections are bounded in number and in idle time.

`BoundedHTTPServer` serves each connection on its own daemon thread, like the standard
library's `ThreadingHTTPServer`, with three limits so that a flood costs the flooder:

* at most `max_connections` open connections (threads, file descriptors); when a new
  one arrives at the cap, the connection that has waited longest for a request is closed
  to make room (a silent or drip-feeding socket, never one being answered);
* a connection has `request_seconds` in all, from its accept or its previous reply, to
  deliver a whole request head: a socket that sends nothing, or a byte now and then,
  is closed when that time is up (`DeadlineHandler`);
* a client that resets or stops reading costs one DEBUG line, not a traceback.

Host names containing ':' are IPv6 (`::` also accepts IPv4 where the system allows).
This module knows nothing of /metrics; `export/server.py` adds the endpoints.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import socketserver
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
"""Open connections at most (20 concurrent scrapers fit with room to spare)."""
MAX_ACTIVE_REQUESTS = 4
"""Requests whose body is computed at once (`export/server.py`); the other connections
wait their turn on a semaphore, holding no GIL."""
REQUEST_SECONDS = 10.0
"""Seconds a connection has to deliver a whole request head, from accept or last reply."""
WRITE_SECONDS = 10.0
"""Seconds a reply may take to send (a client that stops reading is dropped)."""


HANDSHAKE_SECONDS = 5.0
"""Seconds a TLS client has to complete its handshake."""


class _Slot:
    """One open connection; `waiting_since` is the monotonic time (s) it began waiting
    for a request, None while a request is being answered. `sock` is the socket to shut
    to evict it (the TLS socket once wrapped: wrapping detaches the plain one)."""

    __slots__ = ("sock", "waiting_since")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.waiting_since: float | None = now


class BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most `max_connections` of them (see the module doc)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # 20 scrapers connecting at once must not overflow the backlog
    tls_context: ssl.SSLContext | None = None

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[DeadlineHandler],
        *,
        max_connections: int = MAX_CONNECTIONS,
        request_seconds: float = REQUEST_SECONDS,
    ) -> None:
        host = address[0].strip("[]")
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.max_connections = max_connections
        self.request_seconds = request_seconds
        self.evicted_total = 0
        self._slots: dict[int, _Slot] = {}
        self._slots_lock = threading.Lock()
        self._handler = handler
        super().__init__((host, address[1]), handler)

    def server_bind(self) -> None:
        """Bind without the reverse DNS lookup of `HTTPServer.server_bind`."""
        if self.address_family == socket.AF_INET6 and self.server_address[0] == "::":
            try:  # dual stack where the system allows it, like `python -m http.server`
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            except OSError:
                log.debug("IPv6 listener: IPv4 clients not accepted (IPV6_V6ONLY stays set)")
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def open_connections(self) -> int:
        """Connections open now."""
        with self._slots_lock:
            return len(self._slots)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Admit the connection, closing the longest-waiting one first when at the cap."""
        now = time.monotonic()
        with self._slots_lock:
            if len(self._slots) >= self.max_connections:
                waiting = [i for i in self._slots.items() if i[1].waiting_since is not None]
                if not waiting:  # every slot is answering a request: refuse the newcomer
                    self.shutdown_request(request)
                    return
                key, victim = min(waiting, key=lambda item: item[1].waiting_since or 0.0)
                del self._slots[key]
                self.evicted_total += 1
                _shut(victim.sock)
            self._slots[id(request)] = _Slot(request, now)
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._slots_lock:
                self._slots.pop(id(request), None)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection; with TLS, handshake here, in the connection's thread.

        Wrapping the listening socket would run the handshake inside `accept()` on the
        serving thread, so one client that connects and sends nothing would block every
        scrape.
        """
        if self.tls_context is None:
            self._handler(request, client_address, self)
            return
        tls_socket = self.tls_context.wrap_socket(
            request, server_side=True, do_handshake_on_connect=False
        )
        try:
            with self._slots_lock:
                slot = self._slots.get(id(request))
                if slot is not None:
                    slot.sock = tls_socket
            tls_socket.settimeout(min(HANDSHAKE_SECONDS, self.request_seconds))
            try:
                tls_socket.do_handshake()
            except OSError as exc:  # ssl.SSLError is an OSError
                log.debug("TLS handshake with %s failed: %s", client_address, exc)
                return
            self._handler(tls_socket, client_address, self, raw=request)
        finally:
            tls_socket.close()

    def mark(self, request: Any, *, waiting: bool) -> None:
        """Record whether the connection (its plain socket `request`) waits for a request
        or is answering one."""
        with self._slots_lock:
            slot = self._slots.get(id(request))
            if slot is not None:
                slot.waiting_since = time.monotonic() if waiting else None

    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002
        """A client that resets or times out is one DEBUG line; a bug keeps its traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            log.debug("connection from %s ended: %s", client_address, exc)
        else:
            log.error("error serving %s", client_address, exc_info=exc)


def _shut(sock: socket.socket) -> None:
    """Wake the thread blocked on `sock` (its recv returns end of stream); on a TLS
    socket the descriptor is shut without touching the TLS state its thread uses."""
    with contextlib.suppress(OSError):  # already closed by its peer or its thread
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _DeadlineReader(io.RawIOBase):
    """Reads a socket, each recv given only what is left of the handler's deadline."""

    def __init__(self, handler: DeadlineHandler) -> None:
        self._handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._handler.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("request deadline passed")
        sock = self._handler.connection
        sock.settimeout(remaining)
        return int(sock.recv_into(buffer))


class DeadlineHandler(BaseHTTPRequestHandler):
    """Reads each request head under the server's `request_seconds` deadline.

    Subclasses call `answering()` once the head is parsed (in `do_GET`), before replying.
    """

    server: BoundedHTTPServer
    deadline: float = 0.0

    def __init__(
        self, request: Any, client_address: Any, server: BoundedHTTPServer, raw: Any = None
    ) -> None:
        self._raw = request if raw is None else raw  # the plain socket, the server's key
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the plain makefile() reader, replaced by one with a deadline
        self.rfile = io.BufferedReader(_DeadlineReader(self))

    def handle_one_request(self) -> None:
        self.server.mark(self._raw, waiting=True)
        self.deadline = time.monotonic() + self.server.request_seconds
        super().handle_one_request()

    def answering(self) -> None:
        """The head is in: this connection is no longer evictable; replies get
        `WRITE_SECONDS` to be sent."""
        self.server.mark(self._raw, waiting=False)
        self.connection.settimeout(WRITE_SECONDS)
