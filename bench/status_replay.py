"""How long `gpuwatch status --simulate demo --at SECONDS` takes, short and 30 days long.

A replay ticks the whole agent (sampling through the NVML stand-in, analysis, cost) from
scenario time 0 to `--at`: one tick a second up to 3600 ticks, then `at / 3600` s apart
but never more than 60 s, so 30 days is 43,200 ticks. Each tick reads the process
utilization of every second since the last one; the simulation now adds up runs of
identical seconds at once. The baseline, measured in the same run, is the same replay with
the period-by-period computation (the definition, as before the change); both must give
the same status document. In-process replays are timed in CPU seconds (the machine is
shared: wall time follows the load), then the command itself in wall and CPU seconds.

    python bench/status_replay.py [--quick]   # --quick: no 30-day runs
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.simulate.helpers import process_utilization_one_by_one

from benchlib import REPO_ROOT, format_table, machine_info, verdict
from gpuwatch.agent import Agent, AgentOptions
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.export.status_json import encode, status_document
from gpuwatch.simulate import SimulatedNvml, load_scenario
from gpuwatch.simulate.services import ScenarioServices
from gpuwatch.simulate.stand_in import process_calls
from gpuwatch.status.local import replay, replay_step

DAY = 86400.0
SPANS = (2000.0, DAY, 3 * DAY)
MONTH = 30 * DAY
TARGET_MONTH_SECONDS = 60.0


def timed_replay(at: float, *, baseline: bool) -> tuple[float, float, Any]:
    """(CPU s, wall s, status document) of one in-process replay of demo to `at`."""
    original = getattr(process_calls, "process_utilization_since")  # noqa: B009
    if baseline:
        setattr(process_calls, "process_utilization_since", process_utilization_one_by_one)  # noqa: B010
    try:
        scenario = load_scenario("demo")
        clock = ManualClock()
        nv = SimulatedNvml(scenario, clock=clock, sleep=lambda s: time.sleep(min(s, 0.01)))
        # the demo's vLLM server read in process before each tick, as the command does
        services = ScenarioServices(nv, clock, cluster=False)
        services.start()
        agent = Agent(
            Config(agent=AgentConfig(hostname="bench")),
            nv,
            clock,
            AgentOptions(
                extra_workloads=scenario.workloads,
                extra_token_sources=services.token_sources(),
                extra_static_prices=scenario.prices,
                environ={},
                token_fetch=services.fetch,
            ),
        )
        agent.open()
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            snapshot = replay(agent, clock, at)
        finally:
            agent.stop()
            services.stop()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        setattr(process_calls, "process_utilization_since", original)  # noqa: B010
    return cpu, wall, json.loads(encode(status_document(snapshot, source="simulation")))


def ticks(at: float) -> int:
    """Ticks of a replay to `at` at the default 1 s interval."""
    return max(math.ceil(max(at, 0.15) / replay_step(at, 1.0)), 1) + 1


def command(at: float) -> tuple[float, float]:
    """(wall s, CPU s) of `gpuwatch status --simulate demo --at AT` as a user runs it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gpuwatch", "status", "--simulate", "demo", "--at", f"{at:g}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "80"},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 30-day runs")
    args = parser.parse_args()
    info = machine_info()
    print(
        f"{info['date']}, {info['cpu_model']}, {info['cpu_cores']} cores, "
        f"Python {info['python']}, commit {str(info['git_commit'])[:7]}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    rows = []
    per_tick: dict[str, float] = {}
    for at in SPANS:
        new_cpu, _, new_doc = timed_replay(at, baseline=False)
        old_cpu, _, old_doc = timed_replay(at, baseline=True)
        same = new_doc == old_doc
        n = ticks(at)
        per_tick = {"new": new_cpu / n, "old": old_cpu / n}
        rows.append(
            [
                f"{at:g}",
                f"{n:,}",
                f"{replay_step(at, 1.0):g} s",
                f"{new_cpu:.2f} s",
                f"{old_cpu:.2f} s",
                f"{new_cpu / old_cpu:.2f}x",
                "same" if same else "DIFFERENT",
            ]
        )
        if not same:
            print(f"--at {at:g}: the replays differ", file=sys.stderr)
    print("\nin-process replay of demo, CPU seconds (baseline: period by period)")
    headers = ["--at", "ticks", "step", "replay", "baseline", "ratio", "status"]
    print(format_table(headers, rows))
    print(
        f"\n30 days at 60 s steps ({ticks(MONTH):,} ticks) from the 3-day per-tick cost: "
        f"{per_tick['new'] * ticks(MONTH):.0f} s CPU, baseline "
        f"{per_tick['old'] * ticks(MONTH):.0f} s"
    )
    checks: list[tuple[str, Callable[[], tuple[float, float]]]] = [
        ("2000", lambda: command(2000.0))
    ]
    if not args.quick:
        checks.append(("2592000", lambda: command(MONTH)))
    rows = []
    for label, run in checks:
        wall, cpu = run()
        target = verdict(wall <= TARGET_MONTH_SECONDS) if label == "2592000" else ""
        rows.append([label, f"{wall:.1f} s", f"{cpu:.1f} s", target])
    print(f"\nthe command, startup included (target: 30 days <= {TARGET_MONTH_SECONDS:.0f} s)")
    print(format_table(["--at", "wall", "CPU", "target"], rows))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
