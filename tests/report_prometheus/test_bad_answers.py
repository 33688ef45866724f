"""`gpuwatch report --prometheus` and `gpuwatch plan --prometheus` against an API that
answers wrong, slowly or not at all: a real HTTP server on loopback serves valid JSON of
the wrong shape, NaN, infinities, negative values, a drip-fed body and no answer. Each
run ends in one line and exit 1, within the `--prometheus-timeout` deadline, never with
a traceback or output that is not strict JSON."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.conftest import free_port

PERIOD = ("--from", "2026-10-01", "--to", "2026-10-03")
UNTIL = ("--until", "2026-10-03", "--days", "2")
GPU = {"__name__": "x", "node": "node-a", "uuid": "GPU-0", "gpu": "0"}
GPU["name"] = "NVIDIA H100 80GB HBM3"
LABELS = {  # what a query naming the metric gets besides GPU's labels
    "gpuwatch_gpu_state": {"state": "busy"},
    "gpuwatch_gpu_required_memory_bytes": {"source": "observed"},
    "gpuwatch_gpu_need_basis_info": {"basis": "observed"},
}
VALUES = {
    "gpuwatch_gpu_required_memory_bytes": "2e9",
    "gpuwatch_gpu_activity_mean": "0.05",
    "gpuwatch_gpu_price_usd_per_hour": "10",
}
RANGE_SELECTOR = re.compile(r"\[[0-9a-z]+(?::[0-9a-z]+)?\] @ [0-9.]+$")
"""A query whose outermost expression is a range selector or a subquery (it ends in
`[range] @ t` or `[range:step] @ t`): Prometheus answers it with a matrix."""
DEADLINE_S = 2.0
SLACK_S = 4.0  # interpreter start-up and a loaded machine, far below the old endless runs


class _Api(ThreadingHTTPServer):
    daemon_threads = True
    mode: str = "ok"
    value: str = "1"  # the sample value of "value" mode
    metric: str = ""  # "value" mode: only queries naming this metric get `value`
    missing: str = ""  # queries naming this metric get no series
    stop: threading.Event


def _answer(query: str, api: _Api) -> dict[str, Any]:
    """Every query answered with one busy H100's series (`api.value` where asked)."""
    labels, value = dict(GPU), "1"
    for metric, extra in LABELS.items():
        labels.update(extra if metric in query else {})
    for metric, figure in VALUES.items():
        value = figure if metric in query else value
    if api.mode == "value" and api.metric in query:
        value = api.value
    if RANGE_SELECTOR.search(query):
        series: dict[str, object] = {
            "metric": labels,
            "values": [[1759276800, value], [1759276860, value]],
        }
        result: list[dict[str, object]] = [series]
        kind = "matrix"
    else:
        result, kind = [{"metric": labels, "value": [1759276800, value]}], "vector"
    if api.missing and api.missing in query:
        result = []
    return {"status": "success", "data": {"resultType": kind, "result": result}}


SHAPES: dict[str, object] = {
    "list": [],
    "no data": {"status": "success"},
    "result not a list": {"status": "success", "data": {"resultType": "vector", "result": {}}},
    "no value": {"status": "success", "data": {"resultType": "vector", "result": [{}]}},
    "value not a pair": {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": "7"}]},
    },
    "value null": {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, None]}]},
    },
}


