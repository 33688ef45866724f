"""The formats: HTML escaping and charts, Markdown escaping, JSON keys, CSV columns."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from gpuwatch.report.build import build_report
from gpuwatch.report.csv_format import COLUMNS, render_csv
from gpuwatch.report.html import render_html
from gpuwatch.report.json_format import render_json
from gpuwatch.report.markdown import render_markdown
from tests.report.data import sample_data

EVIL_HOST = '<script>alert("host")</script>'
EVIL_GPU = "<img src=x onerror=alert(1)>"
EVIL_SOURCE = "</td><script>alert('source')</script>"


class _Page(HTMLParser):
    """Elements, text and the bars of every chart, as a browser would parse them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.charts: list[dict[str, float]] = []  # per <svg>: bars and their total area

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.extend(attrs)
        values = dict(attrs)
        if tag == "svg":
            self.charts.append({"bars": 0, "area": 0.0})
        if tag == "rect" and values.get("class") == "bar":
            chart = self.charts[-1]
            chart["bars"] += 1
            chart["area"] += float(values["width"] or 0) * float(values["height"] or 0)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser


def test_html_names_with_markup_render_as_text() -> None:
    data = sample_data(host_a=EVIL_HOST, gpu_name=EVIL_GPU, source=EVIL_SOURCE)
    data = replace(data, notes=("<b>note</b>",), source="http://prom/<script>")
    page = render_html(build_report(data), generated="2026-11-01 01:00 UTC")
    parsed = _parse(page)
    assert "script" not in parsed.tags
    assert "img" not in parsed.tags
    assert "b" not in parsed.tags
    assert not any(name.startswith("on") for name, _ in parsed.attributes)
    text = "".join(parsed.text)
    assert EVIL_HOST in text  # shown to the reader as it is
    assert EVIL_GPU in text
    assert EVIL_SOURCE in text
    assert "<script>" not in page  # only ever as &lt;script&gt;
    assert "javascript" not in page.lower()


def test_html_every_chart_has_data() -> None:
    page = render_html(build_report(sample_data()))
    parsed = _parse(page)
    assert len(parsed.charts) == 2  # cost per day, most wasteful GPUs
    for chart in parsed.charts:
        assert chart["bars"] > 0
        assert chart["area"] > 0
    # cost per day: day 1 has idle and other, day 2 held and other
    day_chart = re.search(r'<svg[^>]*data-chart="cost-per-day".*?</svg>', page, re.S)
    assert day_chart is not None
    assert day_chart.group(0).count('class="bar"') == 4


def test_html_without_data_draws_no_empty_chart() -> None:
    data = replace(sample_data(), gpu_days=(), token_days=())
    parsed = _parse(render_html(build_report(data)))
    assert parsed.charts == []
    assert "Cost per day: no data for this period." in "".join(parsed.text)


def test_an_empty_period_says_it_has_no_data_not_that_nothing_was_wasted() -> None:
    empty = build_report(replace(sample_data(), gpu_days=(), token_days=()))
    for page in (render_html(empty), render_markdown(empty)):
        assert "no GPU was observed, so none can be called wasteful" in page
        assert "No GPU wasted anything" not in page
    wasteless = build_report(sample_data())
    wasteless = replace(wasteless, top_waste=())
    for page in (render_html(wasteless), render_markdown(wasteless)):
        assert "No GPU wasted anything in this period." in page
        assert "no data for this period" not in page.split("most wasteful GPUs")[1].split("<h2>")[0]


def test_html_is_self_contained() -> None:
    page = render_html(build_report(sample_data()))
    assert "<script" not in page.lower()
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing loaded from elsewhere
    assert "<svg" in page
    assert "<style>" in page


def test_html_shows_the_kpis() -> None:
    text = "".join(_parse(render_html(build_report(sample_data()))).text).replace("\u00a0", " ")
    for figure in (
        "$187.20",
        "$79.20 (42.3 % of the cost)",
        "$36.00",
        "$1,679.00 (idle $584.00 + held $0.00 + right-sizing $1,095.00)",
        "35.7 %",
        "$140.00",
        "$35.00",
        "$28.00",
        "75.0 %",
        "renting is cheaper by $120.00/month",
    ):
        assert figure in text, figure


