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
   (`/api/v1/status/tsdb`) before and after, and the distinct job series it stored. The
   head's growth per job, times 10,000, is the head series 10,000 jobs add within one
   head block (2 h; they leave the head at the next compaction).

    python bench/slurm_cardinality.py [--jobs 10000] [--prom-jobs 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--prom-jobs", type=int, default=200)
    args = parser.parse_args()
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
            rows = []
            with running_prometheus(root, scrape_config([port])) as url:
                before = settled_head_series(url)
                job = 1
                peak = 0
                started = time.perf_counter()
                while job <= args.jobs:
                    answer.write_text(squeue_document(job))
                    for _ in range(2):
                        clock.advance(10.0)
                        agent.refresh_jobs()
                        agent.tick()
                    job += GPUS
                    peak = max(peak, samples(agent)[0])
                    if job <= args.prom_jobs + 1:
                        time.sleep(1.6)
                        if job + GPUS > args.prom_jobs + 1:
                            after_prom = settled_head_series(url)
                            distinct = query_value(
                                url, "count(count_over_time(gpuwatch_gpu_job_info[1h]))"
                            )
                            distinct_idle = query_value(
                                url,
                                "count(count_over_time(gpuwatch_gpu_job_allocated_idle[1h]))",
                            )
                answer.write_text(json.dumps({"jobs": []}))
                for _ in range(2):
                    clock.advance(10.0)
                    agent.refresh_jobs()
                    agent.tick()
                elapsed = time.perf_counter() - started
                end_total, end_info = samples(agent)
            server.shutdown()
            prom_jobs = args.prom_jobs - args.prom_jobs % GPUS
            job_series = distinct + distinct_idle
            per_job = job_series / prom_jobs
            bounded = after_prom - before - job_series  # account and user counters
            rows = [
                ["jobs through the agent", f"{job - 1:,}"],
                ["agent: largest exposition after a wave (samples)", f"{peak:,}"],
                ["agent: exposition after the last job ended (samples)", f"{end_total:,}"],
                ["agent: gpuwatch_gpu_job_info series at the end", f"{end_info}"],
                ["Prometheus: head series before the jobs", f"{before:,}"],
                [f"Prometheus: head series after {prom_jobs} scraped jobs", f"{after_prom:,}"],
                ["  of which gpuwatch_gpu_job_info (distinct)", f"{distinct:.0f}"],
                ["  of which gpuwatch_gpu_job_allocated_idle (distinct)", f"{distinct_idle:.0f}"],
                ["  of which account and user counters (bounded)", f"{bounded:.0f}"],
                ["Prometheus: per-job head series per job", f"{per_job:.2f}"],
                [
                    f"head series for {args.jobs:,} jobs in one head block "
                    "(before + bounded + per job x jobs)",
                    f"{before + bounded + per_job * args.jobs:,.0f}",
                ],
                ["wall time (s)", f"{elapsed:.1f}"],
            ]
            print(format_table(["measure", "value"], rows))
        finally:
            agent.stop()


if __name__ == "__main__":
    main()
