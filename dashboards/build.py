"""Builds the Grafana dashboards in this folder: `python dashboards/build.py` rewrites the JSON.

The committed JSON files are what users import (Grafana UI, provisioning, the Helm chart);
this builder only keeps their panels uniform: every panel and target uses the `datasource`
variable, every panel has a unit and a description, ids are unique and the layout is a
simple grid. Queries use the agent's raw metrics (README "Metrics"), not recording rules.
`tests/dashboards/` checks that the JSON equals this builder's output.

The pieces live in `boards/` (imported as a top-level package: Python puts this folder on
`sys.path` when it runs this file): `blocks` (panels, queries, tables), `promql` (selectors),
`cost_by` (the cost panels shared by the fleet and Slurm dashboards), `variables`, `layout`
(the grid and the JSON form) and one module per dashboard.
"""

from __future__ import annotations

import sys
from pathlib import Path

from boards.blocks import Json
from boards.cost import cost_panels
from boards.fleet import fleet_panels
from boards.gpu import gpu_panels
from boards.layout import dashboard, render
from boards.slurm import slurm_panels, slurm_variables

HERE = Path(__file__).resolve().parent

DASHBOARDS: dict[str, Json] = {
    "gpuwatch-fleet.json": dashboard(
        "gpuwatch-fleet",
        "gpuwatch / Fleet and waste",
        "How many GPUs, how busy, what idle and held time cost, and which GPUs waste money.",
        fleet_panels(),
    ),
    "gpuwatch-cost.json": dashboard(
        "gpuwatch-cost",
        "gpuwatch / Cost and tokens",
        "Realized $ per 1M tokens, rent vs buy, price sources and the month's spend.",
        cost_panels(),
    ),
    "gpuwatch-gpu.json": dashboard(
        "gpuwatch-gpu",
        "gpuwatch / GPU detail",
        "Memory, activity, bandwidth, power, temperature, clocks, processes, XIDs and MIG "
        "instances of the selected GPUs.",
        gpu_panels(),
    ),
    "gpuwatch-slurm.json": dashboard(
        "gpuwatch-slurm",
        "gpuwatch / Slurm accounts, users and jobs",
        "What each Slurm account and user cost and left idle, which jobs hold GPUs and run "
        "nothing on them, and what reclaim did (docs/slurm.md).",
        slurm_panels(),
        slurm_variables(),
    ),
}


def main() -> int:
    """Write every dashboard next to this file; `--check` only reports files that differ."""
    check = "--check" in sys.argv[1:]
    stale = []
    for name, board in DASHBOARDS.items():
        path = HERE / name
        text = render(board)
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    for name in stale:
        print(f"{name} differs from dashboards/build.py: run python dashboards/build.py")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
