"""What `gpuwatch plan` and `gpuwatch report` stand on, on the demo run
(tests/report_agreement/conftest.py: two simulated days, 2026-01-01 and 02, in the host's
history and in the Prometheus that stored the same scrapes).

- a lookback with no GPU data is one line and exit 1, never a "$0" plan, from either
  source; the report of such a period says so, has no plan, and exits 1;
- the plan says how much data it had in which lookback ("2 days of data in the 30-day
  lookback ..."), rounded for a reader, and when it was computed (the wall clock);
- the report's "Generated" is the wall clock, and its plan carries its own time;
- no sentence of ours is cut, in any format of the demo's plan and report (text,
  Markdown, HTML, JSON, Slack): each is there whole, and no "…" ends a part of one.
"""

from __future__ import annotations

import html
import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.cli import main
from gpuwatch.cli.plan import slack_payload
from gpuwatch.config import Config
from gpuwatch.plan.make import make_plan
from gpuwatch.plan.model import PlanOptions
from gpuwatch.plan.render import (
    assumptions,
    render_html,
    render_json,
    render_markdown,
    render_text,
    stands_on,
)
from gpuwatch.promapi.client import PrometheusOptions
from gpuwatch.report.produce import load_from_source, plan_from_source, produce
from gpuwatch.report.result import (
    IDLE_MEANING,
    OWNED_INPUTS_MEANING,
    RENT_VS_BUY_MEANING,
    SAVINGS_MEANING,
    STATES_MEANING,
    TOKENS_MEANING,
    UNUSED_SHARE_MEANING,
)
from gpuwatch.report.slack import build_summary_message
from tests.report_agreement.conftest import DAYS, Run

pytest.importorskip("highspy", reason="the plan extra (highspy) is in the test extra")

STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")


