"""The plan's Prometheus source runs its queries concurrently: every query is asked, once,
at the lookback's end, and a failure of any one of them is the source's failure (one
line, no partial plan). A real HTTP server answers; the agreement with the local history
is in tests/report_agreement/test_plan.py."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpuwatch.config import Config
from gpuwatch.plan.make import PlanSourceError, make_plan
from gpuwatch.plan.model import PlanOptions
from gpuwatch.plan.prometheus import load_usage, queries
from gpuwatch.promapi.client import PrometheusError, PrometheusOptions
from tests.conftest import free_port

AT = 1_793_404_800.0
FAILING = "gpuwatch_gpu_pod_info"


class _Api(ThreadingHTTPServer):
    asked: list[tuple[str, str]]


class _Handler(BaseHTTPRequestHandler):
    server: _Api

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        self.server.asked.append((form["query"], form["time"]))
        if FAILING in form["query"]:
            body: dict[str, Any] = {
                "status": "error",
                "errorType": "execution",
                "error": "query timed out",
            }
            self.send_response(422)
        else:
            body = {"status": "success", "data": {"resultType": "vector", "result": []}}
            if form["query"].endswith(f"[10m] @ {AT:.3f}") or form["query"].startswith(
                (
                    "max_over_time(gpuwatch_gpu_pod_info[1h])",
                    "last_over_time(gpuwatch_gpu_required",
                )
            ):
                body["data"]["resultType"] = "matrix"
            self.send_response(200)
        payload = json.dumps(body).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[_Api]:
    server = _Api(("127.0.0.1", free_port()), _Handler)
    server.asked = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def test_one_failing_query_fails_the_source_after_every_query_was_asked(api: _Api) -> None:
    url = f"http://127.0.0.1:{api.server_address[1]}"
    with pytest.raises(PrometheusError, match=r"HTTP 422.*query timed out"):
        load_usage(PrometheusOptions(url, parallel_queries=3), 30, AT)
    asked = sorted(query for query, _ in api.asked)
    expected = sorted([*queries(30, AT).values(), f"gpuwatch_gpu_up[10m] @ {AT:.3f}"])
    assert asked == expected  # each once (those after the failure too)
    assert {at for _, at in api.asked} == {f"{AT:.3f}"}


def test_the_plan_command_reports_the_failure_in_one_line(api: _Api) -> None:
    url = f"http://127.0.0.1:{api.server_address[1]}"
    with pytest.raises(PlanSourceError) as failure:
        make_plan(Config(), PlanOptions(), days=30, end_epoch=AT, prometheus=PrometheusOptions(url))
    assert "\n" not in str(failure.value)
    assert "query timed out" in str(failure.value)
