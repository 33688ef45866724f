"""The agent: sample on a schedule, publish snapshots, serve them.

`Agent.tick()` is one sampling pass (used directly by tests and `gpuwatch status`);
`Agent.start()` starts the periodic jobs (`IntervalJob`, a thread each; APScheduler only
for `[report]`'s monthly cron job) and the HTTP server for `gpuwatch run`.
Under `--simulate --speed X` the jobs fire every `interval / X` real seconds
(at least 50 ms apart) so that each sample covers one simulated interval.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client.metrics_core import Metric

import gpuwatch.alerts as alerting
from gpuwatch.agent_setup import (
    MIN_REAL_INTERVAL_SECONDS,
    check_token_source_gpus,
    with_gap_limit,
)
from gpuwatch.analysis.changes import StateChanges
from gpuwatch.analysis.engine import AnalysisEngine, analysis_settings
from gpuwatch.analysis.measured import MeasuredNeeds
from gpuwatch.billing import BillingCollector, StaticPrice
from gpuwatch.clock import Clock
from gpuwatch.collectors.base import timed
from gpuwatch.collectors.nvml import NvmlCollector
from gpuwatch.config import Config
from gpuwatch.core.failures import CollectorFailedError
from gpuwatch.cost.engine import CostEngine, TokenTotals
from gpuwatch.export.attribution_families import attribution_health_families
from gpuwatch.export.collector import SnapshotCollector, build_registry
from gpuwatch.export.families import ExportOptions
from gpuwatch.export.serve import metrics_server
from gpuwatch.export.server import MetricsServer
from gpuwatch.export.status_json import encode, status_document
from gpuwatch.history import history_wanted, open_history
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.nvml import NvmlSampler
from gpuwatch.periodic import IntervalJob, PeriodicThread
from gpuwatch.sizing import build_gpu_catalog, build_model_catalog
from gpuwatch.snapshot import (
    Attribution,
    CollectorResult,
    CostSummary,
    FleetSnapshot,
    GpuPrice,
    GpuSample,
    GpuVerdict,
)
from gpuwatch.store import SnapshotStore
from gpuwatch.tokens import TokenCollector, TokenSourceConfig
from gpuwatch.tokens.collector import Fetch
from gpuwatch.workloads import WorkloadDeclaration

if TYPE_CHECKING:  # each imported where it is used, only when that part is on
    from apscheduler.schedulers.background import BackgroundScheduler

    from gpuwatch.alerts.dispatcher import AlertDispatcher
    from gpuwatch.collectors.attribution import AttributionCollector
    from gpuwatch.history import HistoryWriter, TokenReadingTotals

log = logging.getLogger(__name__)

T = TypeVar("T")

BILLING_REFRESH_SECONDS = 60.0
"""How often the price tiers are asked whether they are due (each has its own TTL)."""


class Agent:
    """One host's agent; `nv` is the real pynvml module or the simulated stand-in."""

    def __init__(
        self,
        config: Config,
        nv: Any,
        clock: Clock,
        *,
        speed: float = 1.0,
        extra_workloads: tuple[WorkloadDeclaration, ...] = (),
        extra_token_sources: tuple[TokenSourceConfig, ...] = (),
        extra_static_prices: tuple[StaticPrice, ...] = (),
        environ: Mapping[str, str] | None = None,
        kubernetes: KubernetesConfig | None = None,
        token_fetch: Fetch | None = None,
    ) -> None:
        """The `extra_*` arguments come from a simulated scenario, after the config's;
        `kubernetes` replaces `[kubernetes]` (a simulated cluster's kubelet and paths);
        `token_fetch` replaces the token sources' HTTP GET (a replay reads its simulated
        servers' pages in process).

        Raises WebhookSecretError when Slack alerting is configured but its secret cannot
        be read. An unusable alert outbox turns alerting off (one ERROR line,
        `gpuwatch_alert_outbox_up 0`); monitoring goes on.
        """
        self.config = config
        self.clock = clock
        self.speed = speed
        self.store = SnapshotStore()
        self.sampler = NvmlSampler(nv, clock, retry_max_seconds=config.agent.nvml_retry_max_seconds)
        self.nvml = NvmlCollector(self.sampler, clock)
        self.hostname = config.agent.hostname or socket.gethostname()
        self.catalog = build_gpu_catalog(config.sizing.gpus)
        models = build_model_catalog(config.sizing.models)
        self.analysis = AnalysisEngine(
            with_gap_limit(analysis_settings(config.analysis), config, speed),
            (*config.workloads, *extra_workloads),
            self.catalog,
            models,
        )
        self.cost = CostEngine(self.catalog, config.rent_vs_buy)
        kube = config.kubernetes if kubernetes is None else kubernetes
        self.kubernetes = kube
        # under --speed X a scheduled job fires at most every 50 ms of real time
        list_every = max(kube.list_interval_seconds, MIN_REAL_INTERVAL_SECONDS * speed)
        self.attribution: AttributionCollector | None = None
        if kube.enabled:  # grpc and protobuf only where attribution is on
            from gpuwatch.collectors.attribution import AttributionCollector  # noqa: PLC0415

            self.attribution = AttributionCollector(
                kube,
                clock,
                list_interval_seconds=list_every,
                noise_floor_ratio=config.analysis.noise_floor_ratio,
            )
        self.tokens = TokenCollector(
            (*config.token_sources, *extra_token_sources), clock, fetch=token_fetch
        )
        self._token_source_gpus = {s.name: tuple(s.gpus) for s in self.tokens.sources}
        self.needs = MeasuredNeeds(
            self.tokens.sources, models, scrape_floor_seconds=self._real(1.0) * speed
        )
        self._billing_config = config.billing.model_copy(
            update={"static": [*config.billing.static, *extra_static_prices]}
        )
        self.billing: BillingCollector | None = None  # built by open(), once the GPUs are known
        self._environ = os.environ if environ is None else environ
        self.alerts: AlertDispatcher | None = None
        self._alerts_broken = False
        try:
            self.alerts = alerting.build_dispatcher(
                config.alerts.slack,
                self._environ,
                state_dir=config.agent.state_dir,
                clock=clock,
                hostname=self.hostname,
                costs=self._alert_costs,
            )
        # (read only when something is raised: the outbox module loads with the dispatcher)
        except alerting.OutboxError as exc:  # a broken outbox costs alerting, never monitoring
            log.error("Slack alerting is off: %s; GPU monitoring goes on", exc)
            self._alerts_broken = True
        self.collector = SnapshotCollector(
            self.store,
            ExportOptions(per_process_metrics=config.agent.per_process_metrics),
            dcgm_compat=config.exporter.dcgm_compat,
            dcgm_naming=config.exporter.dcgm_naming,
            hostname=self.hostname,
            extra=[
                self.tokens.families,
                self.needs.families,
                self._billing_families,
                self._alert_families,
                self._history_families,
                self._attribution_families,
            ],
        )
        self.registry = build_registry(self.collector)
        self._state_changes = StateChanges()
        self._failed_stages: set[str] = set()
        self._jobs: list[IntervalJob] = []
        self._report_scheduler: BackgroundScheduler | None = None  # with [report] only
        self._threads: list[PeriodicThread] = []
        self._server: MetricsServer | None = None
        self.history: HistoryWriter | None = None
        self._history_broken = False

    def open_history(self, *, simulated: bool = False) -> bool:
        """Open the history store and restore the windows and states from it, before the
        first tick (`gpuwatch run` calls it; tests that want history too). False when the
        history is off: one INFO line saying why, or one ERROR line and
        `gpuwatch_history_up 0` when the file cannot be opened; monitoring goes on."""
        why_not = history_wanted(self.config, simulated=simulated)
        if why_not is not None:
            log.info("history is off: %s", why_not)
            return False
        from gpuwatch.history import HistoryStoreError  # noqa: PLC0415 - sqlite3 only when on

        try:
            self.history = open_history(self.config, self.clock, self.analysis, self.cost)
        except HistoryStoreError as exc:
            log.error("history is off: %s; GPU monitoring goes on", exc)
            self._history_broken = True
            return False
        return True

    def _history_families(self) -> Iterator[Metric]:
        if self.history is not None:
            yield from self.history.families()
        elif self._history_broken:
            from gpuwatch.history import HistoryWriter  # noqa: PLC0415

            yield from HistoryWriter.down_families()

    def open(self) -> None:
        """Initialise NVML (raises NvmlNotFoundError when there is no driver) and billing."""
        self.sampler.open()
        identities = self.sampler.identities
        check_token_source_gpus(self.tokens.sources, identities)
        name = identities[0].name if identities else ""
        spec = self.catalog.match_nvml_name(name)
        self.billing = BillingCollector(
            self._billing_config,
            state_dir=self.config.agent.state_dir,
            clock=self.clock,
            hostname=self.hostname,
            gpu_count=len(identities),
            gpu_name=name,
            catalog_price_usd_per_gpu_hour=None if spec is None else spec.rent_usd_per_hour,
            list_rented_gpus=self.config.analysis.candidate_gpus is None,
        )

    def _billing_families(self) -> Iterator[Metric]:
        if self.billing is not None:
            yield from self.billing.families()

    def _attribution_families(self) -> Iterator[Metric]:
        reason = "disabled" if self.attribution is None else self.attribution.reason
        yield from attribution_health_families(reason)

    def _alert_families(self) -> Iterator[Metric]:
        if self.alerts is not None:
            yield from self.alerts.families()
        elif self._alerts_broken:
            from gpuwatch.alerts.dispatcher import outbox_up_family  # noqa: PLC0415

            yield outbox_up_family(False)

    def refresh_billing(self) -> None:
        """Ask the price tiers that are due (network I/O: never on the sampling path)."""
        if self.billing is not None:
            self.analysis.set_rented(self.billing.refresh().rented_gpus)

    def tick(self) -> FleetSnapshot:
        """Sample every GPU once, analyse the sample and publish the snapshot."""
        gpus, results = self.nvml.collect()
        attribution = None
        if self.attribution is not None:
            gpus, attribution, kube_result = self._attribute(gpus)
            results.append(kube_result)
        now = self.clock.time()
        verdicts, analysis_result = self._stage(
            "analysis", lambda: self._analyse(now, gpus), _no_verdicts
        )
        for line in self._state_changes.lines(verdicts):
            log.info("%s", line)
        cost, cost_result = self._stage(
            "cost",
            lambda: self.cost.observe(
                now,
                gpus,
                verdicts,
                self.prices(gpus),
                self._token_totals(),
                attribution=attribution,
                kubernetes=self.attribution is not None,
            ),
            CostSummary,
        )
        snapshot = FleetSnapshot(
            timestamp_seconds=now,
            driver=self.sampler.driver,
            gpus=gpus,
            collectors=(*results, analysis_result, cost_result),
            verdicts=verdicts,
            hostname=self.hostname,
            cost=cost,
            attribution=attribution,
        )
        self.store.publish(snapshot)
        if self.history is not None:
            self.history.offer(snapshot, self._history_readings())
        return snapshot

    def _analyse(self, now: float, gpus: tuple[GpuSample, ...]) -> tuple[GpuVerdict, ...]:
        """The verdicts of this tick, with the need the token sources measure."""
        measured = (
            self.needs.per_gpu(now, gpus, self.tokens.readings()) if self.needs.enabled else None
        )
        return self.analysis.observe(now, gpus, measured)

    def _attribute(
        self, gpus: tuple[GpuSample, ...]
    ) -> tuple[tuple[GpuSample, ...], Attribution | None, CollectorResult]:
        """Pods joined into the GPU samples; a bug in the join is a failed attribution
        (logged once), never a lost tick."""
        attribution = self.attribution
        assert attribution is not None
        joined, stage = self._stage(
            "attribution", lambda: attribution.attribute(gpus), lambda: (gpus, None, None)
        )
        out_gpus, snapshot_part, refresh = joined
        if refresh is None or not stage.success:
            return out_gpus, snapshot_part, stage
        return out_gpus, snapshot_part, refresh

    def refresh_attribution(self) -> None:
        """List the kubelet's pods (scheduler job; blocking I/O, never the tick's)."""
        if self.attribution is not None:
            self.attribution.refresh()

    def _history_readings(self) -> list[TokenReadingTotals]:
        from gpuwatch.history import TokenReadingTotals  # noqa: PLC0415 - history on

        return [
            TokenReadingTotals(r.source, r.prompt_tokens_total, r.generation_tokens_total)
            for r in self.tokens.readings()
        ]

    def _stage(
        self, name: str, run: Callable[[], T], fallback: Callable[[], T]
    ) -> tuple[T, CollectorResult]:
        """Run a derived stage (analysis, cost) as a collector: a bug there is logged
        once, reported as `gpuwatch_collector_success{collector=name} 0`, and never stops
        sampling or export."""

        def guarded() -> T:
            try:
                return run()
            except Exception as exc:
                if name not in self._failed_stages:
                    log.exception("%s failed; sampling and export go on", name)
                    self._failed_stages.add(name)
                raise CollectorFailedError(type(exc).__name__) from exc

        return timed(name, self.clock, guarded, failed=fallback)

    def prices(self, gpus: tuple[GpuSample, ...]) -> dict[str, GpuPrice]:
        """$/GPU-hour of each GPU by uuid: billing's effective price (the whole instance
        charged to its GPUs), else each GPU's own sizing-catalog reference price."""
        effective = None if self.billing is None else self.billing.latest().effective
        if effective is not None and effective.source != "catalog":
            price = GpuPrice(effective.gpu_usd_per_hour, effective.source)
            return {gpu.identity.uuid: price for gpu in gpus}
        prices = {}
        for gpu in gpus:
            spec = self.catalog.match_nvml_name(gpu.identity.name)
            if spec is not None:
                prices[gpu.identity.uuid] = GpuPrice(spec.rent_usd_per_hour, "catalog")
        return prices

    def _token_totals(self) -> list[TokenTotals]:
        return [
            TokenTotals(
                source=reading.source,
                gpus=self._token_source_gpus.get(reading.source, ()),
                prompt_tokens_total=reading.prompt_tokens_total,
                generation_tokens_total=reading.generation_tokens_total,
                scraped_at_seconds=reading.last_scrape_seconds,
                baseline_seconds=reading.baseline_seconds,
            )
            for reading in self.tokens.readings()
        ]

    def _alert_costs(self, uuid: str) -> tuple[float | None, float | None]:
        """(cost of the GPU's current condition so far, its $/h) for Slack messages."""
        snapshot = self.store.latest()
        if snapshot is None:
            return None, None
        cost = next((c for c in snapshot.cost.gpus if c.uuid == uuid), None)
        verdict = next((v for v in snapshot.verdicts if v.uuid == uuid), None)
        if cost is None or cost.price is None or verdict is None:
            return None, None
        hours = max(snapshot.timestamp_seconds - verdict.state_since_seconds, 0.0) / 3600.0
        return cost.price.usd_per_hour * hours, cost.price.usd_per_hour

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
        self.tick()
        agent_cfg = self.config.agent
        jobs: list[IntervalJob] = []

        def every(simulated_seconds: float, job: Callable[[], object]) -> None:
            jobs.append(IntervalJob(job.__name__, self._real(simulated_seconds), job))

        every(agent_cfg.interval_seconds, self.tick)
        every(agent_cfg.slow_interval_seconds, self.nvml.collect_slow)
        if self.attribution is not None:
            every(self.kubernetes.list_interval_seconds, self.refresh_attribution)
        # network I/O runs on daemon threads: a slow server never delays shutdown
        self._threads = [
            PeriodicThread("billing", self._real(BILLING_REFRESH_SECONDS), self.refresh_billing)
        ]
        if self.tokens.sources:
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
        from gpuwatch.report.scheduled import report_trigger, write_previous_month  # noqa: PLC0415

        def monthly_report() -> None:
            write_previous_month(self.config, datetime.now(UTC))

        scheduler.add_job(
            monthly_report,
            report_trigger(self.config.report),
            id="monthly_report",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=6 * 3600,
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
        return max(simulated_seconds / self.speed, MIN_REAL_INTERVAL_SECONDS)

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


def _no_verdicts() -> tuple[GpuVerdict, ...]:
    return ()
