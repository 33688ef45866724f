"""`gpuwatch report`: pick the period, load it from a source, write the formats, tell Slack.

    gpuwatch report [--month YYYY-MM | --from DATE --to DATE]
                    [--source local | --prometheus URL] [--config F]
                    [--format html,md,csv,json,pdf] [--out DIR] [--slack]

Periods are UTC. `--month` covers the month; the month in progress is month to date
(it ends now: the source stops at its last sample). `--from`/`--to` are whole days,
`--to` included. Without either: the current month to date. Without `--out` the only
format is JSON, on stdout. The source is loaded through `DataLoader`: the default one
imports `gpuwatch.report.local` or `gpuwatch.report.prometheus` when it is needed;
tests pass their own.

"Generated" is when the report was made (the wall clock), whatever period it covers;
its fleet plan carries its own time and lookback (`gpuwatch.plan.render.stands_on`).

Exit codes: 0 written (and Slack took the summary when asked), 1 the source, a renderer
or Slack failed, or the period holds no GPU data (the report is written and says so;
one line on stderr, no Slack), 2 bad usage or config.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

from gpuwatch.config import Config
from gpuwatch.core.text import plain_name
from gpuwatch.plan.make import PlanSourceError, make_plan
from gpuwatch.plan.model import PlanOptions
from gpuwatch.promapi.flags import (
    PrometheusFlagError,
    add_prometheus_arguments,
    prometheus_options,
)
from gpuwatch.report.build import build_report
from gpuwatch.report.figures import period_text
from gpuwatch.report.model import Period, ReportData
from gpuwatch.report.period import (
    ReportUsageError,
    month_before,
    parse_period,
    utc_text,
)
from gpuwatch.report.result import Report

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

FORMATS = ("html", "md", "csv", "json", "pdf")
DEFAULT_FILE_FORMATS = ("html", "md", "csv", "json")

Progress = Callable[[float, float], None]
"""progress(done, total): how far a source is, in any unit it likes."""


class ReportSourceError(Exception):
    """The source could not produce the period's data: one line, exit 1."""


@dataclass(frozen=True, slots=True)
class SourceRequest:
    """What a source is asked for."""

    config: Config
    period: Period
    prometheus: Any  # a promapi.client.PrometheusOptions; None: the host's history
    progress: Progress | None  # None on a pipe


class DataLoader(Protocol):
    """Loads one period's ReportData from a source."""

    def __call__(self, request: SourceRequest) -> ReportData:
        """The data; raises ReportSourceError (or the source's own errors)."""
        ...


Planner = Callable[[SourceRequest], Any]
"""Makes the report's "What the fleet should be" (a `gpuwatch.plan.render.PlanReport`)
for the request's period and source; raises `gpuwatch.plan.make.PlanSourceError`."""


def plan_from_source(request: SourceRequest) -> Any:
    """The production planner: `gpuwatch plan` over the report's period, same source,
    the config's headroom and candidates."""
    analysis = request.config.analysis
    candidates = analysis.candidate_gpus
    options = PlanOptions(
        headroom_ratio=analysis.headroom_ratio,
        candidate_gpu_ids=None if candidates is None else tuple(candidates),
    )
    days = (request.period.end_epoch - request.period.start_epoch) / 86400.0
    return make_plan(
        request.config,
        options,
        days=days,
        end_epoch=request.period.end_epoch,
        prometheus=request.prometheus,
        generated=utc_text(datetime.now(UTC)),  # when the plan is computed
    )


def with_plan(report: Report, planner: Planner, request: SourceRequest) -> Report:
    """`report` with its fleet plan, or with a note saying why it has none."""
    try:
        plan = planner(request)
    except PlanSourceError as exc:
        return replace(report, notes=(*report.notes, f"no fleet plan: {exc}"))
    if plan is None or not plan.needs:
        return report
    return replace(report, fleet_plan=plan)


