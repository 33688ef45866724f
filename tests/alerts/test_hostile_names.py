"""Every Slack message kind with hostile names: what Slack accepts and nobody can abuse.

Alerts (new, changed, reminder, resolved), `gpuwatch alert test` and the report summary
are built from names a user or a process chose: `<!channel>`, `<@U123>`, mrkdwn
formatting, an unbalanced backtick, very long names, line breaks, control bytes and
undecodable bytes (read with surrogateescape). Each payload must pass slack_sdk's own
block models, stay within Slack's documented limits, carry no unescaped `<!`/`<@`, and
show every name as inline code (so `*`, `_`, `~` format nothing).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from gpuwatch.alerts.messages import build_alert_message, build_test_message
from gpuwatch.alerts.policy import AlertEvent, PodOnGpu
from gpuwatch.cli.alert import send_test_message
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import PodRef, ProcessSample
from gpuwatch.core.verdict import Recommendation
from gpuwatch.report.build import build_report
from gpuwatch.report.model import ReportData
from gpuwatch.report.slack import build_summary_message
from gpuwatch.slack.mrkdwn import BACKTICK_LOOKALIKE, clip_text, fit_lines, name_text
from tests.alerts.conftest import GIB, START, FakeSlack, gpu, snapshot, verdict
from tests.report.data import DAY1, gpu_day, sample_data, seconds

UNDECODABLE = b"gpu-\xff\xfe-node\x80".decode("utf-8", "surrogateescape")
HOSTILE = [
    "<!channel>",
    "<!here|here> <!everyone>",
    "<@U123>",
    "<#C123|general> <https://evil.example|click me>",
    "*bold*",
    "_x_",
    "~s~",
    "`unbalanced",
    "a`b`c` ```block```",
    "&amp; &lt;!channel&gt;",  # already "escaped": must show as typed, not unescape
    "line1\nline2\r\n> quote",
    "bell\x07esc\x1b[2Jnul\x00del\x7f",
    "\u202eevil\u2028x\u2029y\x85",
    UNDECODABLE,
    ":rotating_light: *_~`<!channel>`~_*",
    "x" * 5000,
    "<" * 3000,
    "&" * 3000,
    "`" * 999,
    "",
    " ",
    " " * 4000,
]
# Slack's documented limits (docs: Block Kit reference; REFERENCE.md "What real clusters
# and clients do"); slack_sdk's validate_json checks some of them, the test all of them.
SECTION_TEXT_MAX = 3000
FIELD_MAX = 2000
FIELDS_MAX = 10
HEADER_MAX = 150
BLOCKS_MAX = 50
TOP_TEXT_MAX = 3000
CODE = re.compile(r"`[^`\n]*`")


def texts(payload: dict[str, Any]) -> Iterator[tuple[str, str, int]]:
    """(kind, text, limit) of every text object in the payload."""
    yield "mrkdwn", payload["text"], TOP_TEXT_MAX
    for block in payload["blocks"]:
        if block["type"] == "header":
            yield "plain_text", block["text"]["text"], HEADER_MAX
        if "text" in block and block["type"] == "section":
            yield block["text"]["type"], block["text"]["text"], SECTION_TEXT_MAX
        for field in block.get("fields", []):
            yield field["type"], field["text"], FIELD_MAX
        for element in block.get("elements", []):
            yield element["type"], element["text"], SECTION_TEXT_MAX


def assert_slack_accepts(payload: dict[str, Any]) -> None:
    """slack_sdk's block models, Slack's limits, and nothing that can ping or format."""
    assert isinstance(payload["text"], str)
    assert payload["text"]
    assert 1 <= len(payload["blocks"]) <= BLOCKS_MAX
    for raw in payload["blocks"]:
        block = Block.parse(raw)
        assert block is not None, raw
        block.validate_json()  # raises SlackObjectFormationError beyond its limits
        assert len(raw.get("fields", [])) <= FIELDS_MAX
    encoded = json.dumps(payload, ensure_ascii=False).encode("utf-8")  # no lone surrogate
    for kind, text, limit in texts(payload):
        assert len(text) <= limit, (kind, len(text), text[:80])
        assert not any(c in text for c in "\x00\x07\x1b\x7f\r\u2028\u2029\u202e")
        if kind != "mrkdwn":
            continue
        for opening in ("<!", "<@", "<#", "<http"):
            assert opening not in text, text[:200]
        for line in text.split("\n"):
            # every code span closed on its line: an unbalanced backtick would swallow
            # the next entry, and outside code no formatting of a name survives
            assert line.count("`") % 2 == 0, line
            outside = CODE.sub("", line)
            for marker in ("*bold*", "_x_", "~s~", ":rotating_light:", "unbalanced"):
                assert marker not in outside, line
    assert b"<!channel>" not in encoded
    assert b"<@U123>" not in encoded


def alert_events(name: str) -> list[AlertEvent]:
    """Every alert kind about one GPU whose names are all `name`."""
    processes = tuple(
        ProcessSample(100 + i, f"{name}{i}", "compute", (8 - i) * GIB) for i in range(8)
    )
    sample = gpu(0, processes, name=name or "x")
    clock = ManualClock(START + 7200)
    rec = Recommendation(name or "L4", rent_usd_per_hour=0.8, savings_usd_per_hour=3.0)
    v = verdict(0, "held", START, overprovisioned=True, recommendation=rec, workload=name or None)
    snap = snapshot(clock, [v], [replace(sample, identity=replace(sample.identity, name=name))])
    pods = tuple(PodOnGpu(PodRef(name, f"{name}-{i}", "c"), i % 2 == 0) for i in range(7))
    g, v = snap.gpus[0], snap.verdicts[0]
    busy = replace(v, state="busy")
    return [
        AlertEvent("new", "held", None, v, g, pods),
        AlertEvent("changed", "overprovisioned", "held", v, g, pods),
        AlertEvent("reminder", "held", None, v, g, pods),
        AlertEvent("resolved", "held", None, busy, g, pods),
    ]


@pytest.mark.parametrize("name", HOSTILE, ids=lambda n: repr(n)[:30])
def test_alert_messages_with_hostile_names(name: str) -> None:
    events = alert_events(name)
    for chosen in ([e] for e in events):  # each kind on its own, then all together
        payload = build_alert_message(
            hostname=name, events=chosen, message_id=1, now_seconds=START + 7200
        )
        assert_slack_accepts(payload)
    payload = build_alert_message(
        hostname=name, events=events * 15, message_id=2, now_seconds=START + 7200
    )
    assert_slack_accepts(payload)
    assert "… and 40 more GPUs" in json.dumps(payload, ensure_ascii=False)


@pytest.mark.parametrize("name", HOSTILE, ids=lambda n: repr(n)[:30])
def test_alert_test_message_with_a_hostile_host_name(name: str) -> None:
    assert_slack_accepts(build_test_message(name, START))


def hostile_report_data(name: str, gpus: int) -> ReportData:
    """`gpus` wasteful GPUs, every host, model, uuid and recommended GPU named `name`."""
    rows = tuple(
        gpu_day(
            f"{name}{i}",
            f"{name}-uuid-{i}",
            i,
            name,
            DAY1,
            observed_seconds=86400.0,
            class_seconds=seconds(busy=3600, held=82800),
            cost_usd=48.0 + i,
            idle_cost_usd=40.0 + i,
            held_cost_usd=30.0,
            recommended_gpu=name if i % 2 else None,
            savings_usd_per_hour=2.0 if i % 2 else None,
        )
        for i in range(gpus)
    )
    return replace(sample_data(), gpu_days=rows)


@pytest.mark.parametrize("name", HOSTILE, ids=lambda n: repr(n)[:30])
def test_report_summary_with_hostile_names(name: str) -> None:
    report = build_report(hostile_report_data(name, 12))
    files = tuple(f"{name}.{ext}" for ext in ("html", "md", "csv", "json", "pdf"))
    payload = build_summary_message(report, files)
    assert_slack_accepts(payload)
    waste = payload["blocks"][2]["text"]["text"]
    assert re.search(r"… and \d+ more in the full report$", waste), waste[-200:]


def test_names_are_inline_code_with_backticks_replaced() -> None:
    assert name_text("*bold*") == "`*bold*`"
    assert name_text("`unbalanced") == f"`{BACKTICK_LOOKALIKE}unbalanced`"
    assert name_text("<!channel> & co") == "`&lt;!channel&gt; &amp; co`"
    assert name_text("a\nb") == "`a\\nb`"
    assert name_text(UNDECODABLE) == "`gpu-\\udcff\\udcfe-node\\udc80`"
    assert name_text("") == "(no name)"
    long = name_text("<" * 100, 20)
    assert long == "`" + "&lt;" * 4 + "…`"
    assert len(long) <= 22


def test_the_test_message_escapes_the_host_in_the_top_level_text() -> None:
    payload = build_test_message("<!channel> node-1", START)
    assert payload["text"].startswith("gpuwatch on `&lt;!channel&gt; node-1`: test message")
    assert "<!channel>" not in json.dumps(payload)


def test_report_summary_says_how_many_waste_items_were_left_out() -> None:
    report = build_report(hostile_report_data("plain", 8))
    payload = build_summary_message(report, ())
    waste = payload["blocks"][2]["text"]["text"].split("\n")
    assert waste[0] == "*Most wasteful GPUs*"
    assert len(waste) == 1 + 5 + 1
    assert waste[-1] == f"… and {len(report.top_waste) - 5} more in the full report"
    assert "`plain7`" in waste[1]  # the largest waste first, names in code


def test_fit_lines_counts_what_it_leaves_out() -> None:
    def more(n: int) -> str:
        return f"… and {n} more"

    lines = [f"line {i} " + "x" * 90 for i in range(50)]
    text = fit_lines(lines, 1000, more)
    assert len(text) <= 1000
    kept = text.split("\n")
    assert kept[-1] == f"… and {50 - (len(kept) - 1)} more"
    assert kept[:-1] == lines[: len(kept) - 1]
    assert fit_lines(["a", "b"], 100, more) == "a\nb"
    assert fit_lines(["a", "b"], 100, more, left_out=3) == "a\nb\n… and 3 more"
    assert fit_lines([], 100, more, left_out=3) == "… and 3 more"
    one = fit_lines(["`" + "y" * 50 + "`"], 20, more)
    assert len(one) <= 20
    assert one.count("`") % 2 == 0
    assert len(clip_text("z\n" * 4000)) <= 3000
    entity = fit_lines(["&lt;" * 10], 11, more)
    assert entity == "&lt;&lt;…"


def test_alert_test_command_posts_a_hostile_host_name_as_text(slack: FakeSlack) -> None:
    """`gpuwatch alert test` end to end on the loopback Slack: what arrives is checked."""
    ok, line = send_test_message(slack.url, "<!channel> *bold* `x\n" + UNDECODABLE, 2.0)
    assert ok, line
    (post,) = slack.delivered()
    assert_slack_accepts(post.body)
    start = f"gpuwatch on `&lt;!channel&gt; *bold* {BACKTICK_LOOKALIKE}x\\n"
    assert post.body["text"].startswith(start)
