"""The agent: sample on a schedule, publish snapshots, serve them.

What lives here is the lifecycle: `Agent` opens NVML, billing and the history, starts
the periodic jobs (`IntervalJob`, a thread each; APScheduler only for `[report]`'s
monthly cron job) and the HTTP server for `gpuwatch run`, and stops them all.
`Agent.tick()` is one sampling pass (used directly by tests and `gpuwatch status`).
Under `--simulate --speed X` the jobs fire every `interval / X` real seconds (at least
50 ms apart) so that each sample covers one simulated interval.

The parts are built in `wiring` (from the config) and the tick is `pipeline`'s table of
stages; `periodic` holds the job threads. What must not live here: sampling, analysis
or rendering code (they belong to the collectors, the engines and `gpuwatch.export`),
and anything heavy at import time (tests/test_plain_imports.py: the kubelet client and h2,
sqlite3 and the reports load only where their part is on; grpc never).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import gpuwatch.alerts as alerting
from gpuwatch.agent.periodic import IntervalJob, PeriodicThread
from gpuwatch.agent.pipeline import Pipeline
from gpuwatch.agent.wiring import (
    DEFAULT_OPTIONS,
    AgentOptions,
    build,
    build_billing,
    check_token_source_gpus,
)
from gpuwatch.billing import BillingCollector
from gpuwatch.config import Config
from gpuwatch.core.clock import Clock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.export.collector import SnapshotCollector, build_registry
from gpuwatch.export.families import ExportOptions
from gpuwatch.export.serve import metrics_server
from gpuwatch.export.server import MetricsServer
from gpuwatch.export.status_json import encode, status_document
from gpuwatch.history import history_wanted
from gpuwatch.nvml import NvmlApi

if TYPE_CHECKING:  # each imported where it is used, only when that part is on
    from apscheduler.schedulers.background import BackgroundScheduler

    from gpuwatch.history.writer import HistoryWriter

log = logging.getLogger(__name__)

BILLING_REFRESH_SECONDS = 60.0
"""How often the price tiers are asked whether they are due (each has its own TTL)."""


class Agent:
    """One host's agent; `nv` is the real pynvml module or the simulated stand-in."""

    def __init__(
        self,
        config: Config,
        nv: NvmlApi,
        clock: Clock,
        options: AgentOptions = DEFAULT_OPTIONS,
    ) -> None:
        """`options`: a simulated scenario's additions, `--speed` and the replaced
        environment, kubelet and token fetch (`AgentOptions`).

        Raises WebhookSecretError when Slack alerting is configured but its secret cannot
        be read. An unusable alert outbox turns alerting off (one ERROR line,
        `gpuwatch_alert_outbox_up 0`); monitoring goes on.
        """
        self.parts = build(config, nv, clock, options)
        parts = self.parts
        self.config = config
        self.clock = clock
        self.speed = options.speed
        self.hostname = parts.hostname
        self.store = parts.store
        self.sampler = parts.sampler
        self.nvml = parts.nvml
        self.catalog = parts.catalog
        self.analysis = parts.analysis
        self.cost = parts.cost
        self.kubernetes = parts.kubernetes
        self.attribution = parts.attribution
        self.slurm = parts.slurm
        self.tokens = parts.tokens
        self.needs = parts.needs
        self.alerts = parts.alerts
        self.pipeline = Pipeline(parts)
        self.collector = SnapshotCollector(
            self.store,
            ExportOptions(per_process_metrics=config.agent.per_process_metrics),
            dcgm_compat=config.exporter.dcgm_compat,
            dcgm_naming=config.exporter.dcgm_naming,
            hostname=self.hostname,
        )
        self.registry = build_registry(self.collector)
        self._publish_health()
        self._jobs: list[IntervalJob] = []
        self._report_scheduler: BackgroundScheduler | None = None  # with [report] only
        self._threads: list[PeriodicThread] = []
        self._server: MetricsServer | None = None

    @property
    def billing(self) -> BillingCollector | None:
        """The price tiers, built by `open()` once the GPUs are known."""
        return self.parts.billing

    @property
    def history(self) -> HistoryWriter | None:
        """The history writer, once `open_history()` opened it."""
        return self.parts.history

    @history.setter
    def history(self, writer: HistoryWriter | None) -> None:
        self.parts.history = writer

    def open_history(self, *, simulated: bool = False) -> bool:
        """Open the history store and restore the windows and states from it, before the
        first tick (`gpuwatch run` calls it; tests that want history too). False when the
        history is off: one INFO line saying why, or one ERROR line and
        `gpuwatch_history_up 0` when the file cannot be opened; monitoring goes on."""
        why_not = history_wanted(self.config, simulated=simulated)
        if why_not is not None:
            log.info("history is off: %s", why_not)
            return False
        # lazy: sqlite3 and the history's store, restore and writer only when it is on
        from gpuwatch.history.opening import open_history  # noqa: PLC0415

        # lazy: its error class comes with the store (sqlite3), only when the history is on
        from gpuwatch.history.store import HistoryStoreError  # noqa: PLC0415

        try:
            self.history = open_history(self.config, self.clock, self.analysis, self.cost)
        except HistoryStoreError as exc:
            log.error("history is off: %s; GPU monitoring goes on", exc)
            self.parts.history_broken = True
            return False
        finally:
            self._publish_health()
        return True

    def _publish_health(self) -> None:
        """Before the first tick, the parts' health as built or opened (a tick publishes
        it with its snapshot from then on)."""
        if self.store.latest() is None:
            self.store.publish_families(self.pipeline.health_families())

    def open(self) -> None:
        """Initialise NVML (raises NvmlNotFoundError when there is no driver) and billing."""
        self.sampler.open()
        check_token_source_gpus(self.tokens.sources, self.sampler.identities)
        self.parts.billing = build_billing(self.parts)
        self._publish_health()

    def refresh_billing(self) -> None:
        """Ask the price tiers that are due (network I/O: never on the sampling path)."""
        if self.billing is not None:
            self.analysis.set_rented(self.billing.refresh().rented_gpus)

    def tick(self) -> FleetSnapshot:
        """Sample every GPU once, analyse the sample and publish the snapshot."""
        return self.pipeline.run()

    def refresh_attribution(self) -> None:
        """List the kubelet's pods (scheduler job; blocking I/O, never the tick's)."""
        if self.attribution is not None:
            self.attribution.refresh()

    def refresh_jobs(self) -> None:
        """List this node's Slurm jobs (scheduler job; one squeue, never the tick's), then
        let reclaim review the newest snapshot (`[slurm] reclaim_mode`)."""
        if self.slurm is not None:
            self.slurm.refresh()
            self.slurm.review(self.store.latest())

    def evaluate_alerts(self) -> None:
        """Let the alert dispatcher look at the newest snapshot (no network here)."""
        snapshot = self.store.latest()
        if self.alerts is not None and snapshot is not None:
            self.alerts.evaluate(snapshot)

    def status_body(self, local_client: bool) -> bytes | None:
        """`/status.json` from the newest snapshot (None before the first); never NVML.

        Process names (command lines may hold secrets) go to clients on this host
        (`gpuwatch status`), and to others only when `agent.per_process_metrics` already
        publishes them on `/metrics`.
        """
        snapshot = self.store.latest()
        if snapshot is None:
            return None
        names = local_client or self.config.agent.per_process_metrics
        return encode(status_document(snapshot, source="agent", process_names=names))

    def readiness(self) -> tuple[bool, str]:
        """Ready once a snapshot exists and is fresh (within 5 intervals)."""
        snapshot = self.store.latest()
        if snapshot is None:
            return False, "no sample yet"
        age = self.clock.time() - snapshot.timestamp_seconds
        if age > 5 * max(self.config.agent.interval_seconds, 1.0) * max(self.speed, 1.0):
            return False, f"last sample is {age:.0f} s old"
        return True, "ready"

    def start(self) -> None:
        """Take the first sample, then start the jobs and the HTTP server."""
        self.refresh_attribution()
        self.refresh_jobs()
        self.tick()
        agent_cfg = self.config.agent
        jobs: list[IntervalJob] = []

        def every(simulated_seconds: float, job: Callable[[], object]) -> None:
            jobs.append(IntervalJob(job.__name__, self._real(simulated_seconds), job))

        every(agent_cfg.interval_seconds, self.tick)
        every(agent_cfg.slow_interval_seconds, self.nvml.collect_slow)
        if self.attribution is not None:
            every(self.kubernetes.list_interval_seconds, self.refresh_attribution)
        if self.slurm is not None:
            every(self.config.slurm.list_interval_seconds, self.refresh_jobs)
        # network I/O runs on daemon threads: a slow server never delays shutdown
        self._threads = [
            PeriodicThread("billing", self._real(BILLING_REFRESH_SECONDS), self.refresh_billing)
        ]
        if "tokens" in self.parts.sources:
            scrape = functools.partial(self.tokens.scrape_due, wait=False)
            self._threads.append(PeriodicThread("tokens", self._real(1.0), scrape))
        for thread in self._threads:
            thread.start()
        if self.history is not None:
            self.history.start()
        if self.alerts is not None:
            every(self.config.analysis.evaluation_interval_seconds, self.evaluate_alerts)
            self.alerts.start()
        else:
            reason = alerting.slack_off_reason(self.config.alerts.slack)
            log.info("Slack alerting is off: %s", reason)
        for job in jobs:
            job.start()
        self._jobs = jobs
        if self.config.report.enabled:  # a cron job: APScheduler, imported for it alone
            # lazy: APScheduler only for [report]'s monthly cron job
            from apscheduler.schedulers.background import BackgroundScheduler  # noqa: PLC0415

            scheduler = BackgroundScheduler(daemon=True)
            self._schedule_report(scheduler)
            scheduler.start()
            self._report_scheduler = scheduler
        self._server = metrics_server(
            self.config.exporter,
            self.registry,
            self.readiness,
            version=self.store.latest,
            status=self.status_body,
        )
        self._server.start()
        log.info("serving metrics on %s (port %d)", self.config.exporter.listen, self._server.port)

    def _schedule_report(self, scheduler: BackgroundScheduler) -> None:
        """The previous month's local report on the 1st (wall-clock UTC, [report])."""
        # lazy: gpuwatch.report only when [report] is on (tests/test_plain_imports.py)
        from gpuwatch.report.scheduled import report_trigger, write_previous_month  # noqa: PLC0415

        def monthly_report() -> None:
            write_previous_month(self.config, datetime.now(UTC))

        scheduler.add_job(
            monthly_report,
            report_trigger(self.config.report),
            id="monthly_report",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=6 * HOUR_SECONDS,
        )

    @property
    def fatal_reason(self) -> str | None:
        """Why this process cannot go on (NVML needs a restart); None while it can."""
        return self.sampler.fatal

    @property
    def port(self) -> int:
        """The HTTP port actually bound."""
        if self._server is None:
            raise RuntimeError("the agent is not serving")
        return self._server.port

    def _real(self, simulated_seconds: float) -> float:
        return self.parts.real(simulated_seconds)

    def stop(self) -> None:
        """Stop serving and sampling, then close the kubelet channel and shut NVML down.
        Each step runs even when one before it fails (a bug: logged at ERROR), so a
        stop always ends with NVML and the kubelet channel closed (one INFO line)."""
        self._stop_step("the HTTP server", self._stop_serving)
        if self.alerts is not None:
            self._stop_step("the alert dispatcher", self.alerts.stop)
        history, self.history = self.history, None
        if history is not None:
            self._stop_step("the history writer", history.stop)  # writes what is pending
        closed = []
        if self.attribution is not None and self._stop_step(
            "the kubelet channel", self.attribution.close
        ):
            closed.append("kubelet channel closed")
        if self._stop_step("NVML", self.sampler.close):
            closed.insert(0, "NVML shut down")
        log.info("stopped: %s", ", ".join(closed) or "nothing closed cleanly")

    def _stop_serving(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        for job in self._jobs:
            job.stop()
        self._jobs = []
        if self._report_scheduler is not None:
            self._report_scheduler.shutdown(wait=True)
            self._report_scheduler = None
        for thread in self._threads:
            thread.stop()
        self._threads = []

    @staticmethod
    def _stop_step(what: str, step: Callable[[], object]) -> bool:
        """Run one step of `stop`; False (logged) when it raised."""
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - a failed step must not leave NVML open
            log.error("stopping %s failed: %s: %s", what, type(exc).__name__, str(exc)[:200])
            return False
        return True


__all__ = ["Agent", "AgentOptions"]