@pytest.fixture(scope="module")
def config_file(demo_run: Run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stands-on") / "gpuwatch.toml"
    path.write_text(
        f'[agent]\nhostname = "test-host"\nstate_dir = "{demo_run.config.agent.state_dir}"\n',
        encoding="utf-8",
    )
    return path


@pytest.fixture(params=["local", "prometheus"])
def source(request: pytest.FixtureRequest, demo_run: Run) -> list[str]:
    """The source flags: the host's history, or the Prometheus of the same run."""
    return [] if request.param == "local" else ["--prometheus", demo_run.prometheus_url]


def _minute(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M UTC").replace(tzinfo=UTC)


def _wall_clock(text: str, before: datetime, after: datetime) -> bool:
    """`text` (a UTC minute) is between the two wall-clock times, to the minute."""
    moment = _minute(text)
    return before.replace(second=0, microsecond=0) <= moment <= after


# -- no data -------------------------------------------------------------------------


def test_a_lookback_without_data_is_one_line_and_exit_1(
    config_file: Path, source: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main(
        ["plan", "--config", str(config_file), "--days", "2", "--until", "2025-06-01", *source]
    )
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""  # no "$0" plan
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert (
        "no GPU data in the 2-day lookback 2025-05-30 00:00 UTC to 2025-06-01 00:00 UTC" in lines[0]
    )
    assert "Traceback" not in err


def test_a_report_without_data_says_so_and_exits_1(
    config_file: Path, source: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main(
        ["report", "--config", str(config_file), "--from", "2025-06-01", "--to", "2025-06-02",
         "--format", "json", *source]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1
    document = json.loads(out)  # the report is still written, and says so
    assert document["fleet_plan"] is None
    assert "no GPU data for the period" in document["notes"]
    assert any(note.startswith("no fleet plan: no GPU data in") for note in document["notes"])
    assert (
        "no GPU data in 2025-06-01 00:00 UTC to 2025-06-03 00:00 UTC"
        in err.strip().splitlines()[-1]
    )


# -- what the plan stands on ---------------------------------------------------------


@pytest.mark.parametrize(
    ("days", "until", "expected"),
    [
        (
            "30",
            "2026-01-03",
            r"(2|2\.1) days of data in the 30-day lookback "
            r"2025-12-04 00:00 UTC to 2026-01-03 00:00 UTC\.",
        ),
        (
            "0.5",
            "2026-01-02T06:00",
            r"12 hours of data in the 12-hour lookback "
            r"2026-01-01 18:00 UTC to 2026-01-02 06:00 UTC\.",
        ),
        (
            "30",
            "2026-01-01",
            r"(1 hour|\d\d minutes) of data in the 30-day lookback "
            r"2025-12-02 00:00 UTC to 2026-01-01 00:00 UTC\.",
        ),
    ],
)
def test_the_plan_says_how_much_data_it_stands_on(
    *,
    config_file: Path,
    source: list[str],
    days: str,
    until: str,
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    capsys.readouterr()
    before = datetime.now(UTC)
    code = main(
        ["plan", "--config", str(config_file), "--days", days, "--until", until,
         "--format", "json", *source]
    )  # fmt: skip
    after = datetime.now(UTC)
    out, err = capsys.readouterr()
    assert code == 0, err
    document = json.loads(out)
    assert re.search(expected, document["stands_on"]), document["stands_on"]
    assert document["stands_on"].startswith(f"Computed {document['generated']} from ")
    assert _wall_clock(document["generated"], before, after)
    assert "Lookback:" not in json.dumps(document)
    assert not re.search(r"\d\.\d\d+ days", json.dumps(document))  # never "28.4596 days"


def test_the_report_is_dated_by_the_wall_clock_and_its_plan_by_its_own(
    config_file: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before = datetime.now(UTC)
    code = main(
        ["report", "--config", str(config_file), "--from", "2026-01-01", "--to", "2026-01-02",
         "--format", "html,md,json", "--out", str(tmp_path)]
    )  # fmt: skip
    after = datetime.now(UTC)
    assert code == 0, capsys.readouterr().err
    stem = tmp_path / "gpuwatch-report-2026-01-01_2026-01-02"
    document = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
    assert _wall_clock(document["generated"], before, after)
    plan = document["fleet_plan"]
    assert _wall_clock(plan["generated"], before, after)
    assert plan["stands_on"] == (
        f"Computed {plan['generated']} from 2 days of data in the 2-day lookback "
        "2026-01-01 00:00 UTC to 2026-01-03 00:00 UTC."
    )
    assert (plan["lookback_start"], plan["lookback_end"]) == (
        "2026-01-01 00:00 UTC",
        "2026-01-03 00:00 UTC",
    )
    page = stem.with_suffix(".html").read_text(encoding="utf-8")
    assert f"Generated: {document['generated']}" in page
    assert html.escape(plan["stands_on"], quote=True) in page
    assert f"Generated: {document['generated']}" in stem.with_suffix(".md").read_text("utf-8")


# -- no sentence of ours is cut ------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _readable(fmt: str, text: str) -> str:
    """What a reader reads of a format's text: tags, escapes and entities undone."""
    if fmt == "html":
        return html.unescape(re.sub(r"<[^>]+>", " ", text))
    if fmt == "md":
        return html.unescape(re.sub(r"\\(.)", r"\1", text))
    if fmt in ("json", "slack"):
        strings = "\n".join(_strings(json.loads(text)))
        return html.unescape(strings) if fmt == "slack" else strings
    return text


def _assert_nothing_cut(fmt: str, text: str, sentences: list[str]) -> None:
    """Each of our `sentences` is whole in what a reader reads, and no "…" ends a part
    of one (a name may end in "…": the short UUIDs of the HTML's tables, a long pod)."""
    readable = _readable(fmt, text)
    for sentence in sentences:
        assert sentence in readable, f"{fmt}: not whole: {sentence!r}"
    for match in re.finditer("…", readable):
        before = readable[: match.start()]
        for sentence in sentences:
            cut = next((k for k in range(12, len(sentence)) if before.endswith(sentence[:k])), 0)
            assert not cut, f"{fmt}: cut at {sentence[:cut]!r}…"


def test_no_sentence_of_the_demo_plan_is_cut(demo_run: Run) -> None:
    options = PlanOptions(headroom_ratio=demo_run.config.analysis.headroom_ratio)
    for prometheus in (None, PrometheusOptions(demo_run.prometheus_url)):
        report = make_plan(
            demo_run.config,
            options,
            days=DAYS,
            end_epoch=demo_run.period.end_epoch,
            prometheus=prometheus,
            generated="2026-11-28 04:41 UTC",
        )
        ours = [*assumptions(report), stands_on(report)]
        assert any(len(sentence) > 120 for sentence in ours)  # past the names' cap
        for fmt, text in (
            ("text", render_text(report)),
            ("md", render_markdown(report)),
            ("html", render_html(report)),
            ("json", render_json(report)),
        ):
            _assert_nothing_cut(fmt, text, ours)
        _assert_nothing_cut("slack", json.dumps(slack_payload(report)), [stands_on(report)])


def test_no_sentence_of_the_demo_report_is_cut(demo_run: Run, tmp_path: Path) -> None:
    config = Config.model_validate(
        {"agent": {"hostname": "test-host", "state_dir": str(demo_run.config.agent.state_dir)}}
    )
    outcome = produce(
        config,
        demo_run.period,
        formats=("html", "md", "json"),
        out=tmp_path,
        loader=load_from_source,
        generated="2026-11-28 04:41 UTC",
        planner=plan_from_source,
        stdout=io.StringIO(),
    )
    report = outcome.report
    assert report.fleet_plan is not None
    plan = report.fleet_plan
    meanings = [
        IDLE_MEANING,
        SAVINGS_MEANING,
        TOKENS_MEANING,
        UNUSED_SHARE_MEANING,
        STATES_MEANING,
        RENT_VS_BUY_MEANING,
    ]
    if report.rent_vs_buy_gpus:
        meanings.append(OWNED_INPUTS_MEANING)
    ours = [*report.notes, *assumptions(plan), stands_on(plan)]
    for path in outcome.files:
        fmt = path.suffix.lstrip(".")
        text = path.read_text(encoding="utf-8")
        _assert_nothing_cut(fmt, text, ours + (meanings if fmt != "json" else []))
    payload = build_summary_message(report, tuple(p.name for p in outcome.files))
    _assert_nothing_cut("slack", json.dumps(payload), [stands_on(plan)])
