"""What the agent's Slurm evidence costs on a node: squeue per list interval, /proc per tick.

Starts the tests' one-node Slurm (Debian's munged, slurmctld, slurmd; root; `make slurm`),
submits a busy job (`--gres=gpu:2`) and an idle one (`--gres=gpu:1`), then times:

- one `squeue --json --states=RUNNING -w <node>` (what `refresh()` runs once per
  `slurm.list_interval_seconds`), 50 times;
- one `/proc/<pid>/environ` read and parse of a job's process (what `attribute()` does
  once per new GPU process; cached while the PID lives);
- the Slurm stage of a tick (`SlurmCollector.attribute`) on the `slurm` scenario, 200 times.

    python bench/slurm_evidence.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO_ROOT, format_table, percentile

sys.path.insert(0, str(REPO_ROOT))

from tests.slurm_cluster import SlurmCluster

from gpuwatch.collectors.slurm import SlurmCollector
from gpuwatch.core.clock import ManualClock
from gpuwatch.nvml import NvmlSampler
from gpuwatch.simulate import SimulatedNvml, load_scenario
from gpuwatch.slurm.config import SlurmConfig
from gpuwatch.slurm.evidence import parse_environ


def _ms(samples: list[float]) -> list[str]:
    return [f"{percentile(samples, q) * 1e3:.2f}" for q in (50, 95)]


def main() -> None:
    """Print one table: median and p95 of each step, in milliseconds."""
    with tempfile.TemporaryDirectory(prefix="gpuwatch-slurm-bench-") as root:
        cluster = SlurmCluster.start(Path(root))
        try:
            busy = cluster.sbatch("--gres=gpu:2", "--account=physics", wrap="sleep 300")
            idle = cluster.sbatch(
                "--gres=gpu:1", wrap="exec env -u SLURM_JOB_GPUS -u SLURM_STEP_GPUS sleep 300"
            )
            cluster.wait_running(busy)
            cluster.wait_running(idle)
            clock = ManualClock()
            collector = SlurmCollector(
                SlurmConfig(enabled=True), clock, environ=cluster.env, list_interval_seconds=30
            )
            squeue = []
            for _ in range(50):
                start = time.perf_counter()
                collector.refresh()
                squeue.append(time.perf_counter() - start)
            assert collector.result.success
            pid = cluster.job_pids(busy)[0]
            environ = []
            for _ in range(2000):
                start = time.perf_counter()
                parse_environ(Path(f"/proc/{pid}/environ").read_bytes())
                environ.append(time.perf_counter() - start)
            sampler = NvmlSampler(SimulatedNvml(load_scenario("slurm"), clock=clock), clock)
            sampler.open()
            gpus = sampler.sample()
            ticks = []
            for _ in range(200):
                start = time.perf_counter()
                collector.attribute(gpus)
                ticks.append(time.perf_counter() - start)
            rows = [
                ["squeue --json -w <node> (2 jobs)", *_ms(squeue)],
                ["environ read + parse, one PID", *_ms(environ)],
                ["Slurm stage of a tick (4 GPUs, cached PIDs)", *_ms(ticks)],
            ]
            print(format_table(["step", "median ms", "p95 ms"], rows))
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
