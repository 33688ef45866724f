"""Cardinality of the Slurm series under job churn: 10,000 jobs through the agent.

The agent is the real one (`slurm` scenario: four simulated H100s, manual clock, 10 s
ticks, 60 s window) with its real Slurm collector; squeue is a real subprocess that
answers synthetic `squeue --json` documents (`sh -c 'cat FILE'`, the file rewritten per
wave). Each wave is four single-GPU jobs, one per GPU, that hold their GPU and run nothing
for one list interval (two ticks) and then end; job IDs never repeat, users cycle over 50
names and accounts over 10. Measured:

1. the agent's exposition after every wave for `--jobs` jobs (default 10,000): the
   largest number of samples, the samples at the end, and the `gpuwatch_gpu_job_info`
   series at the end (jobs still on the node);
2. a real Prometheus scraping the same agent every second for the first `--prom-jobs`
   jobs (each wave held 1.6 s of real time so every job is scraped): TSDB head series
   (`/api/v1/status/tsdb`) before, and at each of `--checkpoints` (scraped jobs, default
   only `--prom-jobs`) the head series and the distinct job series it stored. The
   least-squares slope of head series over scraped jobs, times 10,000, plus its
   intercept, is the head series 10,000 jobs leave within one head block (2 h; they
   leave the head at the next compaction).

    python bench/slurm_cardinality.py [--jobs 10000] [--prom-jobs 200] [--checkpoints 200,500]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from benchlib import REPO_ROOT, format_table

sys.path.insert(0, str(REPO_ROOT))

from prometheus_client import start_http_server
from tests.conftest import free_port, scenario_agent, simulated
from tests.dashboards.test_live_queries import api
from tests.prometheus_process import running_prometheus, scrape_config

from gpuwatch.agent import Agent
from gpuwatch.analysis.config import AnalysisConfig
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.slurm.config import SlurmConfig

GPUS = 4
USERS = 50
ACCOUNTS = 10


def squeue_document(first_job: int) -> str:
    """Four running single-GPU jobs from `first_job` on, GRES index i for the i-th."""
    jobs = [
        {
            "job_id": first_job + i,
            "user_name": f"user{(first_job + i) % USERS}",
            "account": f"acct{(first_job + i) % ACCOUNTS}",
            "partition": "gpu",
            "job_state": ["RUNNING"],
            "gres_detail": [f"gpu:1(IDX:{i})"],
        }
        for i in range(GPUS)
    ]
    return json.dumps({"jobs": jobs})


def build_agent(root: Path, answer: Path) -> tuple[Agent, ManualClock]:
    nv, clock = simulated("slurm")
    config = Config(
        agent=AgentConfig(hostname="bench", interval_seconds=10.0),
        analysis=AnalysisConfig(window_seconds=60.0),
        slurm=SlurmConfig(
            enabled=True,
            slurm_conf=str(root / "slurm.conf"),
            squeue_command=f"sh -c 'cat {answer}' squeue",
            list_interval_seconds=10.0,
        ),
    )
    return scenario_agent(config, nv, clock), clock


def samples(agent: Agent) -> tuple[int, int]:
    """(all samples of the exposition, gpuwatch_gpu_job_info samples)."""
    total = info = 0
    for family in agent.registry.collect():
        total += len(family.samples)
        if family.name == "gpuwatch_gpu_job":
            info += len(family.samples)
    return total, info


def head_series(url: str) -> int:
    status = api(url, "/api/v1/status/tsdb")  # None while Prometheus is not answering
    return -1 if status is None else int(status["headStats"]["numSeries"])


def settled_head_series(url: str) -> int:
    """The head series once two reads 2 s apart agree (every scrape so far ingested)."""
    last = -1
    while True:
        now = head_series(url)
        if now == last and now > 0:
            return now
        last = now
        time.sleep(2.0)


def query_value(url: str, query: str) -> float:
    result = api(url, "/api/v1/query", query=query)["result"]
    return float(result[0]["value"][1]) if result else 0.0


class Checkpoint(NamedTuple):
    """Prometheus after `jobs` scraped jobs: head series and distinct per-job series."""

    jobs: int
    head: int
    info: int
    idle: int


def checkpoint(url: str, jobs: int) -> Checkpoint:
    """Read the settled head series and the distinct job series stored so far."""
    head = settled_head_series(url)
    info = query_value(url, "count(count_over_time(gpuwatch_gpu_job_info[1h]))")
    idle = query_value(url, "count(count_over_time(gpuwatch_gpu_job_allocated_idle[1h]))")
    return Checkpoint(jobs, head, round(info), round(idle))


def fit(points: list[Checkpoint]) -> tuple[float, float]:
    """Least-squares (slope in head series per job, intercept in head series)."""
    if len(points) == 1:
        return 0.0, float(points[0].head)
    n = len(points)
    mean_x = sum(p.jobs for p in points) / n
    mean_y = sum(p.head for p in points) / n
    sxx = sum((p.jobs - mean_x) ** 2 for p in points)
    sxy = sum((p.jobs - mean_x) * (p.head - mean_y) for p in points)
    slope = sxy / sxx
    return slope, mean_y - slope * mean_x


def wave(agent: Agent, clock: ManualClock) -> None:
    """One list interval: two 10 s ticks with a fresh squeue answer first."""
    for _ in range(2):
        clock.advance(10.0)
        agent.refresh_jobs()
        agent.tick()


def checkpoint_rows(before: int, points: list[Checkpoint], jobs: int) -> list[list[str]]:
    """One row per checkpoint, then the fit and its value at `jobs` jobs."""
    rows = [["Prometheus: head series before the jobs", f"{before:,}"]]
    previous = Checkpoint(0, before, 0, 0)
    for point in points:
        slope = (point.head - previous.head) / (point.jobs - previous.jobs)
        rows.append(
            [
                f"Prometheus: head series after {point.jobs:,} scraped jobs "
                f"(job_info / allocated_idle distinct; slope since previous)",
                f"{point.head:,} ({point.info:,} / {point.idle:,}; {slope:.3f}/job)",
            ]
        )
        previous = point
    last = points[-1]
    bounded = last.head - before - last.info - last.idle  # account and user counters
    slope, intercept = fit(points)
    rows += [
        ["  account and user counters at the last checkpoint (bounded)", f"{bounded:,}"],
        [
            "Prometheus: per-job head series per job at the last checkpoint",
            f"{(last.info + last.idle) / last.jobs:.3f}",
        ],
        ["Prometheus: least-squares slope over the checkpoints (head series/job)", f"{slope:.4f}"],
        ["  intercept (head series at 0 jobs)", f"{intercept:,.1f}"],
        [
            f"head series for {jobs:,} jobs in one head block (intercept + slope x jobs)",
            f"{intercept + slope * jobs:,.0f}",
        ],
    ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--prom-jobs", type=int, default=200)
    parser.add_argument(
        "--checkpoints",
        default="",
        help="comma-separated scraped-job counts to read the head at (rounded down to 4s)",
    )
    args = parser.parse_args()
    prom_jobs = args.prom_jobs - args.prom_jobs % GPUS
    wanted = {int(text) for text in args.checkpoints.split(",") if text.strip()}
    marks = sorted({n - n % GPUS for n in wanted if GPUS <= n <= prom_jobs} | {prom_jobs})
    with tempfile.TemporaryDirectory(prefix="gpuwatch-slurm-card-") as tmp:
        root = Path(tmp)
        answer = root / "squeue.json"
        answer.write_text(json.dumps({"jobs": []}))
        agent, clock = build_agent(root, answer)
        try:
            for _ in range(7):  # past the first 60 s window: the verdicts are out
                clock.advance(10.0)
                agent.refresh_jobs()
                agent.tick()
            port = free_port()
            server, _thread = start_http_server(port, "127.0.0.1", agent.registry)
            points: list[Checkpoint] = []
            with running_prometheus(root, scrape_config([port])) as url:
                before = settled_head_series(url)
                job = 1
                peak = 0
                started = time.perf_counter()
                while job <= args.jobs:
                    answer.write_text(squeue_document(job))
                    wave(agent, clock)
                    job += GPUS
                    peak = max(peak, samples(agent)[0])
                    if job - 1 <= prom_jobs:
                        time.sleep(1.6)
                        if job - 1 in marks:
                            points.append(checkpoint(url, job - 1))
                            print(f"checkpoint {points[-1]}", file=sys.stderr, flush=True)
                answer.write_text(json.dumps({"jobs": []}))
                wave(agent, clock)
                elapsed = time.perf_counter() - started
                end_total, end_info = samples(agent)
            server.shutdown()
            rows = [
                ["jobs through the agent", f"{job - 1:,}"],
                ["agent: largest exposition after a wave (samples)", f"{peak:,}"],
                ["agent: exposition after the last job ended (samples)", f"{end_total:,}"],
                ["agent: gpuwatch_gpu_job_info series at the end", f"{end_info}"],
                *checkpoint_rows(before, points, args.jobs),
                ["wall time (s)", f"{elapsed:.1f}"],
            ]
            print(format_table(["measure", "value"], rows))
        finally:
            agent.stop()


if __name__ == "__main__":
    main()
