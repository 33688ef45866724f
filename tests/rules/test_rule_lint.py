"""What every gpuwatch rule must carry, and that it names only metrics the agent exports."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.rules.rulefiles import (
    ALERTS_DOC,
    RECORDING_FILE,
    alerts,
    all_rules,
    exported_metric_names,
    markdown_anchors,
    recorded_names,
    referenced_names,
    rules,
    unknown_names,
)

SEVERITIES = {"critical", "warning", "info"}
RULE_NAME = re.compile(r"^[a-z_]+:[a-z0-9_]+(:[a-z0-9_]+)?$")
OPTIONAL_INPUTS = {"gpuwatch:fleet_idle_spend_threshold_override_usd_per_hour"}
"""Series a rule reads when the user (or the Helm chart) records them, else falls back."""
RAW_COUNTER_ALLOWED = {"GpuwatchGpuCriticalXid"}
"""The XID alert also asks whether a counter series existed before the last 15 minutes
(last_over_time over a range: a series born in the window is a new code)."""


def alert_id(rule: dict[str, Any]) -> str:
    return str(rule.get("alert") or rule.get("record"))


@pytest.mark.parametrize("rule", alerts(), ids=alert_id)
def test_alert_has_severity_for_and_annotations(rule: dict[str, Any]) -> None:
    assert rule["labels"]["severity"] in SEVERITIES
    assert re.fullmatch(r"\d+[smh]", str(rule["for"]))
    annotations = rule["annotations"]
    assert set(annotations) >= {"summary", "description", "runbook_url"}
    assert annotations["summary"].strip()
    # the money at stake: a dollar figure printed from the value or a price query,
    # through the "usd" template (thousands separators: test_alert_texts.py)
    assert 'template "usd"' in annotations["description"]


@pytest.mark.parametrize("rule", alerts(), ids=alert_id)
def test_runbook_anchor_exists_in_docs(rule: dict[str, Any]) -> None:
    url = rule["annotations"]["runbook_url"]
    page, _, anchor = url.partition("#")
    assert page == "docs/alerts.md"
    assert anchor in markdown_anchors(ALERTS_DOC.read_text(encoding="utf-8"))


@pytest.mark.parametrize("rule", all_rules(), ids=alert_id)
def test_rule_names_only_exported_metrics(rule: dict[str, Any]) -> None:
    known = recorded_names() | OPTIONAL_INPUTS
    assert unknown_names(rule, exported_metric_names(), known) == set()


def test_rules_reference_the_agents_metrics_at_all() -> None:
    """The name check above is not vacuous: the rules read dozens of exported families."""
    exported = exported_metric_names()
    used = set().union(*(referenced_names(rule) for rule in all_rules())) & exported
    assert len(exported) > 60
    assert len(used) >= 20


def test_a_renamed_metric_is_caught() -> None:
    rule = {"record": "gpu:x:increase5m", "expr": "increase(gpuwatch_gpu_cost_total[5m])"}
    assert unknown_names(rule, exported_metric_names(), recorded_names()) == {
        "gpuwatch_gpu_cost_total"
    }
    alert = {
        "alert": "X",
        "expr": "gpuwatch_gpu_up == 0",
        "annotations": {"description": '{{ query "gpuwatch_gpu_price_usd_hourly" }}'},
    }
    assert unknown_names(alert, exported_metric_names(), recorded_names()) == {
        "gpuwatch_gpu_price_usd_hourly"
    }


def test_recording_rule_names_follow_level_metric_operation() -> None:
    for name in recorded_names():
        assert RULE_NAME.match(name), name


def test_recording_rules_read_counters_only_through_increase_or_rate() -> None:
    """A raw counter in a sum is wrong after every agent restart."""
    for rule in [*rules(RECORDING_FILE), *alerts()]:
        if rule.get("alert") in RAW_COUNTER_ALLOWED:
            continue
        for match in re.finditer(r"gpuwatch_[a-z0-9_]+_total", rule["expr"]):
            before = rule["expr"][: match.start()]
            assert re.search(r"\b(increase|rate|irate)\($", before), (alert_id(rule), match[0])


def test_alert_names_are_unique() -> None:
    names = [rule["alert"] for rule in alerts()]
    assert len(names) == len(set(names))
