"""The one money formatter, the one name sanitiser and the per-medium escapers
(`gpuwatch.core.text`), pinned through every output that used to carry its own copy."""

from __future__ import annotations

from gpuwatch.billing.health import SourceHealth
from gpuwatch.cli import tco as tco_command
from gpuwatch.core import health, text, units
from gpuwatch.core.text import MAX_NAME_CHARS, html_escape, md_escape, plain_name, usd
from gpuwatch.plan import render as plan_render
from gpuwatch.report import html as report_html
from gpuwatch.report import markdown as report_markdown
from gpuwatch.slack.mrkdwn import header_text as slack_plain_name
from gpuwatch.status import table


def test_money_is_one_format_everywhere() -> None:
    """Negative dollars are `-$1.50` in every output (the alerts, status table and tco
    wrote `$-1.50` before the merge: the one behaviour change here)."""
    assert usd(1234.5) == "$1,234.50"
    assert usd(-1.5) == "-$1.50"
    assert usd(None) == "n/a"
    assert table._usd(-1.5) == "-$1.50"
    assert table._usd(None) == "-"
    assert tco_command.usd is usd


def test_one_name_rule_for_terminal_and_plain_text() -> None:
    """One line, control characters as escapes, cut at the limit with a visible "…"."""
    assert plain_name("a\nb\x1bc") == "a\\nb\\x1bc"
    long = "x" * (MAX_NAME_CHARS + 5)
    assert plain_name(long) == "x" * (MAX_NAME_CHARS - 1) + "…"
    assert len(plain_name(long)) == MAX_NAME_CHARS
    assert plain_name("x" * MAX_NAME_CHARS) == "x" * MAX_NAME_CHARS
    # Slack's plain_text header keeps its own, shorter limit but the same cut rule.
    assert slack_plain_name("y" * 200, 80) == "y" * 79 + "…"


def test_markdown_escapes_hash_in_report_and_plan_alike() -> None:
    """The report and the plan section of the same document escape `#` alike (the
    report left it bare before the merge: the other behaviour change)."""
    name = "# team*_`[x]|~\\ <b>&"
    want = "\\# team\\*\\_\\`\\[x\\]\\|\\~\\\\ &lt;b&gt;&amp;"
    assert md_escape(name) == want
    assert report_markdown.md_escape(name) == want
    assert plan_render.md_escape(name) == want
    assert md_escape("a\nb") == "a\\\\nb"  # one line: the escape's backslash is escaped


def test_html_escape_is_shared() -> None:
    assert html_escape("<a href='x'>&\"") == "&lt;a href=&#x27;x&#x27;&gt;&amp;&quot;"
    assert report_html._e("<b>") == html_escape("<b>")


def test_units_are_defined_once() -> None:
    assert (units.KIB, units.MIB, units.GIB) == (2**10, 2**20, 2**30)
    assert (units.HOUR_SECONDS, units.DAY_SECONDS) == (3600, 86400)
    assert (units.HOURS_PER_YEAR, units.HOURS_PER_MONTH) == (8760, 730.0)
    assert text.duration(units.DAY_SECONDS * 3) == "3 days"


def test_backoff_is_shared_by_billing() -> None:
    assert [health.backoff_seconds(n, 10.0, 60.0) for n in range(5)] == [10, 20, 40, 60, 60]
    assert health.backoff_seconds(10_000, 10.0, 60.0) == 60.0
    source = SourceHealth("x", initial_backoff_seconds=10.0, max_backoff_seconds=60.0)
    source.failed(100.0, "down")
    source.failed(100.0, "down")
    assert source.retry_at == 120.0


def test_one_sanitiser_for_the_terminal_and_the_reports() -> None:
    """The status table uses `flatten` like the report, the plan and Slack: a no-break
    or ideographic space is shown as an escape (status' own copy kept them bare before
    the merge), the terminal controls as before."""
    assert table.flatten is text.flatten
    assert text.flatten("a\u00a0b\u3000c") == "a\\xa0b\\u3000c"
    assert text.flatten("\x1b[31mred \u202e") == "\\x1b[31mred \\u202e"
