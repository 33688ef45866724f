"""The HTTP endpoint: `/metrics`, `/status.json`, `/healthz`, `/readyz` (GET and HEAD),
optional TLS and basic auth, on the bounded server of `export/bounded.py`.

A scrape renders the registry (which renders the latest snapshot) and `/status.json`
serializes the latest snapshot (`export/status_json.py`); nothing here touches NVML.
`/healthz` and `/readyz` are exempt from basic auth so kubelet probes work without
credentials; they reveal nothing but liveness.
"""

from __future__ import annotations

import base64
import gzip
import hmac
import ipaddress
import logging
import re
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from gpuwatch.export.bounded import (
    MAX_ACTIVE_REQUESTS,
    MAX_CONNECTIONS,
    REQUEST_SECONDS,
    BoundedHTTPServer,
    DeadlineHandler,
)
from gpuwatch.export.status_json import STATUS_PATH

log = logging.getLogger(__name__)

Readiness = Callable[[], tuple[bool, str]]
StatusBody = Callable[[bool], bytes | None]
"""The status document as JSON bytes, given whether the client is on this host; None
before the first sample."""


@dataclass(frozen=True, slots=True)
class BasicAuth:
    """Expected credentials; the password is read from a file, never from config text."""

    username: str
    password: str = ""

    def __repr__(self) -> str:  # never print the password
        return f"BasicAuth(username={self.username!r}, password=<redacted>)"

    @classmethod
    def from_file(cls, username: str, password_file: Path) -> BasicAuth:
        """Read the password from `password_file` (trailing newline stripped)."""
        return cls(username, password_file.read_text(encoding="utf-8").rstrip("\r\n"))

    def accepts(self, header: str | None) -> bool:
        """True when an `Authorization: Basic ...` header carries these credentials (the
        scheme is case-insensitive, RFC 9110 section 11.1)."""
        scheme, _, token = (header or "").strip(" \t").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            decoded = base64.b64decode(token.strip(" "), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return False
        user, sep, password = decoded.partition(":")
        ok_user = hmac.compare_digest(user.encode(), self.username.encode())
        ok_password = hmac.compare_digest(password.encode(), self.password.encode())
        return bool(sep) and ok_user and ok_password


_QVALUE = re.compile(r"(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)")


def accepts_gzip(header: str | None) -> bool:
    """Whether a response may be gzip-compressed for this `Accept-Encoding` (RFC 9110
    section 12.5.3): codings are case-insensitive, `x-gzip` is gzip, `*` stands for any
    coding not named, `q=0` means "not acceptable". gzip is chosen when its weight is
    above 0 and not below identity's (which is acceptable unless excluded). No header,
    or an empty one, asks for no coding. A malformed entry is ignored."""
    if not header:
        return False
    weights: dict[str, float] = {}
    for item in header.split(","):
        coding, *params = (part.strip(" \t") for part in item.split(";"))
        coding = coding.lower()
        if not coding:
            continue
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip(" \t").lower() == "q":
                value = value.strip(" \t")
                weight = float(value) if _QVALUE.fullmatch(value) else -1.0
        if weight < 0:
            continue
        coding = "gzip" if coding == "x-gzip" else coding
        weights[coding] = max(weight, weights.get(coding, 0.0))
    star = weights.get("*")
    gzip_weight = weights.get("gzip", star if star is not None else 0.0)
    identity_weight = weights.get("identity", star if star is not None else 1.0)
    return gzip_weight > 0 and gzip_weight >= identity_weight


class CachedExposition:
    """Renders the registry once per snapshot and format, then serves the same bytes.

    `version()` names the data behind the registry (the agent passes the newest
    snapshot); while it is unchanged every scrape gets the cached body, a dictionary
    lookup. Renders are single-flight: one at a time, and a scrape that arrives while
    the body it needs is being rendered waits for it (on a lock, holding no GIL) and
    gets the same bytes. Without that, every scrape in flight when a snapshot lands
    rendered it again, and 200 scrapers held the GIL for whole renders while the
    sampling tick waited for it (docs/benchmarks.md, "The tick under scrape load").
    `renders` counts the renders done.
    """

    def __init__(self, registry: CollectorRegistry, version: Callable[[], object]) -> None:
        self._registry = registry
        self._version = version
        self._lock = threading.Lock()
        self._render_lock = threading.Lock()
        self._cache: dict[tuple[str, bool], bytes] = {}
        self._cached_version: object = None
        self.renders = 0

    def _cached(self, version: object, key: tuple[str, bool]) -> bytes | None:
        """The cached body for `key` when `version` is still the cached one; a new
        version empties the cache."""
        with self._lock:
            if version is None or version is not self._cached_version:
                self._cache = {}
                self._cached_version = version  # holding it keeps its id from being reused
            return self._cache.get(key)

    def render(self, accept: str, *, gzipped: bool = False) -> tuple[bytes, str]:
        """(body, content type) for an Accept header, gzip-compressed when asked."""
        encoder, content_type = choose_encoder(accept)
        key = (content_type, gzipped)
        body = self._cached(self._version(), key)
        if body is not None:
            return body, content_type
        with self._render_lock:
            # the newest version: the registry renders the newest data whatever a scrape
            # saw on arrival, and a render done while this one waited is reused
            version = self._version()
            body = self._cached(version, key)
            if body is None:
                body = encoder(self._registry)
                if gzipped:
                    body = gzip.compress(body, compresslevel=5)
                self.renders += 1
                if version is not None:
                    with self._lock:
                        if version is self._cached_version:
                            self._cache[key] = body
        return body, content_type


class _Server(BoundedHTTPServer):
    """The bounded server (`export/bounded.py`) with what the endpoints need."""

    exposition: CachedExposition
    active_requests: threading.BoundedSemaphore
    readiness: Readiness
    auth: BasicAuth | None
    status: StatusBody | None = None


class _Handler(DeadlineHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "gpuwatch"
    # headers and body go out in two writes: without TCP_NODELAY the client's delayed ACK
    # holds the body ~40 ms on a kept-alive connection (measured: bench/scrape_latency.py)
    disable_nagle_algorithm = True
    head_only = False

    def do_HEAD(self) -> None:
        """GET's status and headers, no body."""
        self.head_only = True
        try:
            self.do_GET()
        finally:
            self.head_only = False

    def do_GET(self) -> None:
        self.answering()
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            self._reply(200, b"ok\n")
        elif path == "/readyz":
            ready, reason = self.server.readiness()
            self._reply(200 if ready else 503, reason.encode() + b"\n")
        elif not self._authorized():
            self._reply(401, b"unauthorized\n", {"WWW-Authenticate": 'Basic realm="gpuwatch"'})
        elif path == "/metrics":
            gzip_ok = accepts_gzip(", ".join(self.headers.get_all("Accept-Encoding") or ()))
            with self.server.active_requests:
                body, content_type = self.server.exposition.render(
                    self.headers.get("Accept", ""), gzipped=gzip_ok
                )
            headers = {"Content-Type": content_type, "Vary": "Accept-Encoding"}
            if gzip_ok:
                headers["Content-Encoding"] = "gzip"
            self._reply(200, body, headers)
        elif path == STATUS_PATH and self.server.status is not None:
            with self.server.active_requests:
                document = self.server.status(self._client_on_this_host())
            if document is None:
                self._reply(503, b"no sample yet\n")
            else:
                self._reply(200, document, {"Content-Type": "application/json"})
        elif path == "/":
            self._reply(200, b"gpuwatch: see /metrics, /status.json, /healthz, /readyz\n")
        else:
            self._reply(404, b"not found\n")

    def _client_on_this_host(self) -> bool:
        """True for a loopback client, or one that connects from the address it reached
        (`gpuwatch status` on this host asking an agent bound to one interface)."""
        client = _address(self.client_address[0])
        if client is None:
            return False
        if client.is_loopback:
            return True
        try:
            return client == _address(self.connection.getsockname()[0])
        except OSError:
            return False

    def _authorized(self) -> bool:
        auth = self.server.auth
        return auth is None or auth.accepts(self.headers.get("Authorization"))

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        merged = {"Content-Type": "text/plain; charset=utf-8", **(headers or {})}
        for name, value in merged.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self.head_only:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s " + format, self.address_string(), *args)


def _address(host: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """A socket address's host as an IP address (IPv4-mapped IPv6 unwrapped)."""
    try:
        address = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """A PEM certificate chain and its key."""

    cert_file: Path
    key_file: Path


class MetricsServer:
    """Serves the registry over HTTP(S) from a background thread."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        readiness: Readiness,
        *,
        tls: TlsFiles | None = None,
        auth: BasicAuth | None = None,
        version: Callable[[], object] = lambda: None,
        status: StatusBody | None = None,
        max_connections: int = MAX_CONNECTIONS,
        request_seconds: float = REQUEST_SECONDS,
        max_active_requests: int = MAX_ACTIVE_REQUESTS,
    ) -> None:
        """`version()` identifies the data behind `registry` (None: render every scrape);
        `status` serves `/status.json` (None: that path is 404). `host` may be IPv6
        (`::1`, `[::]`); connections are bounded as `export/bounded.py` says, and at most
        `max_active_requests` of them compute a body at once (the others wait, holding
        no GIL, so scrapes cannot crowd the sampling tick out)."""
        self._httpd = _Server(
            (host, port),
            _Handler,
            max_connections=max_connections,
            request_seconds=request_seconds,
        )
        self._httpd.exposition = CachedExposition(registry, version)
        self._httpd.active_requests = threading.BoundedSemaphore(max_active_requests)
        self._httpd.readiness = readiness
        self._httpd.auth = auth
        self._httpd.status = status
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
            self._httpd.tls_context = context
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (useful when asked for port 0)."""
        return int(self._httpd.server_address[1])

    def start(self) -> None:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="gpuwatch-http",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2)
