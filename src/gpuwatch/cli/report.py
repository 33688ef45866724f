"""`gpuwatch report`: pick the period, load it from a source, write the formats, tell Slack.

    gpuwatch report [--month YYYY-MM | --from DATE --to DATE]
                    [--source local | --prometheus URL] [--config F]
                    [--format html,md,csv,json,pdf] [--out DIR] [--slack]

The work is `gpuwatch.report.produce`'s (periods, sources, formats, files); here are the
flags, the lines on stderr and the exit codes: 0 written (and Slack took the summary
when asked), 1 the source, a renderer or Slack failed, or the period holds no GPU data
(the report is written and says so; one line on stderr, no Slack), 2 bad usage or config.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import IO

from rich.console import Console
from rich.progress import Progress as RichProgress

from gpuwatch.cli import summary
from gpuwatch.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from gpuwatch.cli.history_flags import add_output_arguments, add_source_arguments
from gpuwatch.config import Config, load_config
from gpuwatch.core.text import plain_name
from gpuwatch.promapi.flags import (
    PrometheusFlagError,
    prometheus_options,
)
from gpuwatch.report.figures import period_text
from gpuwatch.report.pdf import PdfRendererMissingError
from gpuwatch.report.period import ReportUsageError, month_before, parse_period, utc_text
from gpuwatch.report.produce import (
    DataLoader,
    ReportSourceError,
    load_from_source,
    month_to_date_end,
    parse_formats,
    plan_from_source,
    produce,
)
from gpuwatch.report.slack import build_summary_message


def add_arguments(report: argparse.ArgumentParser) -> None:
    """`gpuwatch report`'s flags."""
    when = report.add_mutually_exclusive_group()
    when.add_argument("--month", metavar="YYYY-MM", help="a UTC month (default: this month)")
    when.add_argument("--from", dest="from_date", metavar="YYYY-MM-DD", help="first UTC day")
    report.add_argument("--to", dest="to_date", metavar="YYYY-MM-DD", help="last UTC day, included")
    add_source_arguments(report, rules=True)
    add_output_arguments(
        report,
        formats_help="comma-separated: html,md,csv,json,pdf (default: json on stdout without "
        "--out, html,md,csv,json with it)",
    )
    report.add_argument(
        "--slack", action="store_true", help="send a summary through the Slack webhook"
    )


def run(args: argparse.Namespace) -> int:
    """Run `gpuwatch report` with the `--config` file."""
    return run_report(args, load_config(args.config))


class _RichProgress:
    """A rich progress bar on stderr (only on a terminal)."""

    def __init__(self, stream: IO[str]) -> None:
        self._bar = RichProgress(transient=True, console=Console(file=stream))
        self._task = self._bar.add_task("querying", total=None)
        self._bar.start()

    def __call__(self, done: float, total: float) -> None:
        self._bar.update(self._task, completed=done, total=total)

    def close(self) -> None:
        self._bar.stop()


def run_report(
    args: argparse.Namespace,
    config: Config,
    *,
    loader: DataLoader = load_from_source,
    now: datetime | None = None,
    environ: Mapping[str, str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    slack_sleep: Callable[[float], object] | None = None,
) -> int:
    """Run `gpuwatch report` with the loaded config; returns the exit code."""
    out_stream = stdout or sys.stdout
    err = stderr or sys.stderr
    env = os.environ if environ is None else environ
    made = now or datetime.now(UTC)  # "Generated": the wall clock, not the period's end
    moment = made
    try:
        prometheus = prometheus_options(args)
        if now is None and loader is load_from_source:
            moment = month_to_date_end(moment, config, prometheus)
        period = parse_period(args.month, args.from_date, args.to_date, moment)
        formats = parse_formats(args.formats, args.out is not None)
    except (ReportUsageError, PrometheusFlagError) as exc:
        print(f"gpuwatch: {exc}", file=err)
        return EXIT_USAGE
    webhook = None
    if args.slack:
        webhook = summary.webhook(config, env, err)
        if webhook is None:
            return EXIT_USAGE
    progress = _RichProgress(err) if args.prometheus and err.isatty() else None
    generated = utc_text(made)
    try:
        outcome = produce(
            config,
            period,
            formats=formats,
            out=args.out,
            loader=loader,
            prometheus=prometheus,
            progress=progress,
            previous_period=None if args.from_date else month_before(period),
            generated=generated,
            stdout=out_stream,
            planner=plan_from_source if loader is load_from_source else None,
        )
    except (ReportSourceError, PdfRendererMissingError) as exc:
        print(f"gpuwatch: {exc}", file=err)
        return EXIT_FAILURE
    except ModuleNotFoundError as exc:
        print(f"gpuwatch: this build has no report source {exc.name!r}", file=err)
        return EXIT_FAILURE
    except OSError as exc:
        print(f"gpuwatch: cannot write the report to {args.out}: {exc.strerror}", file=err)
        return EXIT_FAILURE
    finally:
        if progress is not None:
            progress.close()
    for path in outcome.files:
        print(f"gpuwatch: wrote {path}", file=err)
    if not outcome.report.gpus:
        source = plain_name(outcome.report.source)
        print(f"gpuwatch: no GPU data in {period_text(period)} from {source}", file=err)
        return EXIT_FAILURE
    if webhook is None:
        return EXIT_OK
    payload = build_summary_message(outcome.report, tuple(p.name for p in outcome.files))
    return summary.send(payload, config, webhook, err, slack_sleep)
