"""NVML calls per GPU per tick, counted at the library boundary on the simulated fleets.

The real `NvmlSampler` runs over the stand-in wrapped in `CountingNvml`; after three
warm-up ticks (NotSupported answers remembered) one fast-path tick and one slow pass are
counted. Deterministic: the same on every machine. `tests/test_nvml_calls.py` pins them.
Run alone: `python bench/nvml_calls.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.counting import calls_per_tick

from benchlib import format_table

SCENARIOS = ("dgx-h100", "dgx-h100-mig", "legacy")


def run(quick: bool = False) -> dict[str, Any]:  # noqa: ARG001 - same signature as the others
    """Calls per tick and per slow pass, whole host and per GPU, for each scenario."""
    results: dict[str, Any] = {}
    for scenario in SCENARIOS:
        calls = calls_per_tick(scenario)
        results[scenario] = {
            "gpus": calls.gpus,
            "tick_total": calls.tick_total,
            "slow_total": calls.slow_total,
            "tick": dict(sorted(calls.tick.items())),
            "slow": dict(sorted(calls.slow.items())),
        }
    return results


def report(results: dict[str, Any]) -> str:
    """One row per scenario."""
    rows = [
        [
            scenario,
            str(r["gpus"]),
            str(r["tick_total"]),
            f"{r['tick_total'] / r['gpus']:g}",
            str(r["slow_total"]),
            f"{r['slow_total'] / r['gpus']:g}",
        ]
        for scenario, r in results.items()
    ]
    return "NVML calls (steady state)\n" + format_table(
        ["scenario", "GPUs", "tick", "tick per GPU", "slow pass", "slow per GPU"], rows
    )


def main() -> int:
    """Print the table."""
    print(report(run()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
