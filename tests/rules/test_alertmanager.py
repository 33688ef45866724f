"""The alert rules end to end: a real Prometheus evaluates them and sends to a real
Alertmanager (Debian's prometheus-alertmanager 0.25), routed by docs/alerts.md's example.

Prometheus scrapes two fixture expositions every second, as the chart's ServiceMonitor
would (honor_labels, the agent pod's target labels and `node`) and as a plain host's
scrape config would (job and instance only). The rule files are the repository's, with
every `for:` at 0s (rulefiles.fast_copy), so alerts arrive within seconds; what arrives is
read back through Alertmanager's API (/api/v2/alerts), labels, annotations, receivers.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port, require_binary
from tests.prometheus_process import running_prometheus
from tests.rules.rulefiles import ALERTS_DOC, ALERTS_FILE, RECORDING_FILE, fast_copy

DEADLINE_SECONDS = 45

HOLDER = 'gpu="1",uuid="GPU-a1",mig_uuid="",namespace="team-b",pod="eval",container="eval"'
"""team-b/eval's container, which holds GPU 1 of gpu-node-1."""

NODE_EXPOSITION = (
    """\
# TYPE gpuwatch_gpu_state gauge
gpuwatch_gpu_state{gpu="0",uuid="GPU-a0",state="idle"} 1
gpuwatch_gpu_state{gpu="0",uuid="GPU-a0",state="busy"} 0
gpuwatch_gpu_state{gpu="1",uuid="GPU-a1",state="idle"} 0
gpuwatch_gpu_state{gpu="1",uuid="GPU-a1",state="busy"} 1
# TYPE gpuwatch_gpu_state_seconds gauge
gpuwatch_gpu_state_seconds{gpu="0",uuid="GPU-a0"} 5400
gpuwatch_gpu_state_seconds{gpu="1",uuid="GPU-a1"} 5400
# TYPE gpuwatch_gpu_price_usd_per_hour gauge
gpuwatch_gpu_price_usd_per_hour{gpu="0",uuid="GPU-a0",source="static"} 1234.5
gpuwatch_gpu_price_usd_per_hour{gpu="1",uuid="GPU-a1",source="static"} 1234.5
# TYPE gpuwatch_gpu_pod_info gauge
"""
    + f'gpuwatch_gpu_pod_info{{{HOLDER},resource="nvidia.com/gpu"}} 1\n'
    + "# TYPE gpuwatch_gpu_pod_allocated_idle gauge\n"
    + f"gpuwatch_gpu_pod_allocated_idle{{{HOLDER}}} 1\n"
)
"""The agent on gpu-node-1: GPU 0 idle (no pod holds it); GPU 1 busy, and team-b/eval's
container, which holds it too, runs nothing on it (allocated-idle)."""

HOST_EXPOSITION = """\
# TYPE gpuwatch_gpu_state gauge
gpuwatch_gpu_state{gpu="0",uuid="GPU-b0",state="held"} 1
# TYPE gpuwatch_gpu_price_usd_per_hour gauge
gpuwatch_gpu_price_usd_per_hour{gpu="0",uuid="GPU-b0",source="static"} 6.88
"""
"""A plain host's agent: GPU 0 held."""

AGENT_POD_LABELS = {
    "node": "gpu-node-1",
    "namespace": "gpuwatch",
    "pod": "gpuwatch-abcde",
    "container": "gpuwatch",
    "endpoint": "metrics",
    "service": "gpuwatch",
}
"""What the chart's ServiceMonitor gives the agent's target (instance is its pod IP)."""


def alertmanager_example() -> str:
    """docs/alerts.md's Alertmanager routing example (the YAML block after its marker)."""
    text = ALERTS_DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- alertmanager-example -->\n```yaml\n(.*?)```", text, re.DOTALL)
    assert match, "docs/alerts.md has the Alertmanager example"
    return match[1]


