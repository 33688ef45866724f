"""An example month for the docs' picture: `python -m tests.report.example DIR`.

Two hosts of the demo's kind over October 2026 with fixed daily patterns (no randomness),
so anyone can rerun it and get the same report, PDF and PNG (docs/reports.md).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from gpuwatch.report.build import build_report
from gpuwatch.report.command import write_files
from gpuwatch.report.model import GpuDay, Period, ReportData, TokenDay

DAY = 86400.0
# (host, index, name, $/h, busy share, idle share, held share, recommendation, saving $/h)
GPUS = (
    ("gpu-node-1", 0, "NVIDIA H100 80GB HBM3", 4.0, 0.85, 0.05, 0.0, None, None),
    ("gpu-node-1", 1, "NVIDIA H100 80GB HBM3", 4.0, 0.10, 0.75, 0.0, None, None),
    ("gpu-node-1", 2, "NVIDIA H100 80GB HBM3", 4.0, 0.05, 0.0, 0.90, None, None),
    ("gpu-node-1", 3, "NVIDIA H100 80GB HBM3", 4.0, 0.95, 0.0, 0.0, "l40s", 2.1),
    ("gpu-node-2", 0, "NVIDIA L4", 0.8, 0.40, 0.55, 0.0, None, None),
    ("gpu-node-2", 1, "NVIDIA L4", 0.8, 0.70, 0.10, 0.15, None, None),
)


def example_month() -> ReportData:
    """October 2026, six GPUs; gpu-node-2 is down on the 20th (a coverage gap)."""
    start = datetime(2026, 10, 1, tzinfo=UTC)
    period = Period(start, datetime(2026, 11, 1, tzinfo=UTC), "2026-10")
    rows = []
    tokens = []
    for n in range(31):
        day = date(2026, 10, 1) + timedelta(days=n)
        weekend = day.weekday() >= 5
        for host, index, name, price, weekday_busy, weekday_idle, held, rec, saving in GPUS:
            if host == "gpu-node-2" and n == 19:
                continue
            busy, idle = weekday_busy, weekday_idle
            if weekend:  # weekends: half the busy time is idle
                busy, idle = busy / 2, idle + busy / 2
            cost = price * 24
            rows.append(
                GpuDay(
                    host=host,
                    uuid=f"GPU-{host[-1]}{index}00000-0000-0000-0000-000000000000",
                    name=name,
                    day=day,
                    observed_seconds=DAY,
                    class_seconds={
                        "busy": busy * DAY,
                        "idle": idle * DAY,
                        "held": held * DAY,
                        "unknown": 0.0,
                    },
                    cost_usd=cost,
                    idle_cost_usd=cost * (idle + held),
                    held_cost_usd=cost * held,
                    gpu_index=index,
                    energy_joules=None,
                    price_source="static" if host == "gpu-node-1" else "catalog",
                    recommended_gpu=rec,
                    savings_usd_per_hour=saving,
                )
            )
        tokens.append(
            TokenDay(
                "gpu-node-1",
                "vllm-llama",
                day,
                {"prompt": 4.0e7 * (0.5 if weekend else 1), "generation": 9.0e6},
                4.0 * 24,
            )
        )
    return ReportData(
        period=period,
        gpu_days=tuple(rows),
        token_days=tuple(tokens),
        expected_gpu_seconds=6 * 31 * DAY,
        rent_vs_buy_monthly_delta_usd=-410.0,
        source="local",
    )


def main(out: Path) -> None:
    data = example_month()
    report = build_report(data)
    files = write_files(
        report, data, ("html", "md", "csv", "json", "pdf"), out, "2026-11-01 01:00 UTC"
    )
    pdf = next(p for p in files if p.suffix == ".pdf")
    subprocess.run(
        [
            "pdftoppm",
            "-png",
            "-r",
            "80",
            "-f",
            "1",
            "-l",
            "1",
            "-singlefile",
            str(pdf),
            str(out / "report-example"),
        ],
        check=True,
    )
    print("\n".join(str(p) for p in [*files, out / "report-example.png"]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
