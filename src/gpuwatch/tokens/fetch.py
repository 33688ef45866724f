"""The HTTP transport of one token source: `fetch(url, timeout)` and its default.

`UrllibFetch` is one GET with plain urllib (no proxies), bounded in time (a deadline
over the whole transfer: connect, headers, body; a server that drip-feeds is cut off)
and in size (as received and again after gzip decoding). `describe` turns what a fetch
raises into a short, log-safe reason. No state, no schedule, no logging: those live in
`gpuwatch.tokens.collector`.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import socket
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable

Fetch = Callable[[str, float], bytes]
"""fetch(url, timeout seconds) -> response body; raises OSError (urllib's errors
included), http.client.HTTPException or ValueError when the source fails."""

MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest body accepted, in bytes, as received and again after gzip decoding (a
large vLLM page is well under 1 MiB; a gzip bomb stops here)."""
ACCEPT = "text/plain;version=0.0.4;q=1.0,*/*;q=0.1"
SOURCE_ERRORS = (OSError, http.client.HTTPException, ValueError)
"""What `fetch` and the parser raise when a source fails (anything else is a bug)."""
READ_CHUNK_BYTES = 64 * 1024


class TokenSourceError(ValueError):
    """A source answered, but not with something usable; the message is log-safe."""


class _Deadline:
    """One fetch's deadline (monotonic s) and the sockets it opened, shut when the
    deadline passes so that no read outlives it."""

    def __init__(self, seconds: float) -> None:
        self.expires = time.monotonic() + seconds
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.fired = False

    def remaining(self) -> float:
        """Seconds left (raises TimeoutError when none are)."""
        left = self.expires - time.monotonic()
        if left <= 0.0:
            raise TimeoutError("timed out")
        return left

    def watch(self, sock: socket.socket) -> None:
        with self.lock:
            if self.fired:
                _shut(sock)
            self.sockets.append(sock)

    def fire(self) -> None:
        with self.lock:
            self.fired = True
            for sock in self.sockets:
                _shut(sock)


class _Current(threading.local):
    """The deadline of the fetch running on this thread, if any."""

    deadline: _Deadline | None = None


def _shut(sock: socket.socket) -> None:
    """Wake a thread blocked on `sock` (TLS state untouched: the plain descriptor is shut)."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


_CURRENT = _Current()


class _HTTPConnection(http.client.HTTPConnection):
    def connect(self) -> None:
        deadline = _CURRENT.deadline
        if deadline is not None:
            self.timeout = min(self.timeout or math.inf, deadline.remaining())
        super().connect()
        if deadline is not None:
            deadline.watch(self.sock)


class _HTTPSConnection(http.client.HTTPSConnection):
    def connect(self) -> None:
        deadline = _CURRENT.deadline
        if deadline is not None:
            self.timeout = min(self.timeout or math.inf, deadline.remaining())
        super().connect()  # the TCP connect and the TLS handshake
        if deadline is not None:
            deadline.watch(self.sock)


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HTTPConnection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HTTPSConnection, req)


class UrllibFetch:
    """The default fetch: one GET with urllib, ignoring proxy environment variables,
    bounded in time (the whole transfer) and in size (received and decoded)."""

    def __init__(self, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), _HTTPHandler(), _HTTPSHandler()
        )
        self._max = max_body_bytes

    def __call__(self, url: str, timeout: float) -> bytes:
        """The body of GET `url`, all of it within `timeout` seconds (connect, headers,
        body: a server that drip-feeds is cut off); raises on connection errors, timeouts,
        HTTP errors, truncated bodies and bodies over the size limit (gzip: decoded)."""
        deadline = _CURRENT.deadline = _Deadline(timeout)
        timer = threading.Timer(timeout, deadline.fire)
        timer.daemon = True
        timer.start()
        try:
            body, encoding = self._get(url, timeout, deadline)
        except SOURCE_ERRORS:
            if deadline.fired:
                raise TimeoutError("timed out") from None
            raise
        finally:
            timer.cancel()
            _CURRENT.deadline = None
        if deadline.fired:  # a body without Content-Length cut off at the deadline
            raise TimeoutError("timed out")
        if encoding.strip().lower() == "gzip":
            body = gunzip(body, self._max)
        return body

    def _get(self, url: str, timeout: float, deadline: _Deadline) -> tuple[bytes, str]:
        request = urllib.request.Request(url, headers={"Accept": ACCEPT})  # noqa: S310 - http(s) only (config)
        try:
            with self._opener.open(request, timeout=timeout) as response:
                chunks: list[bytes] = []
                size = 0
                while size <= self._max:
                    deadline.remaining()
                    chunk: bytes = response.read1(READ_CHUNK_BYTES)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                missing = getattr(response, "length", None)  # of Content-Length, not received
                encoding: str = response.headers.get("Content-Encoding", "")
        except urllib.error.HTTPError as exc:
            exc.close()  # it holds the error response open
            raise
        if size > self._max:
            raise TokenSourceError(f"response larger than {self._max} bytes")
        if missing:  # read1 returns a short body where read() would raise IncompleteRead
            raise TokenSourceError(f"truncated response: {missing} bytes missing")
        return b"".join(chunks), encoding


def gunzip(body: bytes, max_bytes: int) -> bytes:
    """`body` gzip-decoded, refusing (TokenSourceError) more than `max_bytes` of output
    without ever holding more than that in memory."""
    decoder = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        decoded = decoder.decompress(body, max_bytes + 1)
    except zlib.error:
        raise TokenSourceError("invalid gzip body") from None
    if len(decoded) > max_bytes:
        raise TokenSourceError(f"gzip body decodes to more than {max_bytes} bytes")
    if not decoder.eof:
        raise TokenSourceError("invalid gzip body: truncated")
    return decoded


def describe(exc: BaseException) -> str:
    """A short, log-safe reason for a failed scrape."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        return describe(reason) if isinstance(reason, BaseException) else str(reason)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
