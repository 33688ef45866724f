"""The alert metric families: names, base units, and `promtool check metrics`."""

from __future__ import annotations

import subprocess

import pytest

from tests.alerts.conftest import (
    OK,
    SERVER_ERROR,
    START,
    FakeSlack,
    Harness,
    metric_values,
    metrics_text,
    snapshot,
    verdict,
)
from tests.conftest import require_binary


def test_every_failure_reason_is_exported_from_zero(harness: Harness) -> None:
    values = metric_values(harness.dispatcher().families)
    assert values["gpuwatch_alerts_sent_total"] == 0
    assert values['gpuwatch_alerts_failed_total{reason="server_error"}'] == 0
    assert values["gpuwatch_alert_webhook_up"] == 1
    assert values["gpuwatch_alert_outbox_messages"] == 0
    # no success yet: the timestamp is absent, not 0
    assert "gpuwatch_alert_last_success_timestamp_seconds" not in values


@pytest.mark.prometheus
def test_promtool_finds_nothing(harness: Harness, slack: FakeSlack) -> None:
    slack.script(SERVER_ERROR, OK)
    dispatcher = harness.dispatcher()
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    dispatcher.deliver_pending()
    text = metrics_text(dispatcher)
    assert "gpuwatch_alert_last_success_timestamp_seconds" in text
    result = subprocess.run(
        [require_binary("promtool"), "check", "metrics"],
        input=text.encode(),
        capture_output=True,
        check=False,
    )
    assert (result.stdout + result.stderr).decode().splitlines() == []
    assert result.returncode == 0
