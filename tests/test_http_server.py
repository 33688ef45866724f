"""gpuwatch.export.server: a real MetricsServer on 127.0.0.1, port 0, hit with urllib.

Every server is started by a fixture and stopped after the test, pass or fail.
"""

from __future__ import annotations

import base64
import contextlib
import email.message
import gzip
import http.client
import shutil
import socket
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gpuwatch.export.server import BasicAuth, MetricsServer, TlsFiles

TIMEOUT = 5.0
USER = "prometheus"
PASSWORD = "s3cret-hunter2"


class OneGauge(Collector):
    """A custom collector with one fixed series."""

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily("gpuwatch_test_value", "A test value.", labels=["gpu"])
        gauge.add_metric(["0"], 42.0)
        yield gauge


@dataclass
class Readiness:
    """A readiness callable whose answer the test can change."""

    ready: bool = True
    reason: str = "ready"
    calls: list[int] = field(default_factory=list)

    def __call__(self) -> tuple[bool, str]:
        self.calls.append(1)
        return self.ready, self.reason


@dataclass(frozen=True)
class Response:
    status: int
    headers: email.message.Message[str, str]
    body: bytes


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(OneGauge())
    return registry


def _fetch(
    url: str,
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
    timeout: float = TIMEOUT,
) -> Response:
    """GET `url` without proxies; 4xx/5xx are returned, not raised."""
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    opener = urllib.request.build_opener(*handlers)
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(request, timeout=timeout) as reply:
            return Response(reply.status, reply.headers, reply.read())
    except urllib.error.HTTPError as error:
        with error:
            return Response(error.code, error.headers, error.read())


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _stop(server: MetricsServer) -> None:
    """`server.stop()`, poking the port so that serve_forever notices the shutdown request
    at once instead of after its 0.2 s poll interval (keeps the file fast)."""
    port = server.port
    stopper = threading.Thread(target=server.stop, name="test-stop")
    stopper.start()
    while stopper.is_alive():
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", port), timeout=0.5),
        ):
            pass
        stopper.join(0.005)


ServerFactory = Callable[..., MetricsServer]


