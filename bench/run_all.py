"""Run every gpuwatch benchmark, print their tables and save the results as JSON.

    python bench/run_all.py            # full run, about 3-4 minutes (make bench)
    python bench/run_all.py --quick    # smoke run, about a minute

Results go to `bench/results/<date>.json` (`<date>-quick.json` for a smoke run), with
the machine they ran on. Every comparison is a ratio against a baseline measured in
the same run, because the absolute numbers move with the machine and its neighbours.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import agent_resources
import analysis_eval
import ledger_cost
import nvml_calls
import scrape_latency
import token_parse
from benchlib import BENCH_DIR, machine_info

RESULTS_DIR = BENCH_DIR / "results"


def _machine_line(machine: dict[str, Any]) -> str:
    return (
        f"{machine['cpu_model']}, {machine['cpu_cores']} cores, "
        f"{machine['memory_total_gib']} GiB, Python {machine['python']}, "
        f"{machine['platform']}, {machine['date']}, commit {str(machine['git_commit'])[:10]}"
        f"{' (src/ modified)' if machine['git_src_dirty'] else ''}"
    )


def main() -> int:
    """Run every benchmark; print the tables; write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run (about a minute)")
    parser.add_argument("--output", type=Path, help="JSON file (default: bench/results/DATE.json)")
    args = parser.parse_args()

    machine = machine_info()
    print(f"gpuwatch benchmarks{' (--quick)' if args.quick else ''}: {_machine_line(machine)}")
    started = time.monotonic()

    print("\n== scrape latency ==", flush=True)
    scrape = scrape_latency.run(quick=args.quick)
    print(scrape_latency.report(scrape), flush=True)

    print("\n== NVML calls ==", flush=True)
    calls = nvml_calls.run(quick=args.quick)
    print(nvml_calls.report(calls), flush=True)

    print("\n== agent resources ==", flush=True)
    resources = agent_resources.run(quick=args.quick)
    print(agent_resources.report(resources), flush=True)

    print("\n== analysis evaluation ==", flush=True)
    analysis = analysis_eval.run(quick=args.quick)
    print(analysis_eval.report(analysis), flush=True)
    ledger = ledger_cost.run(quick=args.quick)
    print(ledger_cost.report(ledger), flush=True)
    tokens = token_parse.run(quick=args.quick)
    print(token_parse.report(tokens), flush=True)

    elapsed = time.monotonic() - started
    results = {
        "machine": machine,
        "quick": args.quick,
        "elapsed_seconds": elapsed,
        "scrape_latency": scrape,
        "nvml_calls": calls,
        "agent_resources": resources,
        "analysis_eval": {"target_us": analysis_eval.TARGET_SECONDS * 1e6, "windows": analysis},
        "ledger_cost": ledger,
        "token_parse": tokens,
    }
    suffix = "-quick" if args.quick else ""
    output = args.output or RESULTS_DIR / f"{machine['date']}{suffix}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\n{elapsed:.0f} s; results in {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