def test_markdown_escapes_names() -> None:
    data = sample_data(host_a="a|b*c*_[x](http://e)", gpu_name="<b>GPU</b>")
    text = render_markdown(build_report(data))
    assert "a\\|b\\*c\\*\\_\\[x\\](http://e)" in text
    assert "&lt;b&gt;GPU&lt;/b&gt;" in text
    assert "<b>" not in text
    # every table row has as many cells as its header: the name's | added no column
    lines = text.splitlines()
    tables = 0
    for n, line in enumerate(lines):
        if line.startswith("|") and n + 1 < len(lines) and lines[n + 1].startswith("| ---"):
            tables += 1
            cells = len(re.findall(r"(?<!\\)\|", line))
            m = n + 2
            while m < len(lines) and lines[m].startswith("|"):
                assert len(re.findall(r"(?<!\\)\|", lines[m])) == cells, lines[m]
                m += 1
    assert tables >= 5


def test_json_has_the_documented_keys_and_figures() -> None:
    document = json.loads(render_json(build_report(sample_data())))
    for key in (
        "period",
        "coverage_ratio",
        "total_cost_usd",
        "idle_cost_usd",
        "held_cost_usd",
        "savings_usd_per_month",
        "usd_per_million_tokens",
        "gpus",
    ):
        assert key in document, key
    assert document["period"]["start"] == "2026-10-01T00:00:00+00:00"
    assert document["period"]["end"] == "2026-10-03T00:00:00+00:00"
    assert document["coverage_ratio"] == pytest.approx(0.75)
    assert document["total_cost_usd"] == pytest.approx(187.2)
    assert document["idle_cost_usd"] == pytest.approx(79.2)
    assert document["held_cost_usd"] == pytest.approx(36.0)
    assert document["savings_usd_per_month"] == pytest.approx(1679.0)
    assert document["savings"] == pytest.approx(
        {
            "idle_usd_per_month": 584.0,
            "held_usd_per_month": 0.0,
            "rightsizing_usd_per_month": 1095.0,
            "total_usd_per_month": 1679.0,
        }
    )
    assert document["usd_per_million_tokens"] == pytest.approx(
        {"prompt": 35.0, "generation": 140.0, "all": 28.0}
    )
    gpu = document["gpus"][0]
    for key in ("host", "uuid", "name", "cost_usd", "idle_cost_usd", "busy_ratio", "state_seconds"):
        assert key in gpu, key
    assert (gpu["host"], gpu["uuid"], gpu["cost_usd"]) == ("alpha", "GPU-a", 96.0)
    assert gpu["busy_ratio"] == pytest.approx(64800 / 172800)
    assert gpu["state_seconds"] == {
        "busy": 64800.0,
        "idle": 43200.0,
        "held": 64800.0,
        "unknown": 0.0,
    }


def test_json_absent_figures_are_null() -> None:
    document = json.loads(
        render_json(
            build_report(
                replace(sample_data(), gpu_days=(), token_days=(), expected_gpu_seconds=None)
            )
        )
    )
    assert document["coverage_ratio"] is None
    assert document["busy_ratio"] is None
    assert document["usd_per_million_tokens"] == {"prompt": None, "generation": None, "all": None}
    assert document["gpus"] == []


def test_csv_one_row_per_day_and_gpu() -> None:
    data = sample_data()
    rows = list(csv.DictReader(io.StringIO(render_csv(data))))
    assert tuple(rows[0].keys()) == COLUMNS
    assert len(rows) == len(data.gpu_days) == 5
    assert [(r["window_start"], r["host"], r["uuid"]) for r in rows] == [
        ("2026-10-01T00:00:00Z", "alpha", "GPU-a"),
        ("2026-10-01T00:00:00Z", "alpha", "GPU-b"),
        ("2026-10-01T00:00:00Z", "beta", "GPU-c"),
        ("2026-10-02T00:00:00Z", "alpha", "GPU-a"),
        ("2026-10-02T00:00:00Z", "alpha", "GPU-b"),
    ]
    first = rows[0]
    assert first["window_end"] == "2026-10-02T00:00:00Z"
    assert float(first["gpu_hours"]) == 24.0
    assert float(first["gpu_efficiency"]) == 0.5
    assert float(first["total_cost"]) == 48.0
    assert first["energy_joules"] == ""  # absent, not 0
    assert sum(float(r["total_cost"]) for r in rows) == pytest.approx(187.2)
    assert sum(float(r["idle_cost"]) for r in rows) == pytest.approx(79.2)
    assert rows[4]["gpu_efficiency"] == ""  # unknown time only


def test_csv_names_cannot_be_formulas() -> None:
    text = render_csv(sample_data(host_a='=HYPERLINK("http://x")', gpu_name='+1,"2"\n3'))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0]["host"] == '\'=HYPERLINK("http://x")'
    assert rows[0]["gpu_name"] == '\'+1,"2"\n3'  # quoted by csv, kept whole