@pytest.fixture
def make_server() -> Iterator[ServerFactory]:
    """Build and start MetricsServers on 127.0.0.1:0; all are stopped afterwards."""
    servers: list[MetricsServer] = []

    def make(
        readiness: Callable[[], tuple[bool, str]] | None = None,
        *,
        tls: TlsFiles | None = None,
        auth: BasicAuth | None = None,
        status: Callable[[bool], bytes | None] | None = None,
    ) -> MetricsServer:
        server = MetricsServer(
            "127.0.0.1",
            0,
            _registry(),
            readiness or Readiness(),
            tls=tls,
            auth=auth,
            status=status,
        )
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        _stop(server)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A self-signed certificate for CN=localhost, made with the openssl CLI.

    Module-scoped because RSA key generation is the slowest step here; the files are only
    read, and every test still builds its own server from them.
    """
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "c.pem", directory / "k.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "1",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return TlsFiles(cert_file=cert, key_file=key)


def _trusting(tls: TlsFiles) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(tls.cert_file))


# --- plain HTTP ------------------------------------------------------------------------


def test_port_zero_binds_a_real_port(make_server: ServerFactory) -> None:
    assert make_server().port > 0


def test_metrics_text_format(make_server: ServerFactory) -> None:
    server = make_server()
    reply = _fetch(f"http://127.0.0.1:{server.port}/metrics")
    assert reply.status == 200
    content_type = reply.headers["Content-Type"]
    assert content_type.startswith("text/plain"), content_type
    assert "version=" in content_type
    text = reply.body.decode()
    assert "# HELP gpuwatch_test_value A test value." in text
    assert "# TYPE gpuwatch_test_value gauge" in text
    assert 'gpuwatch_test_value{gpu="0"} 42.0' in text
    assert "# EOF" not in text
    assert int(reply.headers["Content-Length"]) == len(reply.body)


def test_metrics_openmetrics_when_asked(make_server: ServerFactory) -> None:
    server = make_server()
    reply = _fetch(
        f"http://127.0.0.1:{server.port}/metrics",
        {"Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"},
    )
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
    text = reply.body.decode()
    assert 'gpuwatch_test_value{gpu="0"} 42.0' in text
    assert text.endswith("# EOF\n")


def test_metrics_with_query_string(make_server: ServerFactory) -> None:
    server = make_server()
    reply = _fetch(f"http://127.0.0.1:{server.port}/metrics?name[]=gpuwatch_test_value")
    assert reply.status == 200
    assert b"gpuwatch_test_value" in reply.body


def test_healthz(make_server: ServerFactory) -> None:
    server = make_server()
    reply = _fetch(f"http://127.0.0.1:{server.port}/healthz")
    assert (reply.status, reply.body) == (200, b"ok\n")


def test_readyz_follows_the_readiness_callable(make_server: ServerFactory) -> None:
    readiness = Readiness(ready=False, reason="no sample yet")
    server = make_server(readiness)
    url = f"http://127.0.0.1:{server.port}/readyz"

    reply = _fetch(url)
    assert (reply.status, reply.body) == (503, b"no sample yet\n")

    readiness.ready, readiness.reason = True, "sampling 8 GPUs"
    reply = _fetch(url)
    assert (reply.status, reply.body) == (200, b"sampling 8 GPUs\n")
    assert len(readiness.calls) == 2


def test_root_page(make_server: ServerFactory) -> None:
    server = make_server()
    reply = _fetch(f"http://127.0.0.1:{server.port}/")
    assert reply.status == 200
    assert b"/metrics" in reply.body


def test_unknown_path_is_404(make_server: ServerFactory) -> None:
    server = make_server()
    for path in ("/nope", "/metrics/extra", "/METRICS"):
        assert _fetch(f"http://127.0.0.1:{server.port}{path}").status == 404, path


def test_stop_closes_the_port() -> None:
    server = MetricsServer("127.0.0.1", 0, _registry(), Readiness())
    server.start()
    port = server.port
    assert _fetch(f"http://127.0.0.1:{port}/healthz").status == 200
    _stop(server)
    with pytest.raises(OSError, match=r"[Rr]efused|URLError|urlopen"):
        _fetch(f"http://127.0.0.1:{port}/healthz", timeout=1.0)


# --- /status.json -----------------------------------------------------------------------


@dataclass
class Status:
    """A status callable that records whether each client was on this host."""

    body: bytes | None = b'{"format": "test"}'
    local: list[bool] = field(default_factory=list)

    def __call__(self, local_client: bool) -> bytes | None:
        self.local.append(local_client)
        return self.body


def test_status_json_is_served_as_json_to_a_local_client(make_server: ServerFactory) -> None:
    status = Status()
    server = make_server(status=status)
    reply = _fetch(f"http://127.0.0.1:{server.port}/status.json?x=1")
    assert (reply.status, reply.body) == (200, b'{"format": "test"}')
    assert reply.headers["Content-Type"] == "application/json"
    assert status.local == [True]


def test_status_json_before_the_first_sample_is_503(make_server: ServerFactory) -> None:
    server = make_server(status=Status(body=None))
    reply = _fetch(f"http://127.0.0.1:{server.port}/status.json")
    assert (reply.status, reply.body) == (503, b"no sample yet\n")


def test_status_json_without_a_status_source_is_404(make_server: ServerFactory) -> None:
    server = make_server()
    assert _fetch(f"http://127.0.0.1:{server.port}/status.json").status == 404


def test_status_json_needs_credentials_like_metrics(make_server: ServerFactory) -> None:
    status = Status()
    server = make_server(auth=BasicAuth(USER, PASSWORD), status=status)
    url = f"http://127.0.0.1:{server.port}/status.json"
    assert _fetch(url).status == 401
    assert _fetch(url, _basic(USER, "wrong")).status == 401
    assert status.local == []
    assert _fetch(url, _basic(USER, PASSWORD)).status == 200


# --- basic auth ------------------------------------------------------------------------


@pytest.fixture
def auth_server(make_server: ServerFactory) -> MetricsServer:
    return make_server(Readiness(ready=False, reason="starting"), auth=BasicAuth(USER, PASSWORD))


@pytest.mark.parametrize(
    "headers",
    [
        {},
        _basic(USER, "wrong"),
        _basic("someone", PASSWORD),
        _basic(USER, ""),
        _basic(USER, PASSWORD + "x"),
        {"Authorization": f"Bearer {PASSWORD}"},
        {"Authorization": "Basic !!!not-base64!!!"},
        {"Authorization": "Basic " + base64.b64encode(USER.encode()).decode()},
    ],
    ids=[
        "none",
        "wrong-password",
        "wrong-user",
        "empty-password",
        "password-prefix",
        "bearer",
        "bad-base64",
        "no-colon",
    ],
)
def test_metrics_needs_the_right_credentials(
    auth_server: MetricsServer, headers: dict[str, str]
) -> None:
    reply = _fetch(f"http://127.0.0.1:{auth_server.port}/metrics", headers)
    assert reply.status == 401
    assert reply.headers["WWW-Authenticate"] == 'Basic realm="gpuwatch"'
    assert b"gpuwatch_test_value" not in reply.body


def test_metrics_with_the_right_credentials(auth_server: MetricsServer) -> None:
    reply = _fetch(f"http://127.0.0.1:{auth_server.port}/metrics", _basic(USER, PASSWORD))
    assert reply.status == 200
    assert b'gpuwatch_test_value{gpu="0"} 42.0' in reply.body


def test_unknown_path_needs_credentials_too(auth_server: MetricsServer) -> None:
    assert _fetch(f"http://127.0.0.1:{auth_server.port}/nope").status == 401
    assert _fetch(f"http://127.0.0.1:{auth_server.port}/nope", _basic(USER, PASSWORD)).status == 404


def test_probes_work_without_credentials(auth_server: MetricsServer) -> None:
    assert _fetch(f"http://127.0.0.1:{auth_server.port}/healthz").status == 200
    reply = _fetch(f"http://127.0.0.1:{auth_server.port}/readyz")
    assert (reply.status, reply.body) == (503, b"starting\n")


def test_basic_auth_never_shows_the_password() -> None:
    auth = BasicAuth(USER, PASSWORD)
    for shown in (repr(auth), str(auth), f"{auth}", f"{auth!r}", repr([auth])):
        assert PASSWORD not in shown, shown
        assert USER in shown


def test_basic_auth_accepts() -> None:
    auth = BasicAuth(USER, "pa:ss:word")
    assert auth.accepts(_basic(USER, "pa:ss:word")["Authorization"])
    assert not auth.accepts(None)
    assert not auth.accepts("")
    assert not auth.accepts(_basic(USER, "pa")["Authorization"])
    assert not auth.accepts("Basic " + base64.b64encode(b"\xff\xfe:x").decode())


def test_basic_auth_from_file_strips_the_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text(PASSWORD + "\n", encoding="utf-8")
    assert BasicAuth.from_file(USER, path) == BasicAuth(USER, PASSWORD)
    path.write_bytes(PASSWORD.encode() + b"\r\n")
    assert BasicAuth.from_file(USER, path).password == PASSWORD
    path.write_text(PASSWORD, encoding="utf-8")
    assert BasicAuth.from_file(USER, path).password == PASSWORD
    path.write_text(" pw with spaces \n", encoding="utf-8")
    assert BasicAuth.from_file(USER, path).password == " pw with spaces "


def test_basic_auth_from_file_works_end_to_end(tmp_path: Path, make_server: ServerFactory) -> None:
    path = tmp_path / "password"
    path.write_text(PASSWORD + "\n", encoding="utf-8")
    server = make_server(auth=BasicAuth.from_file(USER, path))
    url = f"http://127.0.0.1:{server.port}/metrics"
    assert _fetch(url, _basic(USER, PASSWORD)).status == 200
    assert _fetch(url, _basic(USER, PASSWORD + "\n")).status == 401


# --- TLS -------------------------------------------------------------------------------


def test_tls_scrape(make_server: ServerFactory, tls_files: TlsFiles) -> None:
    server = make_server(tls=tls_files)
    context = _trusting(tls_files)
    reply = _fetch(f"https://localhost:{server.port}/metrics", context=context)
    assert reply.status == 200
    assert b'gpuwatch_test_value{gpu="0"} 42.0' in reply.body
    assert _fetch(f"https://127.0.0.1:{server.port}/healthz", context=context).status == 200


def test_tls_with_basic_auth(make_server: ServerFactory, tls_files: TlsFiles) -> None:
    server = make_server(tls=tls_files, auth=BasicAuth(USER, PASSWORD))
    context = _trusting(tls_files)
    url = f"https://localhost:{server.port}/metrics"
    assert _fetch(url, context=context).status == 401
    assert _fetch(url, _basic(USER, PASSWORD), context=context).status == 200


def test_tls_untrusted_certificate_is_refused(
    make_server: ServerFactory, tls_files: TlsFiles
) -> None:
    server = make_server(tls=tls_files)
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        _fetch(f"https://localhost:{server.port}/healthz", context=ssl.create_default_context())


def test_plain_http_to_the_tls_port_fails(make_server: ServerFactory, tls_files: TlsFiles) -> None:
    server = make_server(tls=tls_files)
    with pytest.raises((OSError, http.client.HTTPException)):
        _fetch(f"http://127.0.0.1:{server.port}/metrics", timeout=2.0)
    # ... and the server keeps serving TLS clients afterwards.
    reply = _fetch(f"https://localhost:{server.port}/healthz", context=_trusting(tls_files))
    assert reply.status == 200


def test_tls_client_that_sends_nothing_does_not_block_others(
    make_server: ServerFactory, tls_files: TlsFiles
) -> None:
    # A TCP connect without a TLS handshake (port scanner, TCP health check, slow client)
    # must not stop Prometheus from scraping.
    server = make_server(tls=tls_files)
    context = _trusting(tls_files)
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT):
        try:
            reply = _fetch(f"https://localhost:{server.port}/healthz", context=context, timeout=1.0)
        except (OSError, http.client.HTTPException) as exc:
            pytest.fail(
                "BUG export/server.py:133: the listening socket is TLS-wrapped, so the "
                "handshake runs inside accept() in the single serving thread with no timeout; "
                f"one silent TCP client blocks every scrape ({exc})"
            )
    assert reply.status == 200


# --- the cached exposition -------------------------------------------------------------


class _CountingCollector(Collector):
    """Each collect() yields a higher value: shows whether a scrape re-rendered."""

    def __init__(self) -> None:
        self.renders = 0

    def collect(self) -> Iterator[Metric]:
        self.renders += 1
        family = GaugeMetricFamily("renders", "How often the registry was rendered.")
        family.add_metric([], float(self.renders))
        yield family


def test_one_render_per_version_and_gzip_when_asked() -> None:
    from gpuwatch.export.server import CachedExposition

    collector = _CountingCollector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    version = [object()]
    exposition = CachedExposition(registry, lambda: version[0])
    first, _ = exposition.render("")
    again, _ = exposition.render("")
    assert first == again
    assert collector.renders == 1
    zipped, content_type = exposition.render("", gzipped=True)
    assert gzip.decompress(zipped).startswith(b"# HELP renders")
    assert content_type.startswith("text/plain")
    version[0] = object()  # a new snapshot
    fresh, _ = exposition.render("")
    assert fresh != first
    assert b"renders 3.0" in fresh  # plain and gzip were rendered once each before


def test_metrics_served_gzipped_to_prometheus(make_server: ServerFactory) -> None:
    port = make_server().port
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics", headers={"Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.headers["Content-Encoding"] == "gzip"
        body = gzip.decompress(resp.read())
    assert b"# TYPE" in body


# --- content negotiation and auth schemes as RFC 9110 writes them ----------------------


def _raw_get(port: int, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """GET /metrics with exactly `headers` (http.client adds no Accept-Encoding)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        connection.putrequest("GET", "/metrics", skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("accept_encoding", "gzipped"),
    [
        (None, False),
        ("", False),
        ("gzip", True),
        ("GZip", True),
        ("x-gzip", True),
        ("gzip;q=0", False),  # RFC 9110: q=0 means "not acceptable"
        ("gzip; q=0.000", False),
        ("gzip;Q=0", False),
        ("deflate, gzip;q=0", False),
        ("gzip;q=0.5, identity;q=0.1", True),
        ("identity, gzip;q=0.5", False),  # identity preferred
        ("gzip;q=0, *", False),  # the named coding wins over *
        ("*", True),
        ("*;q=0", False),
        ("br, *;q=0.1", True),
        ("deflate, br", False),
        ("notgzip, gzipx", False),  # no substring match
        ("gzip;q=2", False),  # a malformed weight: the entry is ignored
        ("gzip;q=abc, deflate", False),
        ("gzip;level=1", True),  # parameters other than q do not matter
    ],
)
def test_gzip_only_when_accept_encoding_allows_it(
    make_server: ServerFactory, accept_encoding: str | None, gzipped: bool
) -> None:
    headers = {} if accept_encoding is None else {"Accept-Encoding": accept_encoding}
    status, reply_headers, body = _raw_get(make_server().port, headers)
    assert status == 200
    assert reply_headers.get("Vary") == "Accept-Encoding"
    if gzipped:
        assert reply_headers.get("Content-Encoding") == "gzip"
        body = gzip.decompress(body)
    else:
        assert "Content-Encoding" not in reply_headers
    assert b"gpuwatch_test_value" in body


