"""One deadline for every HTTP request of a run, however the server answers.

A socket timeout bounds each read, not a request: a server that drip-feeds one byte a
second, or holds each of many requests until just before the timeout, keeps a run going
without end. `SocketWatch` holds the sockets of the requests in flight and, at the
deadline, shuts them down: a blocked connect-free read, a slow header or a slow body
then ends at once, in every thread. `watched_opener` is a urllib opener (proxies and
redirects as usual) whose connections register with a watch.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.request
import weakref
from typing import Any


class SocketWatch:
    """The sockets of requests in flight, shut down at `deadline` (time.monotonic())."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.expired = False
        self._lock = threading.Lock()
        self._open: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._timer = threading.Timer(max(deadline - time.monotonic(), 0.0), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        """Seconds left before the deadline (<= 0: past it)."""
        return 0.0 if self.expired else self.deadline - time.monotonic()

    def add(self, sock: socket.socket) -> None:
        """Watch `sock` (shut at once when the deadline has passed)."""
        with self._lock:
            if not self.expired:
                self._open.add(sock)
                return
        _shut(sock)

    def close(self) -> None:
        """Stop the timer: no request of this watch is in flight any more."""
        self._timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            found = list(self._open)
            self._open.clear()
        for sock in found:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)


def watched_opener(
    watch: SocketWatch, context: ssl.SSLContext | None
) -> urllib.request.OpenerDirector:
    """A urllib opener whose http and https connections register with `watch`."""

    class Http(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            watch.add(self.sock)

    class Https(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            watch.add(self.sock)

    class HttpHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(Http, req)

    class HttpsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(Https, req, context=context)

    return urllib.request.build_opener(HttpHandler(), HttpsHandler(context=context))
