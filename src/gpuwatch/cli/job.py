"""`gpuwatch job JOBID`: one Slurm job's GPU use, cost and what to request next time.

    gpuwatch job JOBID [--source local | --prometheus URL] [--days N] [--config F]
                 [--format text|json]

From this host's history (`agent.state_dir/history.sqlite3`, read-only, as `gpuwatch
report` reads it), or for a fleet from a Prometheus-compatible API (the flags `report`
and `plan` share; the job looked for in the last `--days`). Exit codes: 0 printed, 1 the
source cannot be read or holds no such job (one line on stderr), 2 bad usage or config.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import IO

from gpuwatch.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from gpuwatch.cli.history_flags import add_source_arguments
from gpuwatch.config import Config, load_config
from gpuwatch.core.text import plain_name
from gpuwatch.core.units import DAY_SECONDS
from gpuwatch.history.store import HISTORY_FILE, HistoryStoreError, open_reader
from gpuwatch.promapi.client import PrometheusError, PrometheusOptions
from gpuwatch.promapi.flags import PrometheusFlagError, prometheus_options
from gpuwatch.report.job_prometheus import load_job
from gpuwatch.report.job_render import render_json, render_text
from gpuwatch.report.job_summary import JobSummary, gpu_hour_figures, summarize
from gpuwatch.sizing import build_gpu_catalog


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`gpuwatch job`'s flags."""
    parser.add_argument("job_id", metavar="JOBID", help="the Slurm job ID")
    parser.add_argument("--config", type=Path, help="TOML config file")
    add_source_arguments(parser, rules=False)
    parser.add_argument(
        "--days",
        type=_days,
        default=30,
        metavar="N",
        help="with --prometheus: look for the job in the last N days (30)",
    )
    parser.add_argument(
        "--format", dest="format", choices=("text", "json"), default="text", help="(text)"
    )


def run(args: argparse.Namespace) -> int:
    """Run `gpuwatch job` with the `--config` file."""
    return run_job(args, load_config(args.config))


def _days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        days = 0
    if not 1 <= days <= 400:
        raise argparse.ArgumentTypeError("expected a whole number of days, 1 to 400")
    return days


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
    need, dram = gpu_hour_figures(rows, gpu_rows)
    return summarize(
        rows,
        build_gpu_catalog(config.sizing.gpus),
        need_bytes=need,
        dram_peak_ratio=dram,
        headroom_ratio=config.analysis.headroom_ratio,
        candidate_gpus=config.analysis.candidate_gpus,
    )


def load_prometheus(
    config: Config, options: PrometheusOptions, job_id: str, days: int, now: float
) -> JobSummary:
    """The job's summary from Prometheus; PrometheusError, UnknownJobError."""
    found = load_job(options, job_id, now, days * DAY_SECONDS)
    if not found.rows:
        raise UnknownJobError(
            f"no job {plain_name(job_id)} in the last {days} days at {options.display_url}"
        )
    return summarize(
        found.rows,
        build_gpu_catalog(config.sizing.gpus),
        need_bytes=found.need_bytes,
        dram_peak_ratio=found.dram_peak_ratio,
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
        options = prometheus_options(args)
    except PrometheusFlagError as exc:
        print(f"gpuwatch: {exc}", file=err)
        return EXIT_USAGE
    try:
        if options is None:
            summary = load_local(config, args.job_id)
        else:
            summary = load_prometheus(config, options, args.job_id, args.days, time.time())
    except (HistoryStoreError, UnknownJobError, PrometheusError) as exc:
        print(f"gpuwatch: {exc}", file=err)
        return EXIT_FAILURE
    out.write(render_json(summary) if args.format == "json" else render_text(summary))
    return EXIT_OK
