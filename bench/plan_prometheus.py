"""Benchmark: `gpuwatch plan` for a fleet from a real, backfilled Prometheus.

Generates a synthetic month with the series the plan reads (`tests.support.synthetic`,
`plan_series=True`: four workload classes, one pod per GPU in 50 namespaces; only
`PLAN_FAMILIES` are written), backfills it with `promtool tsdb create-blocks-from
openmetrics --max-block-duration=744h`, starts Debian's prometheus on the blocks with no
scrape target (as bench/report_prometheus.py does), then times, at the period's end,

- `query`: `gpuwatch.plan.prometheus.load_usage` (every query of the lookback),
- `needs`: `gpuwatch.plan.usage.workload_needs` (GPUs to units),
- `solve`: `gpuwatch.plan.solve.solve` with the default `PlanOptions` (its 20 s limit;
  `--time-limit` to see what a shorter or longer one changes),

and `total`, their sum; and, as the baseline in the same run, one plain
`max_over_time(gpuwatch_gpu_required_memory_bytes[Nd])` instant query (one of the plan's
ten: a single selection over the lookback, no subquery). Then each of the plan's queries
alone, to show which dominates. The table's plan, bound and gap are the last run's (the
others' are printed below it); `now $/h` is the synthetic fleet's own price (2.00-4.22 $/h
an H100), the plan's GPUs are priced from the catalog.

It checks the plan's input and output: one unit per GPU, every GPU's memory basis and
need, SM activity and DRAM ratio as its class wrote them (`PLAN_CLASSES`), one pool per
namespace (`team-<host % 50>`), every unit placed exactly once.

    .venv/bin/python bench/plan_prometheus.py [--hosts 250] [--gpus 4] [--days 30]
                                              [--interval 300] [--repeat 3] [--data DIR]
                                              [--time-limit 20]

`--data DIR` keeps the backfilled blocks (about 70 MB at the default size) for a rerun.

The default is the issue's size, 1,000 GPUs x 30 days at a 300 s scrape (a 60 s scrape
would write 5x the text; bench/report_prometheus.py says why 300 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from tests.report_prometheus.conftest import backfill, start_prometheus, stop
from tests.support.synthetic import (
    PLAN_FAMILIES,
    SyntheticFleet,
    gpu_uuid,
    plan_class,
    write_fleet,
)

from benchlib import format_table, machine_info, verdict
from gpuwatch.plan.make import fleet_price_overrides
from gpuwatch.plan.model import Plan, PlanOptions, WorkloadNeed
from gpuwatch.plan.prometheus import RANGE_VECTOR_QUERIES, load_usage, queries
from gpuwatch.plan.solve import solve
from gpuwatch.plan.usage import GpuUsage, workload_needs
from gpuwatch.promapi.client import Client, PrometheusOptions
from gpuwatch.sizing import GpuCatalog, build_gpu_catalog

TARGET_SECONDS = 30.0
_TOLERANCE = 1e-9


def per_query(client: Client, fleet: SyntheticFleet) -> list[tuple[str, float]]:
    """Each of the plan's queries alone, one after the other: seconds (request, HTTP, JSON
    decoding and parsing)."""
    out = []
    for name, promql in queries(fleet.days, fleet.end_epoch).items():
        began = time.perf_counter()
        if name in RANGE_VECTOR_QUERIES:
            client.matrix(promql, float(fleet.end_epoch))
        else:
            client.vector(promql, float(fleet.end_epoch))
        out.append((promql, time.perf_counter() - began))
    return out


def check(
    fleet: SyntheticFleet, usages: list[GpuUsage], needs: list[WorkloadNeed], plan: Plan
) -> int:
    """Fail unless the plan read every GPU as its class wrote it; the number of pools."""
    gpus = fleet.hosts * fleet.gpus_per_host
    if len(usages) != gpus or len(needs) != gpus:
        raise SystemExit(f"expected {gpus} GPUs and units, read {len(usages)}, {len(needs)}")
    by_uuid = {need.key: need for need in needs}
    h100 = build_gpu_catalog().get("H100-SXM-80GB")  # the synthetic fleet's model
    for host in range(fleet.hosts):
        for gpu in range(fleet.gpus_per_host):
            need = by_uuid[gpu_uuid(host, gpu)]
            name, activity, dram, measured_gib = plan_class(host, gpu)
            basis = "observed" if measured_gib is None else "measured"
            ok = (
                need.memory_basis == basis
                and need.activity == "busy"
                and need.namespace == f"team-{host % 50}"
                and need.pods == (f"team-{host % 50}/w-{host}-{gpu}",)
                and need.activity_ratio is not None
                and abs(need.activity_ratio - activity) <= _TOLERANCE
                and need.current_gpu_id == h100.id
                and need.bandwidth_bytes_per_second is not None
                and abs(
                    need.bandwidth_bytes_per_second / h100.memory_bandwidth_bytes_per_second - dram
                )
                <= _TOLERANCE
                and (measured_gib is None or need.memory_bytes == measured_gib * 2**30)
            )
            if not ok:
                raise SystemExit(f"host {host} GPU {gpu} ({name}) read as {need}")
    pools = {need.namespace for need in needs if not need.reclaimable}
    expected = {f"team-{host % 50}" for host in range(fleet.hosts)}
    if pools != expected:
        raise SystemExit(f"pools {sorted(map(str, pools))} != namespaces {sorted(expected)}")
    placed = [key for placement in plan.placements for key in placement.units]
    if sorted(placed + list(plan.unplaced)) != sorted(by_uuid) or plan.reclaimed:
        raise SystemExit("the plan does not place every unit exactly once")
    return len(pools)


def generate(fleet: SyntheticFleet, text: Path, data: Path) -> int:
    """Write the fleet's plan families to `text`, backfill them into `data`; GPU samples."""
    began = time.perf_counter()
    with text.open("w", encoding="utf-8") as out:
        truth = write_fleet(fleet, out, families=PLAN_FAMILIES)
    generated = time.perf_counter() - began
    size = text.stat().st_size
    began = time.perf_counter()
    backfill("promtool", text, data)
    backfilled = time.perf_counter() - began
    text.unlink()
    print(f"generated {size / 1e9:.1f} GB in {generated:.0f} s, "
          f"backfilled in {backfilled:.0f} s", flush=True)  # fmt: skip
    return truth.samples