def test_accept_encoding_over_two_header_lines_counts_both(make_server: ServerFactory) -> None:
    port = make_server().port
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        connection.putrequest("GET", "/metrics", skip_accept_encoding=True)
        connection.putheader("Accept-Encoding", "identity;q=0.5")
        connection.putheader("Accept-Encoding", "gzip")
        connection.endheaders()
        response = connection.getresponse()
        assert response.getheader("Content-Encoding") == "gzip"
        assert b"gpuwatch_test_value" in gzip.decompress(response.read())
    finally:
        connection.close()


@pytest.mark.parametrize("scheme", ["Basic", "basic", "BASIC", "bAsIc"])
def test_basic_auth_scheme_is_case_insensitive(auth_server: MetricsServer, scheme: str) -> None:
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    for value in (f"{scheme} {token}", f"{scheme}   {token}"):
        reply = _fetch(f"http://127.0.0.1:{auth_server.port}/metrics", {"Authorization": value})
        assert reply.status == 200, value


@pytest.mark.parametrize("prefix", ["Bearer ", "Basicx ", "Digest ", "", "Basic:"])
def test_other_schemes_are_refused(auth_server: MetricsServer, prefix: str) -> None:
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    reply = _fetch(
        f"http://127.0.0.1:{auth_server.port}/metrics", {"Authorization": prefix + token}
    )
    assert reply.status == 401


