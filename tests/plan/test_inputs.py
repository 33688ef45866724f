"""What the plan reads, read right: GPUs held by one pod at the same time are one unit,
from the history file the agent writes (gpuwatch.plan.local, gpuwatch.plan.usage)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.config import Config
from gpuwatch.history.rows import GpuHourRow
from gpuwatch.history.store import HISTORY_FILE, HistoryStore
from gpuwatch.plan import local, prometheus
from gpuwatch.plan.make import make_plan
from gpuwatch.plan.model import PlanOptions
from gpuwatch.plan.prometheus import disjoint_points
from gpuwatch.plan.render import render_json, render_text
from gpuwatch.plan.usage import robust_peak, workload_needs
from gpuwatch.promapi.client import PrometheusOptions
from gpuwatch.sizing import build_gpu_catalog
from tests.conftest import free_port

H100 = "NVIDIA H100 80GB HBM3"
GIB = 1024**3
START = 1_767_225_600  # 2026-01-01 00:00 UTC
HOUR = 3600


def hour_row(index: int, hour: int, pods: tuple[str, ...], **changes: object) -> GpuHourRow:
    """A busy GPU-hour of GPU `index` of node-1 held by `pods` (all other figures plain)."""
    row: dict[str, object] = {
        "uuid": f"GPU-{index}",
        "hour_start": START + hour * HOUR,
        "host": "node-1",
        "gpu_index": index,
        "name": H100,
        "observed_seconds": 3600.0,
        "cost_usd": 4.0,
        "busy_seconds": 3600.0,
        "idle_seconds": 0.0,
        "held_seconds": 0.0,
        "unknown_seconds": 0.0,
        "busy_cost_usd": 4.0,
        "idle_cost_usd": 0.0,
        "held_cost_usd": 0.0,
        "unknown_cost_usd": 0.0,
        "last_seconds": START + hour * HOUR + 3599.0,
        "pending_state_seconds": 0.0,
        "busy_state_seconds": 3600.0,
        "idle_state_seconds": 0.0,
        "held_state_seconds": 0.0,
        "underutilized_state_seconds": 0.0,
        "energy_joules": None,
        "memory_peak_bytes": 60.0 * GIB,
        "dram_peak_ratio": 0.3,
        "memory_byte_seconds": 0.0,
        "memory_seconds": 0.0,
        "activity_seconds": 1800.0,
        "activity_sampled_seconds": 3600.0,
        "price_usd_per_hour": 4.0,
        "price_source": "test",
        "recommended_gpu": None,
        "savings_usd_per_hour": None,
        "first_seconds": START + hour * HOUR,
        "recommended_rule": None,
        "need_bytes": None,
        "need_p95_bytes": None,
        "need_basis": None,
        "pods": json.dumps(sorted(pods)),
        "kernel_busy_seconds": 2700.0,
        "kernel_busy_sampled_seconds": 3600.0,
    }
    row.update(changes)
    return row  # type: ignore[return-value]


def write_history(state_dir: Path, rows: list[GpuHourRow]) -> None:
    store = HistoryStore(state_dir / HISTORY_FILE)
    try:
        store.write(rows)
    finally:
        store.close()


def test_a_rescheduled_two_gpu_pod_is_one_two_gpu_unit(tmp_path: Path) -> None:
    """`train-a` holds GPUs 0 and 1 for 10 hours; rescheduled, its successor `train-b`
    holds GPUs 1 and 2 for the next 20 (GPU 0 idle then). Over the lookback GPU 0 saw
    {train-a}, GPU 1 {train-a, train-b}, GPU 2 {train-b}: three pod sets, which made three
    single-GPU units. At each hour one pod held two GPUs together: one unit of 2 GPUs (the
    most held at once), whose 3 GPUs cost today."""
    rows = [hour_row(i, h, ("team-a/train-a",)) for h in range(10) for i in (0, 1)]
    rows += [hour_row(i, h, ("team-a/train-b",)) for h in range(10, 30) for i in (1, 2)]
    rows += [
        hour_row(
            0,
            h,
            (),
            busy_state_seconds=0.0,
            idle_state_seconds=3600.0,
            activity_seconds=0.0,
            memory_peak_bytes=0.0,
        )
        for h in range(10, 30)
    ]
    rows += [hour_row(3, h, ("team-b/solo",)) for h in range(30)]
    write_history(tmp_path, rows)
    usages = local.load_usage(tmp_path, START, START + 30 * HOUR)
    needs = workload_needs(usages, build_gpu_catalog())
    assert [(n.gpu_uuids, n.gpu_count) for n in needs] == [
        (("GPU-0", "GPU-1", "GPU-2"), 2),
        (("GPU-3",), 1),
    ]
    job = needs[0]
    assert job.pods == ("team-a/train-a", "team-a/train-b")
    assert job.gpus_now == 3
    assert job.current_usd_per_hour == 3 * 4.0
    config = Config.model_validate({"agent": {"state_dir": str(tmp_path)}})
    report = make_plan(config, PlanOptions(), days=30 / 24, end_epoch=START + 30 * HOUR)
    unit = json.loads(render_json(report))["workloads"][0]
    assert (len(unit["gpu_uuids"]), unit["gpus_needed"]) == (3, 2)
    groups = [p for p in report.plan.placements if job.key in p.units]
    assert len(groups) == 2, "placed on 2 GPUs, not 3"


def test_two_single_gpu_pods_sharing_gpus_over_time_stay_apart(tmp_path: Path) -> None:
    """`nb-1` on GPU 0 then on GPU 1, `nb-2` on GPU 1 then GPU 0: no pod ever held two
    GPUs at once, so two single-GPU units, whatever the pod sets over the lookback."""
    rows = [hour_row(0, h, ("team-a/nb-1",)) for h in range(5)]
    rows += [hour_row(1, h, ("team-a/nb-2",)) for h in range(5)]
    rows += [hour_row(1, h, ("team-a/nb-1",)) for h in range(5, 10)]
    rows += [hour_row(0, h, ("team-a/nb-2",)) for h in range(5, 10)]
    write_history(tmp_path, rows)
    needs = workload_needs(
        local.load_usage(tmp_path, START, START + 10 * HOUR), build_gpu_catalog()
    )
    assert [(n.gpu_uuids, n.gpu_count) for n in needs] == [(("GPU-0",), 1), (("GPU-1",), 1)]


def test_one_bad_hour_cannot_set_the_months_need(tmp_path: Path) -> None:
    """GPU 0's server measured 20 GiB every hour but one, where a bad scrape said 70 GiB:
    the largest hourly need was 70 GiB, which sized the unit for the month. The plan takes
    the second-largest hourly peak, which one sample (it lands in one hour) cannot move:
    20 GiB. Two hours at 30 GiB are two hours: they set it (30 GiB)."""
    measured = {"need_basis": "measured", "memory_peak_bytes": 72.0 * GIB}
    rows = [hour_row(0, h, (), need_bytes=20.0 * GIB, **measured) for h in range(30) if h != 7]
    rows.append(hour_row(0, 7, (), need_bytes=70.0 * GIB, **measured))
    rows += [hour_row(1, h, (), need_bytes=20.0 * GIB, **measured) for h in range(28)]
    rows += [hour_row(1, h, (), need_bytes=30.0 * GIB, **measured) for h in (28, 29)]
    write_history(tmp_path, rows)
    needs = workload_needs(
        local.load_usage(tmp_path, START, START + 30 * HOUR), build_gpu_catalog()
    )
    assert [(n.memory_bytes, n.memory_basis) for n in needs] == [
        (20.0 * GIB, "measured"),
        (30.0 * GIB, "measured"),
    ]


def test_the_history_gives_each_unit_its_kernel_busy_time(tmp_path: Path) -> None:
    """GPU 0's hours: SM activity 50 % (1,800 of 3,600 s) but kernels running 75 % of the
    time (2,700 of 3,600 s) in 19 hours and 100 % in one: the 95th percentile of the 20
    hourly means is 0.75 + 0.05 x 19 x 0.25 = 0.9875 (rank 18.05: 0.75 + 0.05 x 0.25).
    GPU 1's hours were written before schema 9 (no utilization seconds): unknown."""
    rows = [hour_row(0, h, ()) for h in range(19)]
    rows.append(hour_row(0, 19, (), kernel_busy_seconds=3600.0))
    rows += [
        hour_row(1, h, (), kernel_busy_sampled_seconds=0.0, kernel_busy_seconds=0.0)
        for h in range(20)
    ]
    write_history(tmp_path, rows)
    needs = workload_needs(
        local.load_usage(tmp_path, START, START + 20 * HOUR), build_gpu_catalog()
    )
    assert [n.activity_ratio for n in needs] == [0.5, 0.5]
    assert needs[0].kernel_busy_ratio == pytest.approx(0.75 + 0.05 * 0.25)
    assert needs[1].kernel_busy_ratio is None