def run_once(
    options: PrometheusOptions, fleet: SyntheticFleet, catalog: GpuCatalog, limit: float
) -> tuple[dict[str, float], list[GpuUsage], list[WorkloadNeed], Plan]:
    """One plan: seconds per step, and what each step returned."""
    seconds: dict[str, float] = {}
    began = time.perf_counter()
    usages = load_usage(options, fleet.days, fleet.end_epoch)
    seconds["query"] = time.perf_counter() - began
    began = time.perf_counter()
    needs = workload_needs(usages, catalog)
    priced = build_gpu_catalog(fleet_price_overrides(needs))  # as `make_plan` prices it
    seconds["needs"] = time.perf_counter() - began
    began = time.perf_counter()
    plan = solve(needs, priced, PlanOptions(time_limit_seconds=limit))
    seconds["solve"] = time.perf_counter() - began
    seconds["total"] = seconds["query"] + seconds["needs"] + seconds["solve"]
    return seconds, usages, needs, plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=250)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--interval", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--time-limit", type=float, default=PlanOptions().time_limit_seconds, metavar="SECONDS"
    )
    parser.add_argument(
        "--data",
        type=Path,
        help="keep the backfilled blocks in DIR, and reuse them when DIR holds them "
        "(same fleet flags)",
    )
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat: at least 1")
    fleet = SyntheticFleet(
        hosts=args.hosts,
        gpus_per_host=args.gpus,
        start=datetime(2026, 10, 1, tzinfo=UTC),
        days=args.days,
        interval_seconds=args.interval,
        plan_series=True,
    )
    catalog = build_gpu_catalog()
    runs: list[dict[str, float]] = []
    baseline: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as tmp:
        work = Path(tmp)
        kept = args.data / "fleet.json" if args.data is not None else None
        data = work / "data" if args.data is None else args.data / "blocks"
        size = {"hosts": args.hosts, "gpus": args.gpus, "days": args.days,
                "interval": args.interval}  # fmt: skip
        if kept is not None and kept.is_file():
            known = json.loads(kept.read_text())
            if {key: known.get(key) for key in size} != size:
                raise SystemExit(f"{args.data} holds another fleet: {known}")
            samples = int(known["samples"])
            print(f"reusing the blocks in {data}")
        else:
            samples = generate(fleet, work / "fleet.om", data)
            if kept is not None:
                kept.write_text(json.dumps({**size, "samples": samples}))
        url, proc = start_prometheus(data, work)
        try:
            options = PrometheusOptions(url)
            # the baseline's client lives through every run: its deadline is the bench's
            client = Client(PrometheusOptions(url, timeout_seconds=86400.0))
            lookback = f"[{fleet.days * 86400}s] @ {fleet.end_epoch:.3f}"
            plain = f"max_over_time(gpuwatch_gpu_required_memory_bytes{lookback})"
            load_usage(options, fleet.days, fleet.end_epoch)  # warm the page cache once
            for _ in range(args.repeat):  # alternated, so a noisy neighbour hits both
                seconds, usages, needs, plan = run_once(options, fleet, catalog, args.time_limit)
                seconds["gap"] = plan.gap_ratio or 0.0
                seconds["plan"] = plan.usd_per_hour
                runs.append(seconds)
                began = time.perf_counter()
                client.vector(plain, float(fleet.end_epoch))
                baseline.append(time.perf_counter() - began)
            alone = per_query(client, fleet)
        finally:
            stop(proc)
    pools = check(fleet, usages, needs, plan)
    info = machine_info()
    print(f"machine: {info['cpu_model']}, {info['cpu_cores']} cores, {info['date']}, "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"commit: {str(info['git_commit'])[:7]}{' (modified)' if info['git_src_dirty'] else ''}")
    print(f"fleet: {len(usages)} GPUs x {args.days} days, {args.interval} s scrape, "
          f"{samples} GPU samples")  # fmt: skip
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    base = statistics.median(baseline)
    gap = "-" if plan.gap_ratio is None else f"{plan.gap_ratio:.4%}"
    rows = [[
        f"{len(needs):,}", f"{pools}", f"{median['query']:.2f}", f"{median['needs']:.2f}",
        f"{median['solve']:.2f}", f"{median['total']:.2f}", f"{plan.current_usd_per_hour:,.2f}",
        f"{plan.usd_per_hour:,.2f}", f"{plan.lower_bound_usd_per_hour:,.2f}", gap,
        f"{base:.3f}", f"{median['total'] / base:.0f}x",
        verdict(median["total"] <= TARGET_SECONDS),
    ]]  # fmt: skip
    headers = ["units", "pools", "query s", "needs s", "solve s", "total s", "now $/h",
               "plan $/h", "bound $/h", "gap", "baseline s", "total/baseline",
               f"<= {TARGET_SECONDS:.0f} s"]  # fmt: skip
    print(format_table(headers, rows))
    for key in ("query", "solve", "total"):
        print(f"{key}: " + ", ".join(f"{run[key]:.2f}" for run in runs) + " s")
    print("plan $/h: " + ", ".join(f"{run['plan']:,.2f}" for run in runs))
    print("gap: " + ", ".join(f"{run['gap']:.2%}" for run in runs))
    kinds = Counter((p.gpu_id, p.mode) for p in plan.placements)
    print("GPUs of the plan: " + ", ".join(f"{n} {gpu} {mode}" for (gpu, mode), n in
                                           sorted(kinds.items())))  # fmt: skip
    print("baseline: " + ", ".join(f"{t:.3f}" for t in baseline) + f" s ({plain})")
    print("the plan's queries, each alone (load_usage runs them 4 at a time):")
    for promql, took in alone:
        print(f"  {took:6.2f} s  {promql}")
    for note in plan.notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
