"""What the alert texts promise, checked against the rules themselves.

promtool's unit tests (deploy/prometheus/tests/alerts-texts.test.yml) render the texts;
these tests keep the parts that a rendering cannot see in step with the rules: a
duration in the text is the rule's `for`, every dollar figure goes through the one
thousands-separating template, the article before a model name suits every catalog id,
and a summary names the host by `node` before `instance`.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpuwatch.sizing.gpus import build_gpu_catalog
from tests.rules.rulefiles import alerts

HOST = "{{ with $labels.node }}{{ . }}{{ else }}{{ $labels.instance }}{{ end }}"
"""How a text names the host: the series' node, else its instance."""

USD_DEFINE = re.compile(r'\{\{ define "usd" \}\}(.*?)\{\{ end -\}\}')
FOR_PHRASE = re.compile(r"\bfor (\d+|an|one) (minute|minutes|hour|hours)\b")
"""A fixed duration in a text ("has failed for 10 minutes"): only `for:` can say it."""

UNIT_SECONDS = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600}

ARTICLE = {"A": "an", "B": "a", "G": "a", "H": "an", "L": "an", "R": "an", "T": "a", "V": "a"}
"""The article before a name read letter by letter: "an A100" (ay), "an H100" (aitch),
"an L4" (el), "an RTX" (ar), "a B200", "a GH200" (gee), "a T4", "a V100". A catalog id
starting with a letter not listed here fails test_the_article_suits_every_catalog_id
until it is added."""


def alert_id(rule: dict[str, Any]) -> str:
    return str(rule["alert"])


def seconds(duration: str) -> int:
    """Seconds of a Prometheus duration of one unit ("30m", "1h", "0s")."""
    match = re.fullmatch(r"(\d+)([smh])", duration)
    assert match, duration
    return int(match[1]) * {"s": 1, "m": 60, "h": 3600}[match[2]]


def stated_durations(text: str) -> list[int]:
    """Seconds of every "for N minutes" (or hours) a text states."""
    found = []
    for count, unit in FOR_PHRASE.findall(text):
        number = 1 if count in ("an", "one") else int(count)
        found.append(number * UNIT_SECONDS[unit])
    return found


def texts(rule: dict[str, Any]) -> str:
    annotations = rule["annotations"]
    return f"{annotations['summary']}\n{annotations['description']}"


@pytest.mark.parametrize("rule", alerts(), ids=alert_id)
def test_a_duration_in_the_text_is_the_rules_for(rule: dict[str, Any]) -> None:
    for stated in stated_durations(texts(rule)):
        assert stated == seconds(str(rule["for"])), (rule["alert"], stated, rule["for"])


def test_the_duration_check_is_not_vacuous() -> None:
    """The alerts that state their `for` in words are found, and a mismatch would be."""
    stating = {rule["alert"] for rule in alerts() if stated_durations(texts(rule))}
    assert {
        "GpuwatchGpuAllocatedIdle",
        "GpuwatchCollectorFailing",
        "GpuwatchBillingSourceDown",
    } <= stating
    assert stated_durations("has run no process on it for 30 minutes") == [1800]
    assert stated_durations("silent for an hour, idle for 2 hours") == [3600, 7200]
    assert stated_durations("in the last 15 minutes; idle for {{ $value }}") == []


@pytest.mark.parametrize("rule", alerts(), ids=alert_id)
def test_every_dollar_figure_has_thousands_separators(rule: dict[str, Any]) -> None:
    """No `printf "$%.2f"` (no separators): every figure goes through the "usd" template,
    which each annotation that uses it defines, identically."""
    for name, text in rule["annotations"].items():
        assert 'printf "$%.' not in text, (rule["alert"], name)
        if 'template "usd"' in text:
            assert USD_DEFINE.search(text), (rule["alert"], name)


def test_the_usd_template_is_one_text() -> None:
    bodies = {
        match[1]
        for rule in alerts()
        for text in rule["annotations"].values()
        for match in USD_DEFINE.finditer(text)
    }
    assert len(bodies) == 1
    assert "reReplaceAll" in next(iter(bodies))


def test_the_usd_template_separates_thousands_as_python_does() -> None:
    """The template's regular expression, applied as Prometheus applies it (three times,
    leftmost first), gives what Python's "," format gives."""
    (body,) = {
        match[1]
        for rule in alerts()
        for text in rule["annotations"].values()
        for match in USD_DEFINE.finditer(text)
    }
    steps = re.findall(r'reReplaceAll `([^`]+)` "([^"]+)"', body)
    assert len(steps) == 3
    for value in (0.0, 0.255, 12.5, 999.999, 1000.0, 1234.5, 87600.0, 1234567.891, 9.99e11):
        text = f"{value:.2f}"
        for pattern, replacement in steps:
            text = re.sub(pattern, replacement.replace("${1}", r"\1").replace("${2}", r"\2"), text)
        assert text == f"{value:,.2f}", value


def test_the_article_suits_every_catalog_id() -> None:
    (rule,) = [rule for rule in alerts() if rule["alert"] == "GpuwatchGpuOverprovisioned"]
    match = re.search(
        r'\{\{ if match "([^"]+)" \$labels\.recommended \}\}an\{\{ else \}\}a\{\{ end \}\} '
        r"\{\{ \$labels\.recommended \}\}",
        rule["annotations"]["description"],
    )
    assert match, "the description chooses its article from the recommended id"
    vowel_sound = re.compile(match[1])
    ids = build_gpu_catalog().ids
    assert len(ids) > 10
    for gpu_id in ids:
        assert gpu_id[0] in ARTICLE, f"decide the article for {gpu_id}"
        chosen = "an" if vowel_sound.match(gpu_id) else "a"
        assert chosen == ARTICLE[gpu_id[0]], gpu_id


HOSTLESS = {"GpuwatchAgentAbsent", "GpuwatchFleetIdleSpendHigh"}
"""Alerts about no one host: no scrape target at all, a whole job's spend."""


@pytest.mark.parametrize("rule", alerts(), ids=alert_id)
def test_summaries_name_the_node_before_the_instance(rule: dict[str, Any]) -> None:
    summary = rule["annotations"]["summary"]
    assert "$labels.instance" not in summary.replace(HOST, "")
    assert (HOST in summary) == (rule["alert"] not in HOSTLESS)
