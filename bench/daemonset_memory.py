"""Peak memory of the agent configured as the Helm chart runs it, for the chart's limits.

The chart's DaemonSet runs `gpuwatch run` with the history on (a hostPath state
directory) and, with attribution, the kubelet pod-resources client. This runs the real
CLI the same way on the simulated fleets — history on, `per_process_metrics = true`,
`--speed 60` (one simulated hour per real minute, a sample every 50 ms real, twenty
times the sampling work of speed 1) — while a scraper fetches `/metrics` and
`/status.json` once a second, and reads the peak resident memory (`VmHWM`,
/proc/PID/status) at the end:

- `demo`: 4 GPUs with the simulated node (two teams' pods: the attribution collector
  lists a real gRPC kubelet on a unix socket every 5 s) and a token server. As on a
  node, the simulated kubelet and token server run in a process of their own
  (`python -m gpuwatch.simulate.services demo --endpoints FILE`, the agent started with
  `--services FILE`), so the figure is the agent's alone; `demo, services in-process`
  runs them inside the agent (`gpuwatch run --simulate demo`'s default, and this
  benchmark's only row until 2026-11-25), for comparison;
- `demo-dra`: the demo with its pods holding their GPUs through DRA claims of
  `gpu.nvidia.com` (the kubelet's `dynamic_resources`), services in another process as
  for `demo`: what the DRA path adds to the agent's memory;
- `dgx-h100`: 8 GPUs, 64 processes, no pods (no services to move out).

Every row still holds the NVML stand-in (the simulated driver, `gpuwatch.simulate`),
which a real node replaces by `pynvml` and the driver's library.

The baseline is `baseline_exporter.py` serving the demo agent's /metrics text with
prometheus-client, run and scraped the same way right after: what the Python runtime and
prometheus-client alone take, so the ratio says what gpuwatch adds.

    python bench/daemonset_memory.py [--seconds 60] [--rows demo,demo-dra]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from agent_resources import Process, _serving, _start_baseline
from benchlib import MIB, format_table, free_port, machine_info

CONFIG = """\
[agent]
per_process_metrics = true
state_dir = "{state_dir}"

[history]
enabled = true

[logging]
level = "warning"
"""

SPEED = 60.0
RUNS = (
    # (row, scenario, services in another process)
    ("demo", "demo", True),
    ("demo-dra", "demo-dra", True),
    ("demo, services in-process", "demo", False),
    ("dgx-h100", "dgx-h100", False),
)
SERVICES_ROW = "{scenario}'s services process (not the agent)"
TARGET = 64 * MIB
"""The issue's peak for the agent with history and attribution on."""


def peak_rss_bytes(pid: int) -> int:
    """VmHWM of `pid`: the largest resident set it has had, bytes."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        body: bytes = response.read()
        return body


def run_and_scrape(process: Process, port: int, seconds: float, status: bool) -> tuple[int, bytes]:
    """Scrape `process` once a second for `seconds`; (its peak RSS, the last /metrics)."""
    ready = _serving(process, port)
    metrics = b""
    for second in range(int(seconds)):
        delay = ready + second - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        metrics = _fetch(f"http://127.0.0.1:{port}/metrics")
        if status:
            _fetch(f"http://127.0.0.1:{port}/status.json")
    process.check_alive()
    return peak_rss_bytes(process.pid), metrics


def _start_services(scenario: str, work: Path) -> tuple[Process, Path]:
    """`python -m gpuwatch.simulate.services`, once it has written its endpoints file."""
    endpoints = work / "endpoints.json"
    argv = [sys.executable, "-m", "gpuwatch.simulate.services", scenario]
    argv += ["--speed", f"{SPEED:g}", "--endpoints", str(endpoints)]
    services = Process(f"services-{scenario}", argv, work)
    deadline = time.monotonic() + 60
    while not endpoints.exists():
        services.check_alive()
        if time.monotonic() > deadline:
            services.stop()
            raise RuntimeError("the services wrote no endpoints file in 60 s")
        time.sleep(0.1)
    return services, endpoints


def measure(seconds: float, rows: frozenset[str] | None = None) -> dict[str, int]:
    """Peak RSS of each run's agent (the runs named in `rows`, all when None), of each
    services process and of the baseline, bytes."""
    peaks: dict[str, int] = {}
    demo_metrics = b""
    with tempfile.TemporaryDirectory(prefix="gpuwatch-daemonset-") as name:
        tmp = Path(name)
        for index, (row, scenario, external) in enumerate(RUNS):
            if rows is not None and row not in rows:
                continue
            work = tmp / f"run{index}"
            work.mkdir()
            config = work / "gpuwatch.toml"
            config.write_text(CONFIG.format(state_dir=work / "state"), encoding="utf-8")
            port = free_port()
            argv = [sys.executable, "-m", "gpuwatch", "run", "--simulate", scenario]
            argv += ["--config", str(config), "--listen", f"127.0.0.1:{port}"]
            argv += ["--speed", f"{SPEED:g}"]
            services = None
            if external:
                services, endpoints = _start_services(scenario, work)
                argv += ["--services", str(endpoints)]
            agent = Process(f"agent-{scenario}", argv, work)
            try:
                peaks[row], metrics = run_and_scrape(agent, port, seconds, status=True)
                if services is not None:
                    services.check_alive()
                    peaks[SERVICES_ROW.format(scenario=scenario)] = peak_rss_bytes(services.pid)
            finally:
                agent.stop()
                if services is not None:
                    services.stop()
            if row == "demo":
                demo_metrics = metrics
        metrics_file = tmp / "demo-metrics.txt"
        metrics_file.write_bytes(demo_metrics)
        port = free_port()
        baseline = _start_baseline(tmp, metrics_file, port, "baseline")
        try:
            peaks["baseline"], _ = run_and_scrape(baseline, port, seconds, status=False)
        finally:
            baseline.stop()
    return peaks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="real seconds per run")
    parser.add_argument(
        "--rows", default="", help="comma-separated rows to run (default: all; demo always)"
    )
    args = parser.parse_args()
    chosen = frozenset({"demo", *args.rows.split(",")}) if args.rows else None
    known = {row for row, _, _ in RUNS}
    if chosen is not None and not chosen <= known:
        parser.error(f"--rows: unknown {sorted(chosen - known)}; known: {sorted(known)}")
    load = os.getloadavg()
    peaks = measure(args.seconds, chosen)
    info = machine_info()
    print(f"machine: {info['cpu_model']}, {info['cpu_cores']} cores, {info['date']}")
    print(f"load average before the runs: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{args.seconds:g} real s at --speed {SPEED:g}, scraped once a second")
    rows = [
        [name, f"{peak / MIB:.1f}", f"{peak / peaks['baseline']:.2f}x"]
        for name, peak in peaks.items()
    ]
    print(format_table(["process", "peak RSS MiB", "vs baseline"], rows))
    verdict = "met" if peaks["demo"] <= TARGET else "missed"
    print(f"target <= {TARGET / MIB:g} MiB with history and attribution (demo): {verdict}")
    if "demo-dra" in peaks:
        print(f"demo-dra / demo peak RSS: {peaks['demo-dra'] / peaks['demo']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
