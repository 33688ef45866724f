"""Cost ledger per GPU per tick, and its memory after 30 days, with exact windows.

The ledger books each second at its own time (docs/analysis.md), keeps unsettled ticks
in a queue and one checkpoint history per window. This times `CostLedger.observe` fed by
the real state tracker over a month of 10 s ticks for one GPU whose activity alternates
between 18-minute work spells and 2-minute pauses (a settlement every 20 minutes, the
worst common case) and an idle GPU, and reads the ledger's memory with tracemalloc at
the end. The baseline, measured in the same run, is the previous design: cumulative
counters plus one host-wide checkpoint history of (busy, observed), which could not say
what was idle inside a window. Targets: <= 20 us per GPU per tick; <= 1 MiB per GPU.

    python bench/ledger_cost.py [--quick]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable

from benchlib import format_table, verdict
from gpuwatch.analysis.states import GpuStateTracker, StateSettings
from gpuwatch.core.costs import GpuPrice
from gpuwatch.core.verdict import GpuVerdict
from gpuwatch.cost.history import CheckpointHistory
from gpuwatch.cost.ledger import CostLedger

STEP = 10.0
MONTH = 30 * 86400.0
PRICE = GpuPrice(usd_per_hour=6.88, source="static")
TARGET_SECONDS = 20e-6
TARGET_BYTES = 1024 * 1024


def activity(t: float, pausing: bool) -> float:
    """0.9 with a 2-minute pause every 20 minutes, or always 0 (an idle GPU)."""
    if not pausing:
        return 0.0
    return 0.0 if t % 1200.0 >= 1080.0 else 0.9


def verdicts(duration: float, pausing: bool) -> list[tuple[float, GpuVerdict]]:
    """The tracker's verdicts of one GPU, built before timing (analysis is not timed)."""
    tracker = GpuStateTracker(StateSettings())
    out = []
    t = 0.0
    while t <= duration:
        tracker.observe(t, activity(t, pausing), None, False)
        out.append(
            (
                t,
                GpuVerdict(
                    gpu_index=0,
                    uuid="GPU-bench",
                    state=tracker.state,
                    state_since_seconds=tracker.state_since,
                    inactive_since_seconds=None,
                    idle_seconds_total=tracker.idle_seconds_total,
                    activity_mean_ratio=None,
                    tick_seconds=tracker.tick_seconds,
                    tick_class=tracker.tick_class,
                    settlements=tracker.settlements,
                ),
            )
        )
        t += STEP
    return out


def run_ledger(feed: list[tuple[float, GpuVerdict]]) -> object:
    ledger = CostLedger()
    prices = {"GPU-bench": PRICE}
    for t, v in feed:
        ledger.observe(t, (v,), prices)
    return ledger


def run_baseline(feed: list[tuple[float, GpuVerdict]]) -> object:
    """The previous design: counters and one (busy, observed) checkpoint history."""
    history = CheckpointHistory(2)
    busy = observed = 0.0
    for t, v in feed:
        observed += v.tick_seconds
        busy = observed - v.idle_seconds_total
        history.record(t, (busy, observed))
        history.increase(3600.0)
    return history


def measure(
    method: Callable[[list[tuple[float, GpuVerdict]]], object],
    feed: list[tuple[float, GpuVerdict]],
) -> tuple[float, int]:
    """(seconds per tick, untraced; bytes held at the end, in a second traced run)."""
    start = time.perf_counter()
    method(feed)
    elapsed = time.perf_counter() - start
    tracemalloc.start()
    kept = method(feed)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return elapsed / len(feed), held


def run(quick: bool) -> list[dict[str, object]]:
    duration = 2 * 86400.0 if quick else MONTH + 86400.0
    results = []
    for name, pausing in (("working, pausing", True), ("idle", False)):
        feed = verdicts(duration, pausing)
        ours, ours_bytes = measure(run_ledger, feed)
        base, base_bytes = measure(run_baseline, feed)
        results.append(
            {
                "gpu": name,
                "ticks": len(feed),
                "ledger_us": ours * 1e6,
                "baseline_us": base * 1e6,
                "ratio": ours / base,
                "ledger_kib": ours_bytes / 1024,
                "baseline_kib": base_bytes / 1024,
                "ok": ours <= TARGET_SECONDS and ours_bytes <= TARGET_BYTES,
            }
        )
    return results


def report(results: list[dict[str, object]]) -> str:
    """The printed table of one run."""
    table = format_table(
        ["GPU", "ticks", "ledger", "baseline", "ratio", "ledger mem", "baseline mem", "target"],
        [
            [
                str(r["gpu"]),
                f"{r['ticks']:,}",
                f"{r['ledger_us']:.1f} us",
                f"{r['baseline_us']:.1f} us",
                f"{r['ratio']:.2f}x",
                f"{r['ledger_kib']:.0f} KiB",
                f"{r['baseline_kib']:.0f} KiB",
                verdict(bool(r["ok"])),
            ]
            for r in results
        ],
    )
    return (
        f"cost ledger per GPU per tick over {STEP:.0f} s ticks "
        f"(target <= {TARGET_SECONDS * 1e6:.0f} us and <= 1 MiB per GPU)\n{table}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    print(report(run(parser.parse_args().quick)))


if __name__ == "__main__":
    main()