def test_a_need_above_the_gpus_own_memory_is_a_measurement_error(tmp_path: Path) -> None:
    """GPU 0, an H100 80GB (NVML: 81,559 MiB), reported 90 GiB used in several hours: no
    GPU of that model can hold it, so it is a measurement error, shown in the plan, and
    the unit keeps its GPU (need unknown) rather than being sized from it."""
    rows = [hour_row(0, h, (), memory_peak_bytes=90.0 * GIB) for h in range(5)]
    rows += [hour_row(1, h, (), memory_peak_bytes=10.0 * GIB) for h in range(5)]
    write_history(tmp_path, rows)
    config = Config.model_validate({"agent": {"state_dir": str(tmp_path)}})
    report = make_plan(config, PlanOptions(), days=5 / 24, end_epoch=START + 5 * HOUR)
    error, fine = report.needs
    assert error.memory_bytes is None
    assert error.memory_basis is None
    assert error.memory_error_bytes == 90.0 * GIB
    assert fine.memory_bytes == 10.0 * GIB
    assert error.key in report.plan.unplaced
    text = render_text(report)
    assert "measurement error" in text
    assert "90.0 GiB" in text
    assert json.loads(render_json(report))["workloads"][0]["memory_error_bytes"] == 90.0 * GIB


def test_from_prometheus_one_bad_sample_in_the_agents_24_hour_maximum_cannot_set_the_need() -> None:
    """The agent exports its need as the maximum over its 24-hour lookback: a 70 GiB
    sample at hour 30 of 72 shows in every hourly value from hour 30 to 53, so the
    second-largest hourly value is 70 GiB too. Points 24.4 hours apart (a lookback and
    one of its 60 buckets) share no sample: hours 71, 46 and 21, of which only one holds
    the bad sample; the second-largest is 20 GiB."""
    hourly = {float(h * HOUR): (70.0 if 30 <= h < 54 else 20.0) * GIB for h in range(72)}
    assert robust_peak(hourly.values()) == 70.0 * GIB
    points = disjoint_points(hourly, 86400.0)
    assert points == [20.0 * GIB, 70.0 * GIB, 20.0 * GIB]  # hours 71, 46, 21
    assert robust_peak(points) == 20.0 * GIB


