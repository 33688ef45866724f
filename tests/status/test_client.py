"""gpuwatch.status.client against small real servers on loopback: every way to get no document."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.config import ExporterConfig
from gpuwatch.status.client import agent_url, fetch_status


@pytest.mark.parametrize(
    ("listen", "tls", "url"),
    [
        ("0.0.0.0:9842", False, "http://127.0.0.1:9842/status.json"),
        ("[::]:9842", False, "http://[::1]:9842/status.json"),
        ("[::1]:9000", False, "http://[::1]:9000/status.json"),
        ("10.1.2.3:9842", True, "https://10.1.2.3:9842/status.json"),
        ("gpu-node-7:9842", False, "http://gpu-node-7:9842/status.json"),
    ],
)
def test_agent_url(listen: str, tls: bool, url: str, tmp_path: Path) -> None:
    files: dict[str, Any] = (
        {"tls_cert_file": tmp_path / "c", "tls_key_file": tmp_path / "k"} if tls else {}
    )
    assert agent_url(ExporterConfig(listen=listen, **files)) == url


def test_listen_overrides_the_config() -> None:
    exporter = ExporterConfig(listen="0.0.0.0:9842")
    assert agent_url(exporter, "127.0.0.1:1234") == "http://127.0.0.1:1234/status.json"


@contextlib.contextmanager
def serve(body: bytes, status: int = 200) -> Iterator[int]:
    """A loopback HTTP server that answers every GET with `status` and `body`; its port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"<html>not gpuwatch</html>", 200, "the answer is not JSON"),
        (b'{"format": "something-else", "gpus": []}', 200, "not a gpuwatch-status/1 document"),
        (b'{"format": "gpuwatch-status/1", "gpus": {}}', 200, "no GPU list"),
        (b"[1, 2]", 200, "not a gpuwatch-status/1 document"),
        (b"no sample yet\n", 503, "the agent has no sample yet"),
        (b"not found\n", 404, "serves no /status.json"),
        (b"unauthorized\n", 401, "refused the credentials"),
        (b"boom\n", 500, "HTTP 500"),
    ],
)
def test_a_bad_answer_is_one_line(body: bytes, status: int, error: str) -> None:
    with serve(body, status) as port:
        answer = fetch_status(ExporterConfig(listen=f"127.0.0.1:{port}"))
        assert answer.document is None
        assert answer.error is not None
        assert error in answer.error


def test_a_good_answer_is_the_document() -> None:
    with serve(b'{"format": "gpuwatch-status/1", "gpus": [], "source": "agent"}') as port:
        answer = fetch_status(ExporterConfig(listen=f"127.0.0.1:{port}"))
        assert answer.error is None
        assert answer.document == {"format": "gpuwatch-status/1", "gpus": [], "source": "agent"}


def test_an_agent_that_never_answers_times_out() -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        answer = fetch_status(ExporterConfig(listen=f"127.0.0.1:{port}"), timeout=0.3)
    assert answer.error == "no answer within 0.3 s"


def test_an_unreadable_password_file_is_named(tmp_path: Path) -> None:
    exporter = ExporterConfig(
        listen="127.0.0.1:9",
        basic_auth_username="ops",
        basic_auth_password_file=tmp_path / "missing",
    )
    answer = fetch_status(exporter)
    assert answer.error == (
        "cannot read exporter.basic_auth_password_file: No such file or directory"
    )