class _Handler(BaseHTTPRequestHandler):
    server: _Api
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        query = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))["query"]
        mode = self.server.mode
        if mode == "hang":  # never a byte back
            self.server.stop.wait()
            return
        body = json.dumps(SHAPES[mode] if mode in SHAPES else _answer(query, self.server)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if mode != "drip":
            self.wfile.write(body)
            return
        for byte in body:  # one byte every half second: each read well within any timeout
            if self.server.stop.wait(0.5):
                return
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:
                return

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[_Api]:
    api = _Api(("127.0.0.1", free_port()), _Handler)
    api.stop = threading.Event()
    thread = threading.Thread(target=api.serve_forever, daemon=True)
    thread.start()
    yield api
    api.stop.set()
    api.shutdown()
    api.server_close()


@pytest.fixture
def api(server: _Api) -> _Api:
    server.mode, server.value, server.metric, server.missing = "ok", "1", "", ""
    return server


def _run(api: _Api, command: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
    url = f"http://127.0.0.1:{api.server_address[1]}"
    window = PERIOD if command == "report" else UNTIL
    argv = [sys.executable, "-m", "gpuwatch", command, "--prometheus", url, *window, *extra]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    return done, time.monotonic() - started


def _one_line_failure(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _strict_json(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise AssertionError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("command", ["report", "plan"])
@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "-1", "1e300"])
def test_a_sample_that_is_not_a_finite_amount_is_one_line(
    api: _Api, command: str, value: str
) -> None:
    api.mode, api.value = "value", value
    done, _ = _run(api, command, "--format", "json")
    line = _one_line_failure(done)
    assert f"is {value}: expected a finite number >= 0" in line
    assert "gpuwatch_" in line  # names the metric


@pytest.mark.parametrize("command", ["report", "plan"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_valid_json_of_the_wrong_shape_is_one_line(api: _Api, command: str, shape: str) -> None:
    api.mode = shape
    done, _ = _run(api, command)
    assert "not a Prometheus API answer" in _one_line_failure(done)


def test_an_infinite_price_leaves_the_report_without_a_plan(api: _Api) -> None:
    # the report reads the price series' source label only; the plan sums the price
    api.mode, api.value, api.metric = "value", "+Inf", "gpuwatch_gpu_price_usd_per_hour"
    done, _ = _run(api, "report", "--format", "json")
    assert done.returncode == 0, done.stderr
    document = _strict_json(done.stdout)
    assert document["fleet_plan"] is None
    notes = [note for note in document["notes"] if note.startswith("no fleet plan: ")]
    assert len(notes) == 1
    assert "gpuwatch_gpu_price_usd_per_hour (host 'node-a') is +Inf" in notes[0]
    done, _ = _run(api, "plan")
    assert "gpuwatch_gpu_price_usd_per_hour (host 'node-a') is +Inf" in _one_line_failure(done)


def test_a_plan_that_fails_leaves_the_report_with_a_note(api: _Api) -> None:
    # the plan reads DRAM bandwidth, the report does not: the plan alone fails
    api.mode, api.value, api.metric = "value", "+Inf", "gpuwatch_gpu_dram_bandwidth_ratio"
    done, _ = _run(api, "report", "--format", "json")
    assert done.returncode == 0, done.stderr
    document = _strict_json(done.stdout)
    assert document["fleet_plan"] is None
    notes = [note for note in document["notes"] if note.startswith("no fleet plan: ")]
    assert len(notes) == 1
    assert "gpuwatch_gpu_dram_bandwidth_ratio (host 'node-a') is +Inf" in notes[0]


def test_a_negative_rent_vs_buy_delta_is_a_saving_not_an_error(api: _Api) -> None:
    api.mode, api.value, api.metric = "value", "-120.5", "monthly_delta_usd"
    done, _ = _run(api, "report", "--format", "json")
    assert done.returncode == 0, done.stderr
    _strict_json(done.stdout)


@pytest.mark.parametrize("command", ["report", "plan"])
@pytest.mark.parametrize("mode", ["hang", "drip"])
def test_the_timeout_is_a_deadline_for_the_whole_run(api: _Api, command: str, mode: str) -> None:
    api.mode = mode
    done, took = _run(api, command, "--prometheus-timeout", f"{DEADLINE_S:g}")
    line = _one_line_failure(done)
    assert f"no complete answer within --prometheus-timeout {DEADLINE_S:g} s" in line
    assert took < DEADLINE_S + SLACK_S


def test_a_lookback_without_need_series_plans_nothing_with_need_unknown(api: _Api) -> None:
    done, _ = _run(api, "plan", "--format", "json")
    assert done.returncode == 0, done.stderr
    sized = _strict_json(done.stdout)
    assert sized["savings_usd_per_hour"] > 0  # a 2 GB need: the H100 is too large
    api.missing = "gpuwatch_gpu_required_memory_bytes"
    done, _ = _run(api, "plan", "--format", "json")
    assert done.returncode == 0, done.stderr
    plan = _strict_json(done.stdout)
    assert plan["savings_usd_per_hour"] == 0
    assert plan["placements"] == []
    assert plan["unplaced"] == ["GPU-0"]
    assert plan["workloads"][0]["memory_need_bytes"] is None
    assert "need unknown" in plan["moves"][0]["action"]
    text, _ = _run(api, "plan")
    assert "need unknown" in text.stdout