# --- scrape load: one render per snapshot, few requests computed at once ------------------


class _GatedCollector(Collector):
    """Counts renders; the first blocks until `release` is set, saying so on `entered`."""

    def __init__(self) -> None:
        self.renders = 0
        self.entered = threading.Event()
        self.release = threading.Event()

    def collect(self) -> Iterator[Metric]:
        self.renders += 1
        self.entered.set()
        assert self.release.wait(TIMEOUT)
        family = GaugeMetricFamily("renders", "How often the registry was rendered.")
        family.add_metric([], float(self.renders))
        yield family


def _in_threads(
    count: int, call: Callable[[], Response]
) -> tuple[list[threading.Thread], list[Response]]:
    replies: list[Response] = []
    threads = [threading.Thread(target=lambda: replies.append(call())) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, replies


def test_scrapes_that_arrive_during_a_render_wait_for_it_instead_of_rendering() -> None:
    """Eight scrapes of one new snapshot: the first renders, the seven that arrive while it
    renders wait and get its bytes (before: each rendered it again, holding the GIL)."""
    collector = _GatedCollector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    snapshot = object()
    server = MetricsServer("127.0.0.1", 0, registry, Readiness(), version=lambda: snapshot)
    server.start()
    url = f"http://127.0.0.1:{server.port}/metrics"
    try:
        first, replies = _in_threads(1, lambda: _fetch(url))
        assert collector.entered.wait(TIMEOUT)
        others, more = _in_threads(7, lambda: _fetch(url))
        threading.Event().wait(0.3)  # let the seven reach the server (correct either way)
        collector.release.set()
        for thread in first + others:
            thread.join(TIMEOUT)
    finally:
        _stop(server)
    bodies = {reply.body for reply in replies + more}
    assert [reply.status for reply in replies + more] == [200] * 8
    assert collector.renders == 1
    assert bodies == {
        b"# HELP renders How often the registry was rendered.\n# TYPE renders gauge\nrenders 1.0\n"
    }


def test_at_most_max_active_requests_bodies_are_computed_at_once() -> None:
    """Six concurrent /status.json requests on a server allowing two at once: two are
    computed, four wait until one of those ends."""
    lock = threading.Lock()
    active = [0, 0]  # now, most ever
    two_in = threading.Event()
    release = threading.Event()

    def status(local_client: bool) -> bytes:
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
            if active[0] == 2:
                two_in.set()
        assert release.wait(TIMEOUT)
        with lock:
            active[0] -= 1
        return b"{}"

    server = MetricsServer(
        "127.0.0.1", 0, _registry(), Readiness(), status=status, max_active_requests=2
    )
    server.start()
    try:
        threads, replies = _in_threads(
            6, lambda: _fetch(f"http://127.0.0.1:{server.port}/status.json")
        )
        assert two_in.wait(TIMEOUT)
        threading.Event().wait(0.3)  # a third, if the bound failed, would be in by now
        assert active[1] == 2
        release.set()
        for thread in threads:
            thread.join(TIMEOUT)
    finally:
        _stop(server)
    assert [reply.status for reply in replies] == [200] * 6
    assert active[1] == 2
