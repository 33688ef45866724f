"""Produce a report: pick the period, load it from a source, build it, write the formats.

Periods are UTC. `--month` covers the month; the month in progress is month to date
(it ends now: the source stops at its last sample). `--from`/`--to` are whole days,
`--to` included. Without either: the current month to date. Without `--out` the only
format is JSON, on stdout. The source is loaded through `DataLoader`: the default one
imports `gpuwatch.report.local` or `gpuwatch.report.prometheus` when it is needed;
tests pass their own.

"Generated" is when the report was made (the wall clock), whatever period it covers;
its fleet plan carries its own time and lookback (`gpuwatch.plan.render.stands_on`).

The command (`gpuwatch report`: its flags, exit codes and lines on stderr) is
`gpuwatch.cli.report`; the scheduled report (`gpuwatch.report.scheduled`) uses this
module too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

from gpuwatch.config import Config
from gpuwatch.core.paths import write_atomic
from gpuwatch.plan.make import PlanSourceError, make_plan
from gpuwatch.plan.model import PlanOptions
from gpuwatch.report.build import build_report
from gpuwatch.report.model import Period, ReportData
from gpuwatch.report.period import ReportUsageError, utc_text
from gpuwatch.report.result import Report

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
        no_time_slicing_namespaces=frozenset(request.config.plan.no_time_slicing_namespaces),
        quotas=tuple((q.namespace, q.resource, q.limit) for q in request.config.plan.quotas),
        min_saving_usd_per_month=request.config.plan.min_saving_usd_per_month,
        context_switch_ratio=request.config.plan.context_switch_ratio,
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
        write_atomic(path, render(report, data, fmt, generated))
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
    write_atomic(path, text.encode())
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