@contextmanager
def serving(body: str) -> Iterator[int]:
    """An HTTP server on a free loopback port answering every GET with `body`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def ready(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return int(resp.status) == 200


def wait_for(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        try:
            if check():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_SECONDS} s: {what}")
        time.sleep(0.5)


@contextmanager
def running_alertmanager(workdir: Path, config: str) -> Iterator[str]:
    """Alertmanager with `config` on a free loopback port, gossip off; yields its URL."""
    binary = require_binary("prometheus-alertmanager")
    config_file = workdir / "alertmanager.yml"
    config_file.write_text(config, encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (workdir / "alertmanager.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config_file}",
                f"--storage.path={workdir / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for("Alertmanager ready", lambda: ready(f"{url}/-/ready"))
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def prometheus_config(node_port: int, host_port: int, am_port: str, rules: list[Path]) -> str:
    labels = ", ".join(f"{k}: {v}" for k, v in AGENT_POD_LABELS.items())
    listed = "".join(f"  - {path}\n" for path in rules)
    return (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n{listed}"
        "alerting:\n  alertmanagers:\n"
        f"    - static_configs:\n        - targets: ['127.0.0.1:{am_port}']\n"
        "scrape_configs:\n  - job_name: gpuwatch\n    honor_labels: true\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{node_port}']\n        labels: {{{labels}}}\n"
        f"      - targets: ['127.0.0.1:{host_port}']\n"
    )


@dataclass(frozen=True)
class Received:
    """What Alertmanager holds once the idle, held and allocated-idle alerts arrived."""

    alerts: dict[str, dict[str, Any]]
    """Alertmanager's alerts keyed by "alertname host" (host: node, else instance)."""
    node_address: str
    """The node agent's scrape address: its "pod IP"."""
    host_address: str
    """The plain host's scrape address: its instance."""


@pytest.fixture(scope="module")
def received(tmp_path_factory: pytest.TempPathFactory) -> Received:
    workdir = tmp_path_factory.mktemp("alertmanager")
    rules = [
        fast_copy(RECORDING_FILE, workdir / "gpuwatch.rules.yml"),
        fast_copy(ALERTS_FILE, workdir / "gpuwatch-alerts.rules.yml"),
    ]
    found: dict[str, dict[str, Any]] = {}
    with (
        running_alertmanager(workdir, alertmanager_example()) as am_url,
        serving(NODE_EXPOSITION) as node_port,
        serving(HOST_EXPOSITION) as host_port,
    ):
        config = prometheus_config(node_port, host_port, am_url.rsplit(":", 1)[1], rules)
        with running_prometheus(workdir, config):

            def all_arrived() -> bool:
                for alert in get_json(f"{am_url}/api/v2/alerts"):
                    labels = alert["labels"]
                    host = labels.get("node") or labels.get("instance", "")
                    found[f"{labels['alertname']} {host}"] = alert
                wanted = {
                    "GpuwatchGpuIdle gpu-node-1",
                    "GpuwatchGpuAllocatedIdle gpu-node-1",
                    f"GpuwatchGpuHeld 127.0.0.1:{host_port}",
                    "GpuwatchFleetIdleSpendHigh ",
                }
                return wanted <= set(found)

            wait_for("idle, held and allocated-idle alerts in Alertmanager", all_arrived)
    return Received(found, f"127.0.0.1:{node_port}", f"127.0.0.1:{host_port}")


