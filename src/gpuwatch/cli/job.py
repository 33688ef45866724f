"""`gpuwatch job JOBID`: one Slurm job's GPU use, cost and what to request next time.

    gpuwatch job JOBID [--config F] [--format text|json]

From this host's history (`agent.state_dir/history.sqlite3`, read-only, as `gpuwatch
report` reads it). Exit codes: 0 printed, 1 the history cannot be read or holds no such
job (one line on stderr), 2 bad usage or config.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO

from gpuwatch.cli.common import EXIT_FAILURE, EXIT_OK
from gpuwatch.config import Config, load_config
from gpuwatch.core.text import plain_name
from gpuwatch.history.store import HISTORY_FILE, HistoryStoreError, open_reader
from gpuwatch.report.job_render import render_json, render_text
from gpuwatch.report.job_summary import JobSummary, summarize
from gpuwatch.sizing import build_gpu_catalog


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`gpuwatch job`'s flags."""
    parser.add_argument("job_id", metavar="JOBID", help="the Slurm job ID")
    parser.add_argument("--config", type=Path, help="TOML config file")
    parser.add_argument(
        "--format", dest="format", choices=("text", "json"), default="text", help="(text)"
    )


def run(args: argparse.Namespace) -> int:
    """Run `gpuwatch job` with the `--config` file."""
    return run_job(args, load_config(args.config))


class UnknownJobError(Exception):
    """The history holds no hour of the job."""


def load_local(config: Config, job_id: str) -> JobSummary:
    """The job's summary from this host's history; HistoryStoreError, UnknownJobError."""
    path = config.agent.state_dir / HISTORY_FILE
    store = open_reader(path)
    try:
        rows = store.job_rows(job_id)
        if not rows:
            raise UnknownJobError(f"no job {plain_name(job_id)} in {path}")
        start = min(r["hour_start"] for r in rows)
        end = max(r["hour_start"] for r in rows) + 1
        gpu_rows = store.gpu_hours(start, end)
    finally:
        store.close()
    return summarize(
        rows,
        gpu_rows,
        build_gpu_catalog(config.sizing.gpus),
        headroom_ratio=config.analysis.headroom_ratio,
        candidate_gpus=config.analysis.candidate_gpus,
    )


def run_job(
    args: argparse.Namespace,
    config: Config,
    *,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run `gpuwatch job` with the loaded config; returns the exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        summary = load_local(config, args.job_id)
    except (HistoryStoreError, UnknownJobError) as exc:
        print(f"gpuwatch: {exc}", file=err)
        return EXIT_FAILURE
    out.write(render_json(summary) if args.format == "json" else render_text(summary))
    return EXIT_OK
