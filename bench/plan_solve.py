"""How long `gpuwatch.plan.solve` takes on synthetic fleets of 100 and 1,000 units.

A fleet (seeded, reproducible) spreads its units over `namespaces` namespaces (5 % with
no namespace) and six current models (H100 SXM, H200, A100 80GB SXM, A100 40GB PCIe,
L40S, L4). Of the units, 10 % are idle and 5 % held (reclaimed, no GPU); 5 % are
multi-GPU jobs of 2, 4 or 8 GPUs; the rest need 5-95 % of their GPU's memory, 2-95 %
of its SM activity and 2-80 % of its DRAM bandwidth (uniform), 3 % with no activity or
bandwidth reading. The plan uses the default options (10 % headroom, right-sizing's
candidates: every data-centre model, MIG and time-slicing on, the deterministic work
limit and seed of `PlanOptions`, no wall-clock cap: the plan is the same at any load).
"enforceable": no time-sliced class of the plan would overflow a GPU whichever of its
units land together (`solve.unenforceable`, which adds a note when one would).

Target (issue 24): 5,000 GPUs (``--sizes 4250:250``: 4,250 units in 250 namespaces, about
5,000 GPUs with the multi-GPU jobs) with a gap <= 2 % within 30 s. The solve reads one
summary per unit, so the lookback's length (30 days) does not enter it. Wall seconds on
this machine, which other work may share (the load average is printed).

    python bench/plan_solve.py [--seed N] [--sizes UNITS:NAMESPACES,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from benchlib import format_table, machine_info, verdict
from gpuwatch.core.units import HOURS_PER_MONTH
from gpuwatch.plan.model import Activity, PlanOptions, WorkloadNeed
from gpuwatch.plan.solve import solve
from gpuwatch.sizing import GpuCatalog, build_gpu_catalog

MODELS = ("H100-SXM-80GB", "H200-141GB", "A100-SXM-80GB", "A100-PCIe-40GB", "L40S-48GB", "L4-24GB")
SIZES = ((100, 5), (1000, 50))
TARGET_SECONDS = 30.0


def synthetic_fleet(
    units: int, namespaces: int, seed: int, catalog: GpuCatalog
) -> list[WorkloadNeed]:
    """`units` units over `namespaces` namespaces, drawn as the module docstring says."""
    rng = random.Random(seed)
    fleet = []
    for n in range(units):
        gpu = catalog.get(rng.choice(MODELS))
        draw = rng.random()
        activity: Activity = "idle" if draw < 0.10 else "held" if draw < 0.15 else "busy"
        count = rng.choice((2, 4, 8)) if 0.15 <= draw < 0.20 else 1
        uuids = tuple(f"GPU-{n:05d}-{i}" for i in range(count))
        unknown = rng.random() < 0.03
        fleet.append(
            WorkloadNeed(
                key=",".join(uuids),
                label=f"workload-{n}",
                host=f"node-{n // 8:04d}",
                gpu_uuids=uuids,
                current_gpu_id=gpu.id,
                current_usd_per_hour=gpu.rent_usd_per_hour * count,
                activity=activity,
                memory_bytes=gpu.memory_bytes * rng.uniform(0.05, 0.95),
                memory_basis="observed",
                activity_ratio=None if unknown else rng.uniform(0.02, 0.95),
                bandwidth_bytes_per_second=None
                if unknown
                else gpu.memory_bandwidth_bytes_per_second * rng.uniform(0.02, 0.8),
                namespace=None if rng.random() < 0.05 else f"team-{rng.randrange(namespaces):02d}",
            )
        )
    # kernel-busy time as SM activity (the least it can be), with no draw of its own
    return [dataclasses.replace(u, kernel_busy_ratio=u.activity_ratio) for u in fleet]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--sizes",
        default=",".join(f"{u}:{n}" for u, n in SIZES),
        help="fleets as UNITS:NAMESPACES, comma-separated",
    )
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in part.split(":")) for part in args.sizes.split(",")]
    options = PlanOptions()
    info = machine_info()
    print(
        f"{info['date']}, {info['cpu_model']}, {info['cpu_cores']} cores, "
        f"Python {info['python']}, commit {str(info['git_commit'])[:7]}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    catalog = build_gpu_catalog()
    rows = []
    print(f"solver seed {options.seed}, work limit {options.work_limit_nodes} nodes per model")
    for units, namespaces in sizes:
        fleet = synthetic_fleet(units, namespaces, args.seed, catalog)
        started = time.perf_counter()
        plan = solve(fleet, catalog, options)
        seconds = time.perf_counter() - started
        pools = len({need.namespace for need in fleet if not need.reclaimable})
        gpus = sum(len(need.gpu_uuids) for need in fleet)
        rows.append(
            [
                f"{units:,}",
                f"{gpus:,}",
                f"{pools}",
                f"{seconds:.2f}",
                f"{plan.current_usd_per_hour:,.2f}",
                f"{plan.usd_per_hour:,.2f}",
                f"{plan.lower_bound_usd_per_hour:,.2f}",
                f"{plan.gap_ratio:.4%}" if plan.gap_ratio is not None else "-",
                f"{plan.savings_usd_per_hour * HOURS_PER_MONTH:,.0f}",
                verdict(not any("would overflow" in note for note in plan.notes)),
                verdict(seconds <= TARGET_SECONDS) if units >= 1000 else "",
            ]
        )
        for note in plan.notes:
            print(f"  {units} units: {note}")
    headers = [
        "units",
        "GPUs",
        "pools",
        "seconds",
        "now $/h",
        "plan $/h",
        "bound $/h",
        "gap",
        "saves $/month",
        "enforceable",
        f"<= {TARGET_SECONDS:.0f} s",
    ]
    print(format_table(headers, rows))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
