"""The alert dispatcher: decide news each tick, queue it, deliver it in the background.

`evaluate(snapshot)` runs on the agent's scheduler: it applies the policy, builds at most
one message and commits it to the SQLite outbox together with the alert memory; it never
touches the network. `deliver_pending()` (the delivery thread from `start()`, or a
direct call) posts what is queued, oldest first, at most ~1 message/s. A failing Slack
is a metric and one log line; nothing here raises into the agent.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.alerts.config import SlackConfig
from gpuwatch.alerts.messages import CostHook, GpuCost, build_alert_message, format_utc
from gpuwatch.alerts.policy import AlertEvent, AlertMemory, decide
from gpuwatch.core.clock import Clock
from gpuwatch.core.health import Outage
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.slack.errors import OutboxError
from gpuwatch.slack.outbox import OUTBOX_FILE, Outbox, PendingMessage
from gpuwatch.slack.secret import WebhookUrl
from gpuwatch.slack.transport import (
    RetryPolicy,
    SendResult,
    Transport,
    WebhookTransport,
    describe_answer,
    send_with_retries,
)

log = logging.getLogger(__name__)

FAILURE_REASONS = (
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "http_error",
    "webhook_dead",
    "invalid_payload",
    "rejected",
    "outbox_full",
    "outbox_error",
)
"""Every `reason` of gpuwatch_alerts_failed_total, exported from 0."""

MIN_SEND_INTERVAL_SECONDS = 1.0  # Slack allows about one message per second per webhook
DELIVERY_POLL_SECONDS = 5.0  # the delivery thread's idle wake-up


class AlertDispatcher:
    """Slack alerts for one host: policy, outbox, delivery thread and metrics.

    `sleep` is used for retry waits and pacing; by default it is an interruptible wait
    that `stop()` cuts short. `costs` is the optional pricing hook: (the snapshot
    being evaluated, GPU uuid) -> (cost so far in USD, USD per hour).
    """

    def __init__(
        self,
        config: SlackConfig,
        webhook_url: str,
        state_dir: Path,
        clock: Clock,
        hostname: str,
        *,
        sleep: Callable[[float], object] | None = None,
        costs: CostHook | None = None,
        transport: Transport | None = None,
    ) -> None:
        self.config = config
        self.hostname = hostname
        self._clock = clock
        self._url = WebhookUrl(webhook_url)
        self._costs = costs
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._sleep: Callable[[float], object] = sleep if sleep is not None else self._stopping.wait
        self._transport: Transport = transport or WebhookTransport(
            self._url, config.timeout_seconds, clock.time
        )
        self._policy = RetryPolicy(
            config.max_retries, config.retry_backoff_seconds, config.retry_backoff_max_seconds
        )
        self._outbox = Outbox(
            state_dir / OUTBOX_FILE, max_messages=config.outbox_max_messages, now=clock.time
        )
        self._memory: dict[str, AlertMemory] = {
            uuid: AlertMemory(row.condition, row.alerted_at_seconds)
            for uuid, row in self._outbox.load_memory().items()
        }
        self._last_success: float | None = self._outbox.last_success_seconds()
        self._eval_lock = threading.Lock()
        self._deliver_lock = threading.Lock()
        self._metrics_lock = threading.Lock()
        self._sent = 0
        self._failed = dict.fromkeys(FAILURE_REASONS, 0)
        self._dead = False
        # one log line per outage (the first failure; delivery also logs the recovery)
        self._delivery = Outage(settle=1)
        self._outbox_outage = Outage(settle=1)
        self._outbox_full = False
        self._cost_outage = Outage(settle=1)
        self._clock_back = False  # a clock step back was logged; log the next one again
        self._not_before = 0.0  # monotonic seconds before which no round starts
        self._thread: threading.Thread | None = None
        self._closed = False
        uncertain = self._outbox.in_flight_count()
        if uncertain:
            log.info(
                "%d alert message(s) were being sent when gpuwatch stopped; sending them "
                "again (Slack may show them twice)",
                uncertain,
            )

    # -- evaluation (scheduler thread) -------------------------------------------------

    def evaluate(self, snapshot: FleetSnapshot) -> None:
        """Queue at most one message with this snapshot's news; never blocks on the network."""
        with self._eval_lock:
            if self._closed:
                return
            decision = decide(
                snapshot,
                self._memory,
                states=self.config.states,
                cooldown_seconds=self.config.cooldown_seconds,
                resolve=self.config.resolve,
            )
            self._note_clock(decision.clock_went_back_seconds, snapshot.timestamp_seconds)
            if not decision.updates:
                return
            try:
                if decision.events:
                    costs = self._costs_for(snapshot, decision.events)

                    def build(message_id: int) -> dict[str, Any]:
                        return build_alert_message(
                            hostname=self.hostname,
                            events=decision.events,
                            message_id=message_id,
                            now_seconds=snapshot.timestamp_seconds,
                            costs=costs,
                            mention=self.config.mention,
                        )

                    _, dropped = self._outbox.enqueue(
                        build, snapshot.timestamp_seconds, decision.updates
                    )
                    if dropped:
                        self._count_failure("outbox_full", dropped)
                        if not self._outbox_full:  # one line per episode, not per drop
                            log.warning(
                                "alert outbox full (%d messages): dropping the oldest",
                                self.config.outbox_max_messages,
                            )
                        self._outbox_full = True
                    else:
                        self._outbox_full = False
                else:
                    self._outbox.update_memory(decision.updates)
            except (OutboxError, sqlite3.Error, OSError) as exc:
                self._count_failure("outbox_error")
                if self._outbox_outage.fail():
                    log.error("cannot queue a Slack alert in %s: %s", self._outbox.path, exc)
                return
            self._outbox_outage.succeed()
            for uuid, memory in decision.updates.items():
                if memory is None:
                    self._memory.pop(uuid, None)
                else:
                    self._memory[uuid] = memory
        if decision.events:
            self._wake.set()

    def _note_clock(self, went_back_seconds: float, now_seconds: float) -> None:
        """One line when the alert memory says the wall clock went back (once per step:
        the memory is rewritten with the time now)."""
        if went_back_seconds <= 0:
            self._clock_back = False
            return
        if not self._clock_back:
            log.warning(
                "the alert memory holds alert times up to %.0f s after now (%s): the wall "
                "clock went back (NTP step, VM restore); taking them as now, reminders "
                "follow cooldown_seconds from now",
                went_back_seconds,
                format_utc(now_seconds),
            )
        self._clock_back = True

    def _costs_for(
        self, snapshot: FleetSnapshot, events: tuple[AlertEvent, ...]
    ) -> Mapping[str, GpuCost]:
        if self._costs is None:
            return {}
        costs: dict[str, GpuCost] = {}
        for event in events:
            if event.kind == "resolved":
                continue
            try:
                cost_usd, price = self._costs(snapshot, event.verdict.uuid)
            except Exception as exc:  # noqa: BLE001 - a pricing bug must not stop alerts
                if self._cost_outage.fail():
                    log.warning("alert cost hook failed, sending without cost: %r", exc)
                return costs
            costs[event.verdict.uuid] = GpuCost(cost_usd, price)
        self._cost_outage.succeed()
        return costs

    # -- delivery (delivery thread or a direct call) -----------------------------------

    def deliver_pending(self) -> None:
        """Send queued messages, oldest first, until the outbox is empty or Slack fails.

        Returns at once when another delivery round is running, the webhook is dead, or
        an earlier round's failure asked to wait. Never raises for Slack failures.
        """
        if not self._deliver_lock.acquire(blocking=False):
            return
        try:
            if self._dead or self._closed or self._stopping.is_set():
                return
            if self._clock.monotonic() < self._not_before:
                return
            last_id = 0
            while True:
                message = self._outbox.next_pending(last_id)
                if message is None:
                    return
                if last_id:
                    self._sleep(MIN_SEND_INTERVAL_SECONDS)
                    if self._stopping.is_set():
                        return
                last_id = message.id
                if not self._deliver_one(message):
                    return
        except (OutboxError, sqlite3.Error) as exc:
            self._count_failure("outbox_error")
            if self._outbox_outage.fail():
                log.error("cannot read the alert outbox %s: %s", self._outbox.path, exc)
        finally:
            self._deliver_lock.release()

    def _deliver_one(self, message: PendingMessage) -> bool:
        """Deliver one message; False when the round must stop."""
        result = send_with_retries(
            self._transport,
            message.payload,
            self._policy,
            sleep=self._sleep,
            stopping=self._stopping.is_set,
            on_failure=self._count_failure,
            before_attempt=lambda: self._outbox.begin_attempt(message.id),
            after_failed_attempt=lambda: self._outbox.end_attempt(message.id),
        )
        if result.outcome == "sent":
            now = self._clock.time()
            self._outbox.remove(message.id, success_seconds=now)
            with self._metrics_lock:
                self._sent += 1
                self._last_success = now
            if self._delivery.succeed():
                log.info("Slack alerts are delivered again")
            return True
        if result.outcome == "dropped":
            self._outbox.remove(message.id)
            log.error(
                "Slack refused alert #%d (%s), dropped it: %s",
                message.id,
                describe_answer(result.last),
                "a bug in gpuwatch's message, please report it",
            )
            return True
        if result.outcome == "dead":
            self._dead = True
            log.error(
                "Slack webhook is gone (%s): alerts stop until gpuwatch restarts with a "
                "working webhook; %d message(s) stay queued",
                describe_answer(result.last),
                self._outbox.pending_count,
            )
            return False
        if result.outcome == "deferred":
            self._defer(result)
        return False

    def _defer(self, result: SendResult) -> None:
        self._not_before = self._clock.monotonic() + result.defer_seconds
        if self._delivery.fail():
            log.warning(
                "Slack alert delivery failing (%s); %d message(s) queued, retrying in %.0f s",
                describe_answer(result.last),
                self._outbox.pending_count,
                result.defer_seconds,
            )

    def _count_failure(self, reason: str, count: int = 1) -> None:
        with self._metrics_lock:
            self._failed[reason] = self._failed.get(reason, 0) + count

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the background delivery thread (idempotent)."""
        if self._thread is not None or self._closed:
            return
        self._thread = threading.Thread(
            target=self._run, name="gpuwatch-alert-delivery", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.deliver_pending()
            except Exception as exc:  # noqa: BLE001 - the thread must survive a bug
                log.error("alert delivery failed: %s", self._url.scrub(repr(exc)))
            self._wake.wait(DELIVERY_POLL_SECONDS)
            self._wake.clear()

    def stop(self, timeout: float = 3.0) -> None:
        """Stop delivery within `timeout` seconds and close the outbox; messages stay queued.

        A request already on the wire cannot be cut short: if it outlasts `timeout`, the
        daemon thread is left to die with the process and the outbox stays open for it.
        """
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning(
                    "Slack delivery still waiting for an answer after %.1f s; "
                    "its message stays queued",
                    timeout,
                )
                return
        if not self._deliver_lock.acquire(timeout=timeout):
            return
        try:
            with self._eval_lock:
                self._closed = True
                self._outbox.close()
        finally:
            self._deliver_lock.release()

    # -- metrics ------------------------------------------------------------------------

    @property
    def webhook_up(self) -> bool:
        """False once Slack said the webhook is gone (until restart)."""
        return not self._dead

    def families(self) -> Iterator[Metric]:
        """The alert metric families (fresh each call)."""
        with self._metrics_lock:
            sent, failed, last = self._sent, dict(self._failed), self._last_success
        sent_family = CounterMetricFamily(
            "gpuwatch_alerts_sent", "Alert messages Slack accepted (HTTP 2xx)."
        )
        sent_family.add_metric([], sent)
        yield sent_family
        failed_family = CounterMetricFamily(
            "gpuwatch_alerts_failed",
            "Alert delivery failures: failed attempts, messages refused by Slack "
            "or lost locally, by reason.",
            labels=("reason",),
        )
        for reason, count in failed.items():
            failed_family.add_metric([reason], count)
        yield failed_family
        outbox = GaugeMetricFamily(
            "gpuwatch_alert_outbox_messages", "Alert messages queued for delivery."
        )
        outbox.add_metric([], self._outbox.pending_count)
        yield outbox
        yield outbox_up_family(True)
        up = GaugeMetricFamily(
            "gpuwatch_alert_webhook_up",
            "0 once Slack answered that the webhook is gone (403/404/410), until restart.",
        )
        up.add_metric([], 0.0 if self._dead else 1.0)
        yield up
        if last is not None:
            stamp = GaugeMetricFamily(
                "gpuwatch_alert_last_success_timestamp_seconds",
                "When Slack last accepted an alert message, Unix time in seconds.",
            )
            stamp.add_metric([], last)
            yield stamp


def outbox_up_family(up: bool) -> GaugeMetricFamily:
    """gpuwatch_alert_outbox_up: 0 when Slack alerting is configured but its outbox could
    not be opened at start (alerting is off until a restart; GPU monitoring goes on)."""
    family = GaugeMetricFamily(
        "gpuwatch_alert_outbox_up",
        "1 when the Slack alert outbox is usable; 0 when it could not be opened at start "
        "(alerting off until restart, see the log).",
    )
    family.add_metric([], 1.0 if up else 0.0)
    return family
