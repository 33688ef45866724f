"""The dispatcher end to end against a real loopback webhook server.

Retry waits go through an instant recording `sleep`; cooldowns through a ManualClock.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from gpuwatch.alerts import SlackConfig
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.core.verdict import Recommendation
from tests.alerts.conftest import (
    ARCHIVED,
    FAST,
    HANG,
    HELD_PROCESSES,
    HOSTNAME,
    INVALID,
    NO_SERVICE,
    OK,
    PROHIBITED,
    RATE_LIMITED,
    SECRET_TOKEN,
    SERVER_ERROR,
    START,
    FakeSlack,
    Harness,
    Reply,
    gpu,
    metric_values,
    snapshot,
    verdict,
)


def failed(values: dict[str, float], reason: str) -> float:
    return values[f'gpuwatch_alerts_failed_total{{reason="{reason}"}}']


def errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_new_idle_gpu_is_one_post_with_its_facts(harness: Harness, slack: FakeSlack) -> None:
    dispatcher = harness.dispatcher()
    harness.clock.advance(1800)
    snap = snapshot(
        harness.clock,
        [verdict(0, "held", START), verdict(1, "busy", START)],
        [gpu(0, HELD_PROCESSES), gpu(1)],
    )
    dispatcher.evaluate(snap)
    assert slack.all_posts() == []  # evaluate never touches the network
    dispatcher.deliver_pending()
    (post,) = slack.all_posts()
    text = "\n".join(b["text"]["text"] for b in post.body["blocks"] if b["type"] == "section")
    assert "*GPU 0* `NVIDIA H100 80GB HBM3`" in text
    assert "*held*" in text
    assert "Since 2026-01-01 00:00 UTC (30 min)" in text
    assert "`python train.py` (pid 4242, 71.0 GiB)" in text
    assert "GPU 1" not in text
    assert post.body["text"].startswith(f"`{HOSTNAME}`: 1 GPU need")
    assert post.message_id == 1
    values = metric_values(dispatcher.families)
    assert values["gpuwatch_alerts_sent_total"] == 1
    assert values["gpuwatch_alert_outbox_messages"] == 0
    assert values["gpuwatch_alert_webhook_up"] == 1
    assert values["gpuwatch_alert_last_success_timestamp_seconds"] == START + 1800


def test_same_state_waits_for_the_cooldown(harness: Harness, slack: FakeSlack) -> None:
    dispatcher = harness.dispatcher()
    for _ in range(10):
        dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
        dispatcher.deliver_pending()
        harness.clock.advance(300)  # 10 evaluations over 50 min: one alert
    assert len(slack.all_posts()) == 1
    harness.clock.set(START + FAST.cooldown_seconds)
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    dispatcher.deliver_pending()
    posts = slack.all_posts()
    assert len(posts) == 2
    assert "(reminder)" in posts[1].body["blocks"][3]["text"]["text"]


def test_state_change_is_sent_at_once(harness: Harness, slack: FakeSlack) -> None:
    dispatcher = harness.dispatcher()
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    harness.clock.advance(5)
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "held", START + 5)]))
    dispatcher.deliver_pending()
    posts = slack.all_posts()
    assert len(posts) == 2
    assert "(was idle)" in posts[1].body["blocks"][3]["text"]["text"]


def test_busy_again_sends_one_resolve(harness: Harness, slack: FakeSlack) -> None:
    dispatcher = harness.dispatcher()
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    for _ in range(3):
        harness.clock.advance(10)
        dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "busy", START + 10)]))
    dispatcher.deliver_pending()
    posts = slack.all_posts()
    assert len(posts) == 2
    assert posts[1].body["blocks"][0]["text"]["text"] == f"GPUs back to work on {HOSTNAME}"
    assert "is *busy* again (was idle)" in posts[1].body["blocks"][3]["text"]["text"]


def test_two_gpus_in_one_evaluation_are_one_message(harness: Harness, slack: FakeSlack) -> None:
    dispatcher = harness.dispatcher()
    rec = Recommendation("L4-24GB", 0.8, 3.2)
    dispatcher.evaluate(
        snapshot(
            harness.clock,
            [
                verdict(0, "idle", START),
                verdict(1, "busy", START, overprovisioned=True, recommendation=rec),
            ],
        )
    )
    dispatcher.deliver_pending()
    (post,) = slack.all_posts()
    assert sum(1 for b in post.body["blocks"] if b["type"] == "divider") == 2
    assert "L4-24GB" in post.body["text"]


def test_cost_hook_values_are_shown(harness: Harness, slack: FakeSlack) -> None:
    dispatcher = harness.dispatcher(costs=lambda snapshot, uuid: (12.5, 4.0))
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    dispatcher.deliver_pending()
    assert "Cost so far: $12.50 · $4.00/h" in slack.all_posts()[0].body["blocks"][3]["text"]["text"]


def test_a_failing_cost_hook_does_not_stop_alerts(harness: Harness, slack: FakeSlack) -> None:
    def broken(snapshot: FleetSnapshot, uuid: str) -> tuple[float | None, float | None]:
        raise KeyError(uuid)

    dispatcher = harness.dispatcher(costs=broken)
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    dispatcher.deliver_pending()
    assert len(slack.delivered()) == 1


def test_rate_limit_honours_retry_after(harness: Harness, slack: FakeSlack) -> None:
    slack.script(RATE_LIMITED, OK)
    dispatcher = harness.dispatcher()
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    dispatcher.deliver_pending()
    assert [p.status for p in slack.all_posts()] == [429, 200]
    assert harness.sleep.calls == [1.0]
    values = metric_values(dispatcher.families)
    assert failed(values, "rate_limited") == 1
    assert values["gpuwatch_alerts_sent_total"] == 1


def test_long_retry_after_defers_to_a_later_round(harness: Harness, slack: FakeSlack) -> None:
    slack.script(Reply(429, "rate_limited", {"Retry-After": "30"}))
    dispatcher = harness.dispatcher()
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    dispatcher.deliver_pending()
    dispatcher.deliver_pending()  # too early: nothing sent
    assert len(slack.all_posts()) == 1
    harness.clock.advance(30)
    dispatcher.deliver_pending()
    assert [p.status for p in slack.all_posts()] == [429, 200]
    assert harness.sleep.calls == []


def test_server_errors_are_retried_with_backoff(harness: Harness, slack: FakeSlack) -> None:
    slack.script(SERVER_ERROR, SERVER_ERROR, OK)
    dispatcher = harness.dispatcher()
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    dispatcher.deliver_pending()
    assert [p.status for p in slack.all_posts()] == [500, 500, 200]
    assert harness.sleep.calls == [0.01, 0.02]
    values = metric_values(dispatcher.families)
    assert failed(values, "server_error") == 2
    assert values["gpuwatch_alerts_sent_total"] == 1


def test_timeout_is_retried(harness: Harness, slack: FakeSlack) -> None:
    slack.script(HANG, OK)
    dispatcher = harness.dispatcher()
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    dispatcher.deliver_pending()
    assert [p.status for p in slack.all_posts()] == [0, 200]
    values = metric_values(dispatcher.families)
    assert failed(values, "timeout") == 1
    assert values["gpuwatch_alerts_sent_total"] == 1


def test_connection_refused_keeps_the_message(harness: Harness, slack: FakeSlack) -> None:
    slack.close()  # nothing listens any more
    dispatcher = harness.dispatcher(SlackConfig(max_retries=1, retry_backoff_seconds=0.01))
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    dispatcher.deliver_pending()
    values = metric_values(dispatcher.families)
    assert failed(values, "connection") == 2
    assert values["gpuwatch_alert_outbox_messages"] == 1
    assert values["gpuwatch_alert_webhook_up"] == 1


def test_exhausted_retries_leave_the_message_for_the_next_round(
    harness: Harness, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    slack.default = SERVER_ERROR
    dispatcher = harness.dispatcher()
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    with caplog.at_level(logging.INFO, logger="gpuwatch"):
        dispatcher.deliver_pending()
        assert len(slack.all_posts()) == FAST.max_retries + 1
        harness.clock.advance(1)
        dispatcher.deliver_pending()  # within the round delay: no storm
        assert len(slack.all_posts()) == FAST.max_retries + 1
        harness.clock.advance(FAST.retry_backoff_max_seconds)
        dispatcher.deliver_pending()
        assert len(slack.all_posts()) == 2 * (FAST.max_retries + 1)
        slack.default = OK
        harness.clock.advance(FAST.retry_backoff_max_seconds)
        dispatcher.deliver_pending()
    assert len(slack.delivered()) == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # one line for the whole outage
    assert errors(caplog) == []


@pytest.mark.parametrize("reply", [NO_SERVICE, ARCHIVED, PROHIBITED], ids=lambda r: r.body)
def test_gone_webhook_is_dead_with_one_error_and_no_more_posts(
    harness: Harness, slack: FakeSlack, caplog: pytest.LogCaptureFixture, reply: Reply
) -> None:
    slack.default = reply
    dispatcher = harness.dispatcher()
    with caplog.at_level(logging.INFO, logger="gpuwatch"):
        dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
        dispatcher.deliver_pending()
        for i in range(1, 4):
            harness.clock.advance(3600)
            dispatcher.evaluate(snapshot(harness.clock, [verdict(i, "held", START)]))
            dispatcher.deliver_pending()
    assert len(slack.all_posts()) == 1
    assert len(errors(caplog)) == 1
    values = metric_values(dispatcher.families)
    assert values["gpuwatch_alert_webhook_up"] == 0
    assert failed(values, "webhook_dead") == 1
    assert values["gpuwatch_alert_outbox_messages"] == 4  # kept for after a restart


def test_invalid_payload_drops_only_that_message(
    harness: Harness, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    slack.script(INVALID)
    dispatcher = harness.dispatcher()
    dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    harness.clock.advance(1)
    dispatcher.evaluate(snapshot(harness.clock, [verdict(1, "idle", START)]))
    with caplog.at_level(logging.INFO, logger="gpuwatch"):
        dispatcher.deliver_pending()
    assert [(p.status, p.message_id) for p in slack.all_posts()] == [(400, 1), (200, 2)]
    assert len(errors(caplog)) == 1
    values = metric_values(dispatcher.families)
    assert failed(values, "invalid_payload") == 1
    assert values["gpuwatch_alerts_sent_total"] == 1
    assert values["gpuwatch_alert_outbox_messages"] == 0
    assert harness.sleep.calls == [1.0]  # paced: Slack allows ~1 message/s


def test_restart_mid_outage_delivers_each_queued_alert_exactly_once(
    harness: Harness, slack: FakeSlack
) -> None:
    slack.default = SERVER_ERROR
    first = harness.dispatcher()
    first.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    harness.clock.advance(60)
    first.evaluate(snapshot(harness.clock, [verdict(0, "idle", START), verdict(1, "held", START)]))
    first.deliver_pending()
    assert slack.delivered() == []
    first.stop()

    slack.default = OK
    second = harness.dispatcher()
    assert metric_values(second.families)["gpuwatch_alert_outbox_messages"] == 2
    # the alert memory survived: the same GPUs in the same states are no news
    harness.clock.advance(60)
    second.evaluate(snapshot(harness.clock, [verdict(0, "idle", START), verdict(1, "held", START)]))
    second.deliver_pending()
    second.deliver_pending()
    second.stop()
    third = harness.dispatcher()
    third.deliver_pending()

    delivered = [p.message_id for p in slack.delivered()]
    assert sorted(delivered) == [1, 2]
    assert metric_values(third.families)["gpuwatch_alert_outbox_messages"] == 0
    # the last success survives a restart too
    assert "gpuwatch_alert_last_success_timestamp_seconds" in metric_values(third.families)


def test_outbox_is_bounded(harness: Harness, slack: FakeSlack) -> None:
    dispatcher = harness.dispatcher(SlackConfig(outbox_max_messages=2))
    for i in range(4):
        harness.clock.advance(1)
        dispatcher.evaluate(snapshot(harness.clock, [verdict(i, "idle", START)]))
    values = metric_values(dispatcher.families)
    assert values["gpuwatch_alert_outbox_messages"] == 2
    assert failed(values, "outbox_full") == 2
    dispatcher.deliver_pending()
    assert [p.message_id for p in slack.delivered()] == [3, 4]


def test_background_thread_delivers_and_stops_quickly(tmp_path: Path, slack: FakeSlack) -> None:
    harness = Harness(tmp_path, slack)
    # the default sleep: an interruptible wait that stop() cuts short
    dispatcher = harness.dispatcher(
        SlackConfig(retry_backoff_seconds=30, retry_backoff_max_seconds=60), sleep=None
    )
    try:
        dispatcher.start()
        dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
        deadline = time.monotonic() + 5
        while not slack.delivered() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(slack.delivered()) == 1
        slack.default = SERVER_ERROR  # the next message waits 30 s between retries
        harness.clock.advance(10)
        dispatcher.evaluate(snapshot(harness.clock, [verdict(0, "held", START)]))
        deadline = time.monotonic() + 5
        while len(slack.all_posts()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        dispatcher.stop(timeout=3.0)
        assert time.monotonic() - started < 1.0
        assert not any(t.name == "gpuwatch-alert-delivery" for t in threading.enumerate())
    finally:
        harness.close()


def test_evaluate_and_deliver_run_concurrently(harness: Harness, slack: FakeSlack) -> None:
    dispatcher = harness.dispatcher()
    states = ["idle", "held"]

    def evaluate() -> None:
        for i in range(40):
            harness.clock.advance(1)
            dispatcher.evaluate(snapshot(harness.clock, [verdict(0, states[i % 2], START)]))

    worker = threading.Thread(target=evaluate)
    worker.start()
    while worker.is_alive():
        dispatcher.deliver_pending()
    worker.join()
    dispatcher.deliver_pending()
    ids = [p.message_id for p in slack.delivered()]
    assert sorted(ids) == list(range(1, 41))


def test_the_url_never_leaks(
    harness: Harness, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.alerts.conftest import metrics_text

    slack.script(SERVER_ERROR, HANG, RATE_LIMITED, INVALID, OK)
    slack.default = NO_SERVICE
    with caplog.at_level(logging.DEBUG):
        dispatcher = harness.dispatcher()
        for i in range(3):
            harness.clock.advance(1)
            dispatcher.evaluate(snapshot(harness.clock, [verdict(i, "idle", START)]))
            dispatcher.deliver_pending()
        text = metrics_text(dispatcher)
    assert len(slack.all_posts()) >= 5
    assert "gpuwatch_alert_webhook_up 0.0" in text
    assert caplog.records  # failures were logged...
    for record in caplog.records:  # ...without the URL, also from slack_sdk's own loggers
        assert SECRET_TOKEN not in record.getMessage()
    assert SECRET_TOKEN not in caplog.text
    assert SECRET_TOKEN not in text
    assert SECRET_TOKEN not in repr(dispatcher)
    assert SECRET_TOKEN not in repr(vars(dispatcher))


def test_a_message_cut_off_mid_request_is_sent_again_once(
    harness: Harness, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    from gpuwatch.slack.outbox import OUTBOX_FILE, Outbox

    first = harness.dispatcher()
    first.evaluate(snapshot(harness.clock, [verdict(0, "idle", START)]))
    first.stop()
    # a crash after the attempt was recorded and before Slack's answer was
    crashed = Outbox(harness.state_dir / OUTBOX_FILE, max_messages=10)
    crashed.begin_attempt(1)
    crashed.close()
    with caplog.at_level(logging.INFO, logger="gpuwatch"):
        second = harness.dispatcher()
    infos = [r for r in caplog.records if r.name == "gpuwatch.alerts.dispatcher"]
    assert [r.levelno for r in infos] == [logging.INFO]  # "may show them twice"
    second.deliver_pending()
    second.deliver_pending()
    assert [p.message_id for p in slack.delivered()] == [1]