def load_from_source(request: SourceRequest) -> ReportData:
    """The production loader: the history store, or a Prometheus-compatible API."""
    if request.prometheus is None:
        local: Any = importlib.import_module("gpuwatch.report.local")
        from gpuwatch.history.store import HistoryStoreError  # noqa: PLC0415

        try:
            data = local.load(request.config, request.period)
        except HistoryStoreError as exc:
            raise ReportSourceError(str(exc)) from None
    else:
        prometheus: Any = importlib.import_module("gpuwatch.report.prometheus")
        try:
            data = prometheus.load(request.prometheus, request.period, request.progress)
        except prometheus.PrometheusError as exc:
            raise ReportSourceError(str(exc)) from None
    if not isinstance(data, ReportData):
        raise ReportSourceError(f"the source returned {type(data).__name__}, not ReportData")
    return data


def add_report_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add `report` to the CLI's subcommands."""
    report = subparsers.add_parser(
        "report", help="the GPU cost report of a month (or days) from local history or Prometheus"
    )
    when = report.add_mutually_exclusive_group()
    when.add_argument("--month", metavar="YYYY-MM", help="a UTC month (default: this month)")
    when.add_argument("--from", dest="from_date", metavar="YYYY-MM-DD", help="first UTC day")
    report.add_argument("--to", dest="to_date", metavar="YYYY-MM-DD", help="last UTC day, included")
    source = report.add_mutually_exclusive_group()
    source.add_argument(
        "--source", choices=("local",), default="local", help="this host's history (default)"
    )
    source.add_argument("--prometheus", metavar="URL", help="a Prometheus-compatible API (fleet)")
    add_prometheus_arguments(report)
    report.add_argument("--config", type=Path, help="TOML config file")
    report.add_argument(
        "--format",
        dest="formats",
        metavar="LIST",
        help="comma-separated: html,md,csv,json,pdf (default: json on stdout without --out, "
        "html,md,csv,json with it)",
    )
    report.add_argument("--out", type=Path, metavar="DIR", help="directory for the files")
    report.add_argument(
        "--slack", action="store_true", help="send a summary through the Slack webhook"
    )
    return report


def month_to_date_end(now: datetime, config: Config, prometheus: Any) -> datetime:
    """Where a month in progress ends: the source's last sample when there is one this
    month (the hour under way included; later than the wall clock for a simulated run
    ahead of it), else `now`. A source that cannot be read answers later, in `produce`."""
    try:
        if prometheus is None:
            history: Any = importlib.import_module("gpuwatch.history.store")
            last = history.last_sample_epoch(config.agent.state_dir)
        else:
            source: Any = importlib.import_module("gpuwatch.report.prometheus")
            last = source.last_sample_epoch(prometheus, now.timestamp())
    except Exception:  # noqa: BLE001 -- the load itself reports the source's failure
        return now
    if last is None:
        return now
    sample = datetime.fromtimestamp(last, UTC)
    month_start = datetime(now.year, now.month, 1, tzinfo=UTC)
    return sample if sample >= month_start else now


def parse_formats(text: str | None, has_out: bool) -> tuple[str, ...]:
    """The formats asked for, checked against `--out`."""
    if text is None:
        return DEFAULT_FILE_FORMATS if has_out else ("json",)
    formats = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    unknown = [name for name in formats if name not in FORMATS]
    if unknown or not formats:
        raise ReportUsageError(
            f"--format {text!r}: choose among {', '.join(FORMATS)} (comma-separated)"
        )
    if not has_out and formats != ("json",):
        raise ReportUsageError("without --out only --format json can be written (to stdout)")
    return formats


# -- writing -------------------------------------------------------------------------


def file_stem(period: Period) -> str:
    """`gpuwatch-report-2026-10` or `gpuwatch-report-2026-10-03_2026-10-17`."""
    return "gpuwatch-report-" + period.label.replace(" to ", "_").replace(" ", "_")


def render(report: Report, data: ReportData, fmt: str, generated: str) -> bytes:
    """One format's bytes (imports each renderer only when asked for)."""
    if fmt == "html":
        from gpuwatch.report.html import render_html  # noqa: PLC0415

        return render_html(report, generated).encode()
    if fmt == "md":
        from gpuwatch.report.markdown import render_markdown  # noqa: PLC0415

        return render_markdown(report, generated).encode()
    if fmt == "csv":
        from gpuwatch.report.csv_format import render_csv  # noqa: PLC0415

        return render_csv(data).encode()
    if fmt == "json":
        from gpuwatch.report.json_format import render_json  # noqa: PLC0415

        return render_json(report, generated).encode()
    if fmt == "pdf":
        from gpuwatch.report.html import render_html  # noqa: PLC0415
        from gpuwatch.report.pdf import render_pdf  # noqa: PLC0415

        return render_pdf(render_html(report, generated))
    raise AssertionError(fmt)


