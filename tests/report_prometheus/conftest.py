"""One synthetic month, backfilled into the real Debian Prometheus and VictoriaMetrics.

Session-scoped: the fleet is generated once, `promtool tsdb create-blocks-from
openmetrics` writes its blocks, and a Prometheus with no scrape target serves them; a
VictoriaMetrics on a temporary storage directory gets the same samples through
`/api/v1/import/prometheus`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuwatch.report.synthetic import SyntheticFleet, Truth, write_fleet
from tests.conftest import free_port, require_binary

FLEET = SyntheticFleet(
    hosts=3, gpus_per_host=2, start=datetime(2026, 10, 1, tzinfo=UTC), days=3, interval_seconds=60
)
START_TIMEOUT_SECONDS = 60
RULES_FILE = Path(__file__).resolve().parents[2] / "deploy/prometheus/gpuwatch-report.rules.yml"


@dataclass(frozen=True)
class Month:
    """The generated month: its files and its exact truth."""

    fleet: SyntheticFleet
    truth: Truth
    openmetrics: Path
    prometheus_text: Path


@pytest.fixture(scope="session")
def month(tmp_path_factory: pytest.TempPathFactory) -> Month:
    workdir = tmp_path_factory.mktemp("synthetic")
    om = workdir / "fleet.om"
    text = workdir / "fleet.prom"
    with om.open("w", encoding="utf-8") as out:
        truth = write_fleet(FLEET, out, "openmetrics")
    with text.open("w", encoding="utf-8") as out:
        write_fleet(FLEET, out, "prometheus")
    return Month(FLEET, truth, om, text)


def wait_ready(
    url: str, proc: subprocess.Popen[bytes], log: Path, user: tuple[str, str] | None = None
) -> None:
    """Poll `url` until it answers 200, failing with the server's log if it exits."""
    headers = {}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(user).encode()).decode()
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {log.read_text()[-2000:]}")
        try:
            request = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(request, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} not ready: {log.read_text()[-2000:]}")
        time.sleep(0.2)


def start(
    argv: list[str], url: str, ready_path: str, log: Path, user: tuple[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a server and wait until `ready_path` answers."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    wait_ready(url + ready_path, proc, log, user)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def backfill(promtool: str, source: Path, data: Path) -> None:
    """`promtool tsdb create-blocks-from openmetrics` into `data` (a month in a few blocks)."""
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=744h",
         str(source), str(data)],
        check=True, capture_output=True,
    )  # fmt: skip


def start_prometheus(
    data: Path,
    workdir: Path,
    extra: tuple[str, ...] | list[str] = (),
    ready_user: tuple[str, str] | None = None,
) -> tuple[str, subprocess.Popen[bytes]]:
    """A Prometheus with no scrape target serving the blocks in `data`."""
    config = workdir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        require_binary("prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        "--storage.tsdb.retention.time=100y",
        f"--web.listen-address=127.0.0.1:{port}",
        *extra,
    ]
    return url, start(argv, url, "/-/ready", workdir / "prometheus.log", ready_user)