def test_the_docs_example_is_a_valid_alertmanager_config(tmp_path: Path) -> None:
    path = tmp_path / "alertmanager.yml"
    path.write_text(alertmanager_example(), encoding="utf-8")
    result = subprocess.run(
        [require_binary("amtool"), "check-config", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_idle_gpu_on_a_node_arrives_keyed_by_the_node(
    received: Received,
) -> None:
    alert = received.alerts["GpuwatchGpuIdle gpu-node-1"]
    assert alert["labels"] == {
        "alertname": "GpuwatchGpuIdle",
        "severity": "warning",
        "job": "gpuwatch",
        "node": "gpu-node-1",
        "gpu": "0",
        "uuid": "GPU-a0",
        "state": "idle",
    }
    assert not [v for v in alert["labels"].values() if received.node_address in v]
    assert alert["annotations"] == {
        "summary": "GPU 0 on gpu-node-1 is idle",
        "description": "GPU 0 (GPU-a0) on gpu-node-1 has had no process and no activity for "
        "the agent's whole analysis window. It costs $1,234.50/h; idle for 1h 30m 0s.",
        "runbook_url": "docs/alerts.md#gpuwatchgpuidle",
    }
    assert alert["status"]["state"] == "active"
    assert [r["name"] for r in alert["receivers"]] == ["gpu-ops"]


def test_an_allocated_idle_pod_arrives_with_its_workload_labels(
    received: Received,
) -> None:
    """namespace, pod and container are team-b/eval's (honor_labels), not the agent pod's,
    so the docs' route sends it to the namespace's owners."""
    alert = received.alerts["GpuwatchGpuAllocatedIdle gpu-node-1"]
    assert alert["labels"] == {
        "alertname": "GpuwatchGpuAllocatedIdle",
        "severity": "warning",
        "job": "gpuwatch",
        "node": "gpu-node-1",
        "gpu": "1",
        "uuid": "GPU-a1",
        "namespace": "team-b",
        "pod": "eval",
        "container": "eval",
    }
    assert alert["annotations"]["summary"] == (
        "Pod team-b/eval holds GPU 1 on gpu-node-1 and runs nothing on it"
    )
    assert "The GPU costs $1,234.50/h;" in alert["annotations"]["description"]
    assert [r["name"] for r in alert["receivers"]] == ["gpu-owners"]


def test_a_plain_host_keeps_its_instance(received: Received) -> None:
    host = received.host_address
    alert = received.alerts[f"GpuwatchGpuHeld {host}"]
    assert alert["labels"] == {
        "alertname": "GpuwatchGpuHeld",
        "severity": "warning",
        "job": "gpuwatch",
        "instance": host,
        "gpu": "0",
        "uuid": "GPU-b0",
        "state": "held",
    }
    assert alert["annotations"]["summary"] == f"GPU 0 on {host} is held but computes nothing"
    assert "It costs $6.88/h; held for an unknown time." in alert["annotations"]["description"]
    assert [r["name"] for r in alert["receivers"]] == ["gpu-ops"]


def test_no_alert_names_the_agent_pod(received: Received) -> None:
    assert len(received.alerts) >= 3
    for alert in received.alerts.values():
        assert "gpuwatch-abcde" not in alert["labels"].values(), alert["labels"]
        assert received.node_address not in alert["labels"].values(), alert["labels"]


def test_the_fleet_spend_has_thousands_separators(received: Received) -> None:
    """GPU-a0 idle at $1,234.50/h and GPU-b0 held at $6.88/h: over the $100/h threshold.
    Prometheus sends a firing alert's annotations again only after its resend delay (1
    minute), so Alertmanager may hold those of an evaluation that saw node-1 scraped and
    the plain host not yet (GPU-b0 alone stays under the threshold)."""
    alert = received.alerts["GpuwatchFleetIdleSpendHigh "]
    spend, month = {
        "Idle and held GPUs of gpuwatch cost $1,241.38/h": ("$1,241.38/h", "$906,207.40"),
        "Idle and held GPUs of gpuwatch cost $1,234.50/h": ("$1,234.50/h", "$901,185.00"),
    }[alert["annotations"]["summary"]]
    assert (
        f"idle or held cost {spend} together ({month} a month if nothing changes)"
        in (alert["annotations"]["description"])
    )
    assert [r["name"] for r in alert["receivers"]] == ["ops"]