def write_files(
    report: Report, data: ReportData, formats: Sequence[str], out: Path, generated: str
) -> list[Path]:
    """Write each format to `out` (created), each file atomically; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out / f"{file_stem(report.period)}.{fmt}"
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(render(report, data, fmt, generated))
        partial.replace(path)
        written.append(path)
        if fmt == "csv":
            written += _write_pods_csv(data, out / f"{file_stem(report.period)}-pods.csv")
    return written


def _write_pods_csv(data: ReportData, path: Path) -> list[Path]:
    """The per-pod CSV next to the GPU one, when the source has pods."""
    from gpuwatch.report.csv_format import render_pods_csv  # noqa: PLC0415

    text = render_pods_csv(data)
    if text is None:
        return []
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(text.encode())
    partial.replace(path)
    return [path]


# -- the command ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a report run produced."""

    report: Report
    files: tuple[Path, ...]


def produce(
    config: Config,
    period: Period,
    *,
    formats: Sequence[str],
    out: Path | None,
    loader: DataLoader,
    prometheus: Any = None,
    progress: Progress | None = None,
    previous_period: Period | None = None,
    generated: str = "",
    stdout: IO[str] | None = None,
    planner: Planner | None = None,
) -> Outcome:
    """Load, build and write one report; with `previous_period` (the month before a
    month), load that too for month-over-month changes (left out when it has no data).
    Raises ReportSourceError or the renderers' errors."""
    if "pdf" in formats:
        from gpuwatch.report.pdf import check_renderer  # noqa: PLC0415

        check_renderer()  # a missing renderer fails before minutes of queries
    data = loader(SourceRequest(config, period, prometheus, progress))
    previous = None
    if previous_period is not None:
        previous = loader(SourceRequest(config, previous_period, prometheus, None))
        if not previous.gpu_days:
            previous = None
    report = build_report(data, previous)
    if planner is not None:
        report = with_plan(report, planner, SourceRequest(config, period, prometheus, None))
    if out is None:
        assert stdout is not None, "stdout is needed without --out"
        stdout.write(render(report, data, "json", generated).decode())
        return Outcome(report, ())
    return Outcome(report, tuple(write_files(report, data, formats, out, generated)))


class _RichProgress:
    """A rich progress bar on stderr (only on a terminal)."""

    def __init__(self, stream: IO[str]) -> None:
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import Progress as RichProgress  # noqa: PLC0415

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
    from gpuwatch.alerts.command import NO_WEBHOOK  # noqa: PLC0415
    from gpuwatch.report.pdf import PdfRendererMissingError  # noqa: PLC0415
    from gpuwatch.slack.secret import resolve_webhook_url  # noqa: PLC0415

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
        webhook = resolve_webhook_url(config.alerts.slack, env)  # raises WebhookSecretError
        if webhook is None:
            print(f"gpuwatch: {NO_WEBHOOK}", file=err)
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
    return _tell_slack(outcome, config, webhook, err, slack_sleep)


def _tell_slack(
    outcome: Outcome,
    config: Config,
    webhook: str,
    err: IO[str],
    sleep: Callable[[float], object] | None,
) -> int:
    import time  # noqa: PLC0415

    from gpuwatch.report.slack import build_summary_message  # noqa: PLC0415
    from gpuwatch.slack.summary import send_summary  # noqa: PLC0415

    payload = build_summary_message(outcome.report, tuple(p.name for p in outcome.files))
    result = send_summary(
        payload,
        config.alerts.slack,
        webhook,
        config.agent.state_dir,
        now=time.time,
        sleep=sleep or time.sleep,
    )
    print(f"gpuwatch: {result.line}", file=err)
    return EXIT_FAILURE if result.failed else EXIT_OK
