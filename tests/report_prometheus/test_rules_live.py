"""Live: a real Prometheus scrapes a real agent every second and evaluates the shipped
report rules at a short window; the report for today is the same with and without them.

The variant is the shipped file with its durations substituted (SHORT, longest first),
so the expressions evaluated here are the shipped ones: 10 s windows read 3 s late, live
evaluation phase and live ingestion delays included.
"""

from __future__ import annotations

import math
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuwatch.promapi.client import Client, PrometheusOptions
from gpuwatch.report.model import Period
from gpuwatch.report.prometheus import load
from gpuwatch.report.prometheus_rules import HEARTBEAT
from tests.agent_process import start_agent
from tests.conftest import free_port, require_binary
from tests.report_prometheus.conftest import RULES_FILE, start, stop

SHORT = (("1h5m", "13s"), ("59m59s999ms", "9s999ms"), ("1h", "10s"), ("5m", "3s"))
"""Shipped duration -> live-test duration: window 1h -> 10s, offset and overlap 5m -> 3s,
window + offset 1h5m -> 13s, window less 1 ms 59m59s999ms -> 9s999ms."""
RUN_SECONDS = 45


def short_rules(text: str) -> str:
    """The shipped rules file with every duration of SHORT substituted."""
    for old, new in SHORT:
        assert old in text, old
        text = text.replace(old, new)
    return text


@pytest.fixture(scope="module")
def live_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir: Path = tmp_path_factory.mktemp("prometheus-live-rules")
    (workdir / "report.rules.yml").write_text(short_rules(RULES_FILE.read_text()))
    agent_port = free_port()
    agent = start_agent(["--simulate", "demo", "--speed", "10"], agent_port)
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "rule_files: [report.rules.yml]\n"
        "scrape_configs:\n  - job_name: gpuwatch\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{agent_port}']\n"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        require_binary("prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    proc = start(argv, url, "/-/ready", workdir / "prometheus.log")
    try:
        yield url
    finally:
        stop(proc)
        agent.send_signal(signal.SIGTERM)
        try:
            agent.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.communicate()


def test_short_rules_still_check(tmp_path: Path) -> None:
    variant = tmp_path / "short.rules.yml"
    variant.write_text(short_rules(RULES_FILE.read_text()))
    subprocess.run([require_binary("promtool"), "check", "rules", str(variant)], check=True,
                   capture_output=True)  # fmt: skip


def test_live_rules_report_equals_the_raw_report(live_url: str) -> None:
    time.sleep(RUN_SECONDS)
    end = math.floor(time.time()) - 4  # scrapes up to `end` ingested, windows evaluated
    day = datetime.fromtimestamp(end - 120, UTC).replace(hour=0, minute=0, second=0)
    period = Period(day, datetime.fromtimestamp(end, UTC), "today", month_to_date=True)
    with_rules = load(PrometheusOptions(live_url, rules="on"), period)
    raw = load(PrometheusOptions(live_url, rules="off"), period)
    beats = Client(PrometheusOptions(live_url)).matrix(f"{HEARTBEAT}[1m] @ {end}", end)
    assert sum(len(s) for s in beats.values()) >= 3, "the group evaluated several windows"
    assert any("recording rules" in note for note in with_rules.notes), with_rules.notes
    assert with_rules.gpu_days, "the agent's GPUs were scraped"
    assert any(g.memory_peak_bytes for g in with_rules.gpu_days)
    assert with_rules.gpu_days == raw.gpu_days
    assert with_rules.token_days == raw.token_days
    assert with_rules.expected_gpu_seconds == raw.expected_gpu_seconds
