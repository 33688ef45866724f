"""State-change lines for the log, and why Slack alerting is off."""

from __future__ import annotations

from gpuwatch.alerts import slack_off_reason
from gpuwatch.alerts.config import SlackConfig
from gpuwatch.analysis.changes import StateChanges
from gpuwatch.core.verdict import GpuVerdict


def verdict(state: str, uuid: str = "GPU-a", inactive: float = 0.0) -> GpuVerdict:
    return GpuVerdict(
        gpu_index=0,
        uuid=uuid,
        state=state,
        state_since_seconds=0.0,
        inactive_since_seconds=None,
        idle_seconds_total=0.0,
        activity_mean_ratio=None,
        inactive_seconds=inactive,
    )


def test_one_line_per_change_and_none_without_one() -> None:
    changes = StateChanges()
    assert changes.lines((verdict("pending"),)) == [], "a GPU's first state is no change"
    assert changes.lines((verdict("pending"),)) == []
    assert changes.lines((verdict("idle", inactive=1800.0),)) == [
        "GPU 0 'GPU-a': pending -> idle (inactive for 1800 s)"
    ]
    assert changes.lines((verdict("idle"),)) == []
    assert changes.lines((verdict("busy"),)) == ["GPU 0 'GPU-a': idle -> busy"]


def test_a_uuid_with_control_characters_is_escaped() -> None:
    changes = StateChanges()
    nasty = "GPU-\x1b[2J\nx"
    changes.lines((verdict("pending", nasty),))
    (line,) = changes.lines((verdict("busy", nasty),))
    assert "\x1b" not in line
    assert "\n" not in line
    assert "\\x1b[2J\\nx" in line


def test_slack_off_reasons_say_what_to_do() -> None:
    assert "enabled = false" in slack_off_reason(SlackConfig(enabled=False))
    assert "GPUWATCH_SLACK_WEBHOOK_URL" in slack_off_reason(SlackConfig())
