"""Waste-analysis cost per GPU per sample, flat as the window grows.

`AnalysisEngine.observe()` on one GPU with 1 s samples, for analysis windows (and
lookbacks) of 10 minutes, 1 hour and 24 hours. Each run first fills the whole window,
then times the steady state. The baseline, measured in the same run, is the naive
method the rolling aggregates replace: keep every sample of the window and rescan it
for the max and the mean at each sample. Target: <= 50 us per GPU per evaluation, flat.

    python bench/analysis_eval.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from collections import deque
from typing import Any

from benchlib import format_table, verdict
from gpuwatch.analysis.engine import AnalysisEngine, AnalysisSettings
from gpuwatch.analysis.states import StateSettings
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import GpuSample
from gpuwatch.simulate import SimulatedNvml, load_scenario
from gpuwatch.sizing import build_gpu_catalog, build_model_catalog

WINDOWS = {"10 min": 600.0, "1 h": 3600.0, "24 h": 86400.0}
TARGET_SECONDS = 50e-6


def demo_samples() -> tuple[GpuSample, ...]:
    """Real samples of the demo fleet (taken through the NVML adapter)."""
    from gpuwatch.nvml import NvmlSampler

    clock = ManualClock()
    sampler = NvmlSampler(SimulatedNvml(load_scenario("demo"), clock=clock), clock, watch_xid=False)
    sampler.open()
    try:
        clock.advance(1.0)
        sampler.sample()
        clock.advance(1.0)
        return sampler.sample()
    finally:
        sampler.close()


def time_engine(window: float, gpu: GpuSample, measured: int) -> float:
    """Seconds per observe() of one GPU, after the window is full."""
    settings = AnalysisSettings(
        states=StateSettings(window_seconds=window), lookback_seconds=window
    )
    engine = AnalysisEngine(settings, (), build_gpu_catalog(), build_model_catalog())
    samples = (gpu,)
    t = 1_767_225_600.0
    for _ in range(int(window)):  # fill the window with 1 s samples
        t += 1.0
        engine.observe(t, samples)
    start = time.perf_counter()
    for _ in range(measured):
        t += 1.0
        engine.observe(t, samples)
    return (time.perf_counter() - start) / measured


def time_naive(window: float, gpu: GpuSample, measured: int) -> float:
    """Seconds per sample of the rescanning baseline (max and mean over a deque)."""
    activity = gpu.sm_active_ratio or 0.0
    memory = float(gpu.memory_used_bytes or 0)
    kept: deque[tuple[float, float]] = deque(maxlen=int(window))
    for _ in range(int(window)):
        kept.append((activity, memory))
    start = time.perf_counter()
    for _ in range(measured):
        kept.append((activity, memory))
        peak_activity = max(a for a, _ in kept)
        mean_activity = sum(a for a, _ in kept) / len(kept)
        peak_memory = max(m for _, m in kept)
        _ = (peak_activity, mean_activity, peak_memory)
    return (time.perf_counter() - start) / measured


def run(quick: bool) -> list[dict[str, object]]:
    gpu = demo_samples()[3]  # the inference server; no declaration: the observed-memory path
    measured = 2000 if quick else 20000
    time_engine(600.0, gpu, 1000)  # warm-up: imports, caches
    results = []
    for name, window in WINDOWS.items():
        ours = time_engine(window, gpu, measured)
        naive = time_naive(window, gpu, max(20, measured // max(1, int(window) // 600)))
        results.append(
            {
                "window": name,
                "gpuwatch_us": ours * 1e6,
                "naive_rescan_us": naive * 1e6,
                "ratio": ours / naive,
                "ok": ours <= TARGET_SECONDS,
            }
        )
    return results


def report(results: list[dict[str, Any]]) -> str:
    """The printed table of one run, and how much the cost moves from the shortest
    window to the longest (flat: about 1x)."""
    table = format_table(
        ["window", "gpuwatch", "naive rescan", "ratio", "target"],
        [
            [
                str(r["window"]),
                f"{r['gpuwatch_us']:.1f} us",
                f"{r['naive_rescan_us']:.1f} us",
                f"{r['ratio']:.3f}x",
                verdict(bool(r["ok"])),
            ]
            for r in results
        ],
    )
    first, last = results[0], results[-1]
    spread = float(last["gpuwatch_us"]) / float(first["gpuwatch_us"])
    return (
        f"analysis evaluation per GPU per sample (target <= {TARGET_SECONDS * 1e6:.0f} us, flat)\n"
        f"{table}\n"
        f"gpuwatch {last['window']} / {first['window']}: {spread:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    print(report(run(parser.parse_args().quick)))


if __name__ == "__main__":
    main()
