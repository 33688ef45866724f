"""Benchmark: a fleet report from a real, backfilled Prometheus, against Prometheus itself.

Generates a synthetic month (`tests.support.synthetic`), backfills it with `promtool
tsdb create-blocks-from openmetrics --max-block-duration=744h`, starts Debian's
prometheus on the blocks with no scrape target, then times

- `report`: `gpuwatch.report.prometheus.load()` for the whole period from the raw series
  (`--prometheus-rules off`),
- with `--rules`: the shipped report rules (deploy/prometheus/gpuwatch-report.rules.yml)
  backfilled over the month by `promtool tsdb create-blocks-from rules` and served with
  the raw blocks, then `load()` with `--prometheus-rules on` too (checked equal to the raw
  report, GPU-day for GPU-day), and
- `baseline`: the same number of days x counters as plain `increase(metric[1d] @ end)`
  instant queries, with the same parallelism: what Prometheus itself takes to read the
  counters over the month, so the ratio says what the report's exact method costs.

For each timed run it also reads Prometheus's own `prometheus_engine_query_duration_seconds`
sums (slices `prepare_time`, the sample selection, and `inner_eval`, the evaluation)
before and after: the server's share of the work, summed over concurrent queries, apart
from the client's HTTP, JSON and Python.

    .venv/bin/python bench/report_prometheus.py [--hosts 250] [--gpus 4] [--interval 300]
                                                [--rules]

The default is the issue's size, 1,000 GPUs x 31 days, at a 300 s scrape: at 60 s the
OpenMetrics text alone would be about 90 GB (18 GB at 300 s) and its backfill half an
hour on a 2-core machine. docs/benchmarks.md gives the size each recorded run used.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.report_prometheus.conftest import (
    RULES_FILE,
    backfill,
    backfill_rules,
    join_blocks,
    start_prometheus,
    stop,
)
from tests.support.synthetic import SyntheticFleet, write_fleet

from benchlib import machine_info
from gpuwatch.core.units import DAY_SECONDS
from gpuwatch.promapi.client import Client, PrometheusOptions
from gpuwatch.report.model import Period
from gpuwatch.report.prometheus import load
from gpuwatch.report.prometheus_queries import COUNTERS

ENGINE_SLICES = ("prepare_time", "inner_eval")


def engine_seconds(url: str) -> float:
    """Prometheus's summed query engine time so far (selection + evaluation), seconds."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("prometheus_engine_query_duration_seconds_sum{") and any(
            f'slice="{s}"' in line for s in ENGINE_SLICES
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=250)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--interval", type=int, default=300)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rules", action="store_true", help="also time the recording rules")
    args = parser.parse_args()
    fleet = SyntheticFleet(
        hosts=args.hosts,
        gpus_per_host=args.gpus,
        start=datetime(2026, 10, 1, tzinfo=UTC),
        days=args.days,
        interval_seconds=args.interval,
    )
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        work = Path(tmp)
        began = time.perf_counter()
        with (work / "fleet.om").open("w", encoding="utf-8") as out:
            truth = write_fleet(fleet, out)
        generated = time.perf_counter() - began
        began = time.perf_counter()
        backfill("promtool", work / "fleet.om", work / "data")
        backfilled = time.perf_counter() - began
        (work / "fleet.om").unlink()
        url, proc = start_prometheus(work / "data", work)
        rules_backfilled = 0.0
        if args.rules:
            began = time.perf_counter()
            span = (fleet.start_epoch - 3600, fleet.end_epoch + 3600)
            backfill_rules("promtool", url, RULES_FILE, *span, work / "rules", RULES_FILE.name)
            rules_backfilled = time.perf_counter() - began
            stop(proc)
            (work / "with-rules").mkdir()
            data_dir = join_blocks([work / "data", work / "rules"], work / "with-rules" / "data")
            url, proc = start_prometheus(data_dir, work / "with-rules")
        try:
            period = Period(fleet.start, datetime.fromtimestamp(fleet.end_epoch, UTC), "bench")
            options = PrometheusOptions(url, parallel_queries=args.parallel, rules="off")
            with_rules = PrometheusOptions(url, parallel_queries=args.parallel, rules="on")
            # the baseline's client lives through every run: its deadline is the bench's
            client = Client(PrometheusOptions(url, timeout_seconds=86400.0))
            ends = [fleet.start_epoch + (d + 1) * DAY_SECONDS for d in range(fleet.days)]
            queries = [(f"increase({m}[1d] @ {t}.000)", float(t)) for m in COUNTERS.values()
                       for t in ends]  # fmt: skip
            load(options, period)  # warm the page cache once, as a rerun would be
            if args.rules:
                load(with_rules, period)
            report_times: list[float] = []
            rules_times: list[float] = []
            baseline_times: list[float] = []
            server: dict[str, list[float]] = {"report": [], "rules": [], "baseline": []}
            for _ in range(args.repeat):  # alternated, so a noisy neighbour hits all
                engine, began = engine_seconds(url), time.perf_counter()
                data = load(options, period)
                report_times.append(time.perf_counter() - began)
                server["report"].append(engine_seconds(url) - engine)
                if args.rules:
                    engine, began = engine_seconds(url), time.perf_counter()
                    ruled = load(with_rules, period)
                    rules_times.append(time.perf_counter() - began)
                    server["rules"].append(engine_seconds(url) - engine)
                    if ruled.gpu_days != data.gpu_days or ruled.token_days != data.token_days:
                        raise SystemExit("the report with rules differs from the raw report")
                engine, began = engine_seconds(url), time.perf_counter()
                with ThreadPoolExecutor(args.parallel) as pool:
                    list(pool.map(lambda q: client.vector(*q), queries))
                baseline_times.append(time.perf_counter() - began)
                server["baseline"].append(engine_seconds(url) - engine)
        finally:
            stop(proc)
    gpus = args.hosts * args.gpus
    info = machine_info()
    print(f"machine: {info['cpu_model']}, {info['cpu_cores']} cores, {info['date']}")
    print(f"commit: {info['git_commit']}")
    print(
        f"fleet: {gpus} GPUs x {args.days} days, {args.interval} s scrape, {truth.samples} samples"
    )
    print(f"generate {generated:.1f} s, backfill {backfilled:.1f} s", end="")
    print(f", rules backfill {rules_backfilled:.1f} s" if args.rules else "")
    report_s, baseline_s = statistics.median(report_times), statistics.median(baseline_times)
    runs = ", ".join(f"{t:.2f}" for t in report_times)
    print(f"report (no recording rules): median {report_s:.2f} s ({runs}), "
          f"{len(data.gpu_days)} GPU-days")  # fmt: skip
    runs = ", ".join(f"{t:.2f}" for t in baseline_times)
    print(f"baseline increase() x {len(queries)}: median {baseline_s:.2f} s ({runs})")
    print(f"ratio: {report_s / baseline_s:.2f}x")
    if rules_times:
        rules_s = statistics.median(rules_times)
        runs = ", ".join(f"{t:.2f}" for t in rules_times)
        print(f"report (recording rules): median {rules_s:.2f} s ({runs}), "
              f"ratio {rules_s / baseline_s:.2f}x, identical to the raw report")  # fmt: skip
    for name, seconds in server.items():
        if seconds:
            print(f"Prometheus engine time, {name}: median {statistics.median(seconds):.2f} s")


if __name__ == "__main__":
    main()
