"""What the plan saves when it buys only what the account can buy (issue 24, item 1).

The 1,000-unit synthetic fleet of `bench/plan_solve.py` (same seed, same draw), planned
three ways with the default options:

- ``catalog``: every data-centre part at the catalog's reference rent, estimates and
  marketplace prices included (the plan before issue 24);
- ``priced``: the default now, no estimated or marketplace price;
- ``aws:us-east-1``: `[billing] region = "us-east-1"`: AWS's GPU instance families at
  their instance types' list prices, parts sold by the node bought by the node.

    python bench/plan_buying.py [--seed N] [--units N] [--time-limit S]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import format_table, machine_info
from gpuwatch.billing.config import BillingConfig
from gpuwatch.core.units import HOURS_PER_MONTH
from gpuwatch.plan.buying import Buying, buyable, price_kind
from gpuwatch.plan.make import fleet_price_overrides, plan_with_policy
from gpuwatch.plan.model import PlanOptions
from gpuwatch.sizing import build_gpu_catalog
from plan_solve import synthetic_fleet


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--units", type=int, default=1000)
    parser.add_argument("--time-limit", type=float, default=20.0)
    args = parser.parse_args()
    info = machine_info()
    print(
        f"{info['date']}, {info['cpu_model']}, {info['cpu_cores']} cores, "
        f"Python {info['python']}, commit {str(info['git_commit'])[:7]}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    reference = build_gpu_catalog()
    fleet = synthetic_fleet(args.units, max(1, args.units // 20), args.seed, reference)
    catalog = build_gpu_catalog(fleet_price_overrides(fleet))
    options = PlanOptions(time_limit_seconds=args.time_limit)
    ways = {
        "catalog": Buying("catalog", catalog),
        "priced": buyable(catalog, fleet, BillingConfig(), None),
        "aws:us-east-1": buyable(catalog, fleet, BillingConfig(region="us-east-1"), None),
    }
    rows = []
    for name, buying in ways.items():
        started = time.perf_counter()
        plan = plan_with_policy(fleet, buying, options)
        seconds = time.perf_counter() - started
        unbuyable = sum(
            p.usd_per_hour
            for p in plan.placements
            if price_kind(buying.catalog.get(p.gpu_id)) in ("estimate", "marketplace")
            and p.gpu_id not in {need.current_gpu_id for need in fleet}
        )
        rows.append(
            [
                name,
                f"{seconds:.1f}",
                f"{plan.current_usd_per_hour:,.2f}",
                f"{plan.usd_per_hour:,.2f}",
                f"{plan.savings_usd_per_hour:,.2f}",
                f"{plan.savings_usd_per_hour * HOURS_PER_MONTH:,.0f}",
                f"{unbuyable:,.2f}",
                f"{plan.gap_ratio:.2%}" if plan.gap_ratio is not None else "-",
            ]
        )
        for note in plan.notes:
            print(f"  {name}: {note}")
    headers = [
        "parts",
        "seconds",
        "now $/h",
        "plan $/h",
        "saves $/h",
        "saves $/month",
        "on estimate/marketplace $/h",
        "gap",
    ]
    print(format_table(headers, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
