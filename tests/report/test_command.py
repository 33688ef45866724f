"""`gpuwatch report`: periods, formats, files, stdout, errors, with a test data loader."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuwatch.cli import _parser, main
from gpuwatch.cli.report import run_report
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.install import installed_from
from gpuwatch.report.model import Period, ReportData
from gpuwatch.report.period import ReportUsageError, parse_period
from gpuwatch.report.produce import SourceRequest, parse_formats
from tests.report.data import month_data, sample_data

CHECKOUT = installed_from()

NOW = datetime(2026, 11, 14, 9, 30, tzinfo=UTC)


class Loader:
    """Answers each period with the data given for its label; records the requests."""

    def __init__(self, by_label: dict[str, ReportData]) -> None:
        self.by_label = by_label
        self.requests: list[SourceRequest] = []

    def __call__(self, request: SourceRequest) -> ReportData:
        self.requests.append(request)
        data = self.by_label.get(request.period.label)
        if data is None:
            return ReportData(request.period, ())
        return data


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run(argv: list[str], loader: Loader, config: Config | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = _parser().parse_args(["report", *argv])
    code = run_report(
        args, config or Config(), loader=loader, now=NOW, stdout=out, stderr=err, environ={}
    )
    return code, out.getvalue(), err.getvalue()


def test_a_past_month_is_whole_and_utc() -> None:
    period = parse_period("2026-10", None, None, NOW)
    assert (period.start, period.end) == (
        datetime(2026, 10, 1, tzinfo=UTC),
        datetime(2026, 11, 1, tzinfo=UTC),
    )
    assert not period.month_to_date
    december = parse_period("2025-12", None, None, NOW)
    assert december.end == datetime(2026, 1, 1, tzinfo=UTC)


def test_the_month_in_progress_is_month_to_date() -> None:
    for period in (parse_period("2026-11", None, None, NOW), parse_period(None, None, None, NOW)):
        assert period.label == "2026-11"
        assert (period.start, period.end) == (datetime(2026, 11, 1, tzinfo=UTC), NOW)
        assert period.month_to_date


def test_days_include_the_last_one() -> None:
    period = parse_period(None, "2026-10-03", "2026-10-17", NOW)
    assert (period.start, period.end) == (
        datetime(2026, 10, 3, tzinfo=UTC),
        datetime(2026, 10, 18, tzinfo=UTC),
    )
    assert period.label == "2026-10-03 to 2026-10-17"


@pytest.mark.parametrize(
    ("month", "first", "last", "message"),
    [
        ("2026-13", None, None, "expected YYYY-MM"),
        ("2026-12", None, None, "has not started yet"),
        (None, "2026-10-03", None, "--from needs --to"),
        (None, None, "2026-10-03", "--to needs --from"),
        (None, "2026-10-05", "2026-10-03", "--to is before --from"),
        (None, "2026-10-5x", "2026-10-07", "expected a date"),
    ],
)
def test_bad_periods(month: str | None, first: str | None, last: str | None, message: str) -> None:
    with pytest.raises(ReportUsageError, match=message):
        parse_period(month, first, last, NOW)


def test_formats() -> None:
    assert parse_formats(None, has_out=False) == ("json",)
    assert parse_formats(None, has_out=True) == ("html", "md", "csv", "json")
    assert parse_formats("pdf, HTML,pdf", has_out=True) == ("pdf", "html")
    with pytest.raises(ReportUsageError, match="without --out"):
        parse_formats("html", has_out=False)
    with pytest.raises(ReportUsageError, match="choose among"):
        parse_formats("html,xlsx", has_out=True)


def test_json_goes_to_stdout_without_out() -> None:
    loader = Loader(
        {"2026-10": month_data(2026, 10, 120.0, 30.0), "2026-09": month_data(2026, 9, 100.0, 50.0)}
    )
    code, out, err = _run(["--month", "2026-10"], loader)
    assert code == 0, err
    document = json.loads(out)
    assert document["period"]["label"] == "2026-10"
    assert document["total_cost_usd"] == 120.0
    assert document["previous_period"] == "2026-09"  # month over month
    assert [r.period.label for r in loader.requests] == ["2026-10", "2026-09"]
    assert all(r.prometheus is None for r in loader.requests)
    assert err == ""


def test_a_month_to_date_is_compared_with_the_same_span_of_the_month_before() -> None:
    """On the 14th at 09:30 the month to date is compared with Oct 1 00:00 to Oct 14
    09:30, not with the whole of October, and every format says so (label and note)."""
    same_span = "2026-10-01 00:00 UTC to 2026-10-14 09:30 UTC (the same span of 2026-10)"
    previous = month_data(2026, 10, 100.0, 50.0)
    previous = replace(
        previous,
        period=Period(
            datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 10, 14, 9, 30, tzinfo=UTC), same_span
        ),
    )
    current = month_data(2026, 11, 120.0, 30.0)
    current = replace(
        current,
        period=Period(datetime(2026, 11, 1, tzinfo=UTC), NOW, "2026-11", month_to_date=True),
    )
    loader = Loader({"2026-11": current, same_span: previous})
    code, out, err = _run(["--month", "2026-11"], loader)
    assert code == 0, err
    first, before = (r.period for r in loader.requests)
    assert (first.start, first.end) == (datetime(2026, 11, 1, tzinfo=UTC), NOW)
    assert (before.start, before.end) == (
        datetime(2026, 10, 1, tzinfo=UTC),
        datetime(2026, 10, 14, 9, 30, tzinfo=UTC),
    )
    document = json.loads(out)
    assert document["previous_period"] == same_span
    assert any(
        n.startswith("month over month: this month to date (13.40 days) against the same span")
        for n in document["notes"]
    )
    changes = {c["name"]: c for c in document["changes"]}
    assert changes["total cost"]["relative"] == pytest.approx(0.2)


def test_a_whole_month_is_compared_with_the_whole_month_before() -> None:
    loader = Loader(
        {"2026-10": month_data(2026, 10, 120.0, 30.0), "2026-09": month_data(2026, 9, 100.0, 50.0)}
    )
    code, out, err = _run(["--month", "2026-10"], loader)
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert (
        "month over month: 2026-10 (31.00 days) against 2026-09 (30.00 days), whole month "
        "against whole month"
    ) in notes


def test_files_in_out(tmp_path: Path) -> None:
    loader = Loader({"2026-10-01 to 2026-10-02": sample_data()})
    code, out, err = _run(
        [
            "--from",
            "2026-10-01",
            "--to",
            "2026-10-02",
            "--out",
            str(tmp_path / "r"),
            "--format",
            "html,md,csv,json",
        ],
        loader,
    )
    assert code == 0, err
    assert out == ""
    names = sorted(p.name for p in (tmp_path / "r").iterdir())
    stem = "gpuwatch-report-2026-10-01_2026-10-02"
    assert names == [f"{stem}.{ext}" for ext in ("csv", "html", "json", "md")]
    assert f"wrote {tmp_path / 'r' / stem}.html" in err
    assert len(loader.requests) == 1  # days: no month over month
    document = json.loads((tmp_path / "r" / f"{stem}.json").read_text())
    assert document["total_cost_usd"] == pytest.approx(187.2)


def test_prometheus_url_reaches_the_source_and_no_progress_on_a_pipe() -> None:
    loader = Loader({"2026-10": month_data(2026, 10, 120.0, 30.0)})
    code, _, _ = _run(["--month", "2026-10", "--prometheus", "http://127.0.0.1:9090"], loader)
    assert code == 0
    options = loader.requests[0].prometheus
    assert options is not None
    assert options.url == "http://127.0.0.1:9090"
    assert loader.requests[0].progress is None


def test_progress_bar_on_a_terminal() -> None:
    seen: list[bool] = []

    def loader(request: SourceRequest) -> ReportData:
        seen.append(request.progress is not None)
        if request.progress is not None:
            request.progress(1, 2)
            request.progress(2, 2)
        return month_data(2026, request.period.start.month, 120.0, 30.0)

    args = _parser().parse_args(
        ["report", "--month", "2026-10", "--prometheus", "http://127.0.0.1:9090"]
    )
    code = run_report(
        args, Config(), loader=loader, now=NOW, stdout=io.StringIO(), stderr=Tty(), environ={}
    )
    assert code == 0
    assert seen == [True, False]  # the month, then the month before (no bar)


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert _run(["--month", "2027-01"], Loader({}))[0] == 2
    code, _, err = _run(["--format", "html"], Loader({}))
    assert code == 2
    assert "without --out" in err
    code, _, err = _run(["--slack"], Loader({}))
    assert code == 2
    assert "no Slack webhook configured" in err


def test_a_failing_source_is_one_line_exit_1() -> None:
    def broken(request: SourceRequest) -> ReportData:
        raise ModuleNotFoundError("no module", name="gpuwatch.report.local")

    args = _parser().parse_args(["report"])
    err = io.StringIO()
    code = run_report(args, Config(), loader=broken, now=NOW, stdout=io.StringIO(), stderr=err)
    assert code == 1
    assert err.getvalue().count("\n") == 1
    assert "gpuwatch.report.local" in err.getvalue()


def test_unwritable_out_is_one_line_exit_1(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = _run(["--month", "2026-10", "--out", str(blocker / "sub")], Loader({}))
    assert code == 1
    assert "cannot write the report" in err


def test_cli_wires_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--month", "2026-13"]) == 2
    assert "expected YYYY-MM" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["report", "--month", "2026-10", "--from", "2026-10-01"])  # mutually exclusive


def test_config_report_section_defaults(tmp_path: Path) -> None:
    config = Config(agent=AgentConfig(state_dir=tmp_path))
    assert config.report.enabled is False
    assert config.report.formats == ["html", "md", "csv", "json"]


def test_a_missing_pdf_renderer_is_one_line_before_any_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "weasyprint", None)  # `import weasyprint` fails
    loader = Loader({})
    code, _, err = _run(["--month", "2026-10", "--out", str(tmp_path), "--format", "pdf"], loader)
    assert code == 1
    assert err.count("\n") == 1
    assert f"-m pip install '{CHECKOUT}[pdf]'" in err  # this project, not PyPI's `gpuwatch`
    assert loader.requests == []


def test_prometheus_flags_become_options_and_a_bad_one_is_a_usage_error(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("secret-token\n")
    loader = Loader({"2026-10": month_data(2026, 10, 120.0, 30.0)})
    args = [
        "--month",
        "2026-10",
        "--prometheus",
        "https://mimir.example:8080/prometheus",
        "--prometheus-header",
        "X-Scope-OrgID: team-a",
        "--prometheus-bearer-token-file",
        str(token),
        "--prometheus-timeout",
        "5",
    ]
    code, _, err = _run(args, loader)
    assert code == 0, err
    options = loader.requests[0].prometheus
    assert options.headers == (("X-Scope-OrgID", "team-a"),)
    assert options.bearer_token_file == token
    assert options.timeout_seconds == 5.0
    code, _, err = _run([*args, "--prometheus-header", "no colon here"], loader)
    assert code == 2
    assert err.startswith("gpuwatch: --prometheus-header")
    assert "secret-token" not in err