@pytest.fixture(scope="session")
def prometheus_blocks(month: Month, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("prometheus-blocks") / "data"
    backfill(require_binary("promtool"), month.openmetrics, data)
    return data


def backfill_rules(  # noqa: PLR0917
    promtool: str, url: str, rules: Path, start: int, end: int, out: Path, name: str
) -> None:
    """`promtool tsdb create-blocks-from rules`: evaluate `rules` against the Prometheus at
    `url` from `start` to `end` (Unix seconds), blocks into `out`.

    Like a live Prometheus, promtool evaluates a group at a phase hashed from its file name
    and group name: the file is copied to `out/name` and named relatively, so the phase is
    the same on every checkout (see PHASES)."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(rules, out / name)
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "rules", f"--start={start}", f"--end={end}",
         f"--url={url}", "--output-dir=.", name],
        check=True, capture_output=True, cwd=out,
    )  # fmt: skip


def join_blocks(sources: list[Path], data: Path) -> Path:
    """A data directory holding the blocks (ULID directories) of every source directory,
    hard-linked (Prometheus never rewrites a block's files in place)."""
    data.mkdir(parents=True)
    for source in sources:
        for block in source.iterdir():
            if (block / "meta.json").is_file():
                shutil.copytree(block, data / block.name, copy_function=os.link)
    return data


def rules_prometheus(  # noqa: PLR0917
    month: Month,
    raw_url: str,
    raw_blocks: Path,
    workdir: Path,
    spans: list[tuple[int, int]],
    name: str,
    files: list[Path] | None = None,
) -> tuple[str, subprocess.Popen[bytes]]:
    """A Prometheus serving the raw blocks and the shipped rules (or `files`, one per span)
    backfilled over `spans`."""
    promtool = require_binary("promtool")
    outs = []
    for n, (start, end) in enumerate(spans):
        rules = RULES_FILE if files is None else files[n]
        backfill_rules(promtool, raw_url, rules, start, end, workdir / f"rules-{n}", name)
        outs.append(workdir / f"rules-{n}")
    data = join_blocks([raw_blocks, *outs], workdir / "data")
    return start_prometheus(data, workdir)


@pytest.fixture(scope="session")
def rules_url(
    month: Month,
    prometheus_url: str,
    prometheus_blocks: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """The month with the rules backfilled over all of it (evaluations on the hour)."""
    fleet = month.fleet
    spans = [(fleet.start_epoch - 3600, fleet.end_epoch + 3600)]
    workdir = tmp_path_factory.mktemp("prometheus-rules")
    url, proc = rules_prometheus(month, prometheus_url, prometheus_blocks, workdir, spans,
                                 "gpuwatch-report.rules.yml")  # fmt: skip
    try:
        yield url
    finally:
        stop(proc)


PARTIAL_RULES_NAME = "rules-1.yml"
"""promtool 2.42 evaluates this file name's group 15 min 16 s past the hour, so windows
start 10 min 16 s past: host 0's restart gap (10:00 to 10:20, counters reset) straddles a
window edge and its 5-minute overlap, which only the gap flag of the `resets` rules
catches (tests/report_prometheus/test_rules.py checks the phase)."""


@pytest.fixture(scope="session")
def partial_rules_url(
    month: Month,
    prometheus_url: str,
    prometheus_blocks: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """The month with the rules from 08:00 on day one to 03:00 on day two, and again from
    07:00 on day two to the end: day one partly covered, day two broken."""
    s = month.fleet.start_epoch
    spans = [(s + 8 * 3600, s + 27 * 3600), (s + 31 * 3600, month.fleet.end_epoch + 3600)]
    workdir = tmp_path_factory.mktemp("prometheus-partial-rules")
    url, proc = rules_prometheus(month, prometheus_url, prometheus_blocks, workdir, spans,
                                 PARTIAL_RULES_NAME)  # fmt: skip
    try:
        yield url
    finally:
        stop(proc)


VERSION_1_HEARTBEAT = """groups:
  - name: gpuwatch-report
    interval: 1h
    rules:
      - record: gpuwatch:report_window:heartbeat
        expr: vector(1)
        labels: {window: 1h, offset: 5m, overlap: 5m, version: "1"}
"""
"""The heartbeat of the rule file before the pod counters' rules (version 1): the report
must read the days it alone covers raw, whatever else that group recorded."""


@pytest.fixture(scope="session")
def upgraded_rules_url(
    month: Month,
    prometheus_url: str,
    prometheus_blocks: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """The month with a version-1 rule file's heartbeat until 05:00 on day two and the
    current rules from then on: a server upgraded mid-month."""
    s = month.fleet.start_epoch
    workdir = tmp_path_factory.mktemp("prometheus-upgraded-rules")
    old = workdir / "version-1.rules.yml"
    old.write_text(VERSION_1_HEARTBEAT)
    spans = [(s - 3600, s + 29 * 3600), (s + 29 * 3600, month.fleet.end_epoch + 3600)]
    url, proc = rules_prometheus(month, prometheus_url, prometheus_blocks, workdir, spans,
                                 "gpuwatch-report.rules.yml", [old, RULES_FILE])  # fmt: skip
    try:
        yield url
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def prometheus_url(
    prometheus_blocks: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    url, proc = start_prometheus(prometheus_blocks, tmp_path_factory.mktemp("prometheus"))
    try:
        yield url
    finally:
        stop(proc)


def import_into_victoria(url: str, source: Path) -> None:
    """POST Prometheus text with millisecond timestamps in chunks, then flush for search."""
    chunk: list[str] = []

    def post(lines: list[str]) -> None:
        request = urllib.request.Request(
            f"{url}/api/v1/import/prometheus", data="".join(lines).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status in (200, 204)

    with source.open(encoding="utf-8") as lines:
        for line in lines:
            chunk.append(line)
            if len(chunk) >= 200_000:
                post(chunk)
                chunk = []
    if chunk:
        post(chunk)
    with urllib.request.urlopen(f"{url}/internal/force_flush", timeout=60) as response:
        assert response.status == 200


@pytest.fixture(scope="session")
def victoria_url(month: Month, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("victoria")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        require_binary("victoria-metrics"),
        f"-storageDataPath={workdir / 'data'}",
        "-retentionPeriod=100y",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-search.disableCache",
    ]
    proc = start(argv, url, "/health", workdir / "victoria.log")
    try:
        import_into_victoria(url, month.prometheus_text)
        wait_series(url, month.fleet)
        yield url
    finally:
        stop(proc)


def wait_series(url: str, fleet: SyntheticFleet = FLEET) -> None:
    """Imported rows become searchable after a moment: wait for the cost series."""
    query = urllib.parse.urlencode(
        {
            "match[]": "gpuwatch_gpu_cost_usd_total",
            "start": fleet.start_epoch,
            "end": fleet.end_epoch,
        }
    )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/api/v1/series?{query}", timeout=10) as r:
            if json.loads(r.read())["data"]:
                return
        time.sleep(0.5)
    raise AssertionError("VictoriaMetrics never showed the imported series")