class _Api(ThreadingHTTPServer):
    answers: dict[str, dict[str, Any]]


class _Handler(BaseHTTPRequestHandler):
    """A Prometheus HTTP API answering each query by the metric it names."""

    server: _Api

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        query = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))["query"]
        data: dict[str, Any] = next(
            (answer for name, answer in self.server.answers.items() if name in query),
            {"resultType": "matrix" if "h] @" in query else "vector", "result": []},
        )
        if "quantile_over_time" in query:
            data = {"resultType": "vector", "result": []}
        payload = json.dumps({"status": "success", "data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_from_prometheus_a_rescheduled_two_gpu_pod_is_one_unit() -> None:
    """The same job as from the history, as Prometheus answers
    `max_over_time(gpuwatch_gpu_pod_info[1h])[w:1h]`: one series per (GPU, pod) with a
    sample at the end of each hour the pod held the GPU."""
    at = float(START + 30 * HOUR)
    labels = {"host": "node-1", "name": H100}

    def series(uuid: str, pod: str, hours: range) -> dict[str, Any]:
        metric = {**labels, "uuid": uuid, "namespace": "team-a", "pod": pod}
        return {"metric": metric, "values": [[START + (h + 1) * HOUR, "1"] for h in hours]}

    pods = [series(f"GPU-{i}", "train-a", range(10)) for i in (0, 1)]
    pods += [series(f"GPU-{i}", "train-b", range(10, 30)) for i in (1, 2)]
    info: list[dict[str, Any]] = [
        {"metric": {**labels, "uuid": f"GPU-{i}", "gpu": str(i)}, "value": [at, "1"]}
        for i in range(3)
    ]
    api = _Api(("127.0.0.1", free_port()), _Handler)
    api.answers = {
        "gpuwatch_gpu_pod_info": {"resultType": "matrix", "result": pods},
        "gpuwatch_gpu_info": {"resultType": "vector", "result": info},
    }
    thread = threading.Thread(target=api.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{api.server_address[1]}"
        usages = prometheus.load_usage(PrometheusOptions(url, scrape_interval_seconds=60), 1.25, at)
    finally:
        api.shutdown()
        api.server_close()
        thread.join()
    needs = workload_needs(usages, build_gpu_catalog())
    assert [(n.gpu_uuids, n.gpu_count) for n in needs] == [(("GPU-0", "GPU-1", "GPU-2"), 2)]
    assert needs[0].pods == ("team-a/train-a", "team-a/train-b")
