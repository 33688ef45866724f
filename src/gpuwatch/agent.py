"""The agent: sample on a schedule, publish snapshots, serve them.

`Agent.tick()` is one sampling pass (used directly by tests and `gpuwatch status`);
`Agent.start()` adds the APScheduler jobs and the HTTP server for `gpuwatch run`.
Under `--simulate --speed X` the scheduler fires every `interval / X` real seconds
(at least 50 ms apart) so that each sample covers one simulated interval.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from gpuwatch.alerts import build_dispatcher
from gpuwatch.analysis.declarations import WorkloadDeclaration
from gpuwatch.analysis.engine import AnalysisEngine, analysis_settings
from gpuwatch.clock import Clock
from gpuwatch.collectors.base import CollectorFailedError, timed
from gpuwatch.collectors.nvml import NvmlCollector
from gpuwatch.config import Config, parse_listen_address
from gpuwatch.export.collector import SnapshotCollector, build_registry
from gpuwatch.export.families import ExportOptions
from gpuwatch.export.server import BasicAuth, MetricsServer, TlsFiles
from gpuwatch.nvml import NvmlSampler
from gpuwatch.sizing import build_gpu_catalog, build_model_catalog
from gpuwatch.snapshot import FleetSnapshot, GpuSample, GpuVerdict
from gpuwatch.store import SnapshotStore

log = logging.getLogger(__name__)

MIN_REAL_INTERVAL_SECONDS = 0.05


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
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """`extra_workloads` are declared by a simulated scenario (after the config's).

        Raises WebhookSecretError or OutboxError when Slack alerting is configured but
        its secret or state directory cannot be used.
        """
        self.config = config
        self.clock = clock
        self.speed = speed
        self.store = SnapshotStore()
        self.sampler = NvmlSampler(nv, clock, retry_max_seconds=config.agent.nvml_retry_max_seconds)
        self.nvml = NvmlCollector(self.sampler, clock)
        self.hostname = config.agent.hostname or socket.gethostname()
        self.analysis = AnalysisEngine(
            analysis_settings(config.analysis),
            (*config.workloads, *extra_workloads),
            build_gpu_catalog(config.sizing.gpus),
            build_model_catalog(config.sizing.models),
        )
        self.alerts = build_dispatcher(
            config.alerts.slack,
            os.environ if environ is None else environ,
            state_dir=config.agent.state_dir,
            clock=clock,
            hostname=self.hostname,
        )
        self.collector = SnapshotCollector(
            self.store,
            ExportOptions(per_process_metrics=config.agent.per_process_metrics),
            dcgm_compat=config.exporter.dcgm_compat,
            hostname=self.hostname,
            extra=[] if self.alerts is None else [self.alerts.families],
        )
        self.registry = build_registry(self.collector)
        self._analysis_failed = False
        self._scheduler: BackgroundScheduler | None = None
        self._server: MetricsServer | None = None

    def open(self) -> None:
        """Initialise NVML (raises NvmlNotFoundError when there is no driver)."""
        self.sampler.open()

    def tick(self) -> FleetSnapshot:
        """Sample every GPU once, analyse the sample and publish the snapshot."""
        gpus, results = self.nvml.collect()
        now = self.clock.time()
        verdicts, analysis_result = timed(
            "analysis", self.clock, lambda: self._analyse(now, gpus), failed=_no_verdicts
        )
        snapshot = FleetSnapshot(
            timestamp_seconds=now,
            driver=self.sampler.driver,
            gpus=gpus,
            collectors=(*results, analysis_result),
            verdicts=verdicts,
            hostname=self.hostname,
        )
        self.store.publish(snapshot)
        return snapshot

    def _analyse(self, now: float, gpus: tuple[GpuSample, ...]) -> tuple[GpuVerdict, ...]:
        try:
            return self.analysis.observe(now, gpus)
        except Exception as exc:  # a bug in the analysis must not stop the sampling
            if not self._analysis_failed:
                log.exception("waste analysis failed; sampling and export go on")
                self._analysis_failed = True
            raise CollectorFailedError(type(exc).__name__) from exc

    def evaluate_alerts(self) -> None:
        """Let the alert dispatcher look at the newest snapshot (no network here)."""
        snapshot = self.store.latest()
        if self.alerts is not None and snapshot is not None:
            self.alerts.evaluate(snapshot)

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
        """Take the first sample, then start the scheduler and the HTTP server."""
        self.tick()
        agent_cfg = self.config.agent
        scheduler = BackgroundScheduler(daemon=True)
        scheduler.add_job(
            self.tick,
            "interval",
            seconds=self._real(agent_cfg.interval_seconds),
            id="sample",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
        scheduler.add_job(
            self.nvml.collect_slow,
            "interval",
            seconds=self._real(agent_cfg.slow_interval_seconds),
            id="sample_slow",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
        if self.alerts is not None:
            scheduler.add_job(
                self.evaluate_alerts,
                "interval",
                seconds=self._real(self.config.analysis.evaluation_interval_seconds),
                id="alerts",
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
            )
            self.alerts.start()
        scheduler.start()
        self._scheduler = scheduler
        exporter = self.config.exporter
        host, port = parse_listen_address(exporter.listen)
        tls = None
        if exporter.tls_cert_file and exporter.tls_key_file:
            tls = TlsFiles(exporter.tls_cert_file, exporter.tls_key_file)
        auth = None
        if exporter.basic_auth_username and exporter.basic_auth_password_file:
            auth = BasicAuth.from_file(
                exporter.basic_auth_username, exporter.basic_auth_password_file
            )
        self._server = MetricsServer(
            host,
            port,
            self.registry,
            self.readiness,
            tls=tls,
            auth=auth,
            version=self.store.latest,
        )
        self._server.start()
        log.info("serving metrics on %s:%d", host, self._server.port)

    @property
    def port(self) -> int:
        """The HTTP port actually bound."""
        if self._server is None:
            raise RuntimeError("the agent is not serving")
        return self._server.port

    def _real(self, simulated_seconds: float) -> float:
        return max(simulated_seconds / self.speed, MIN_REAL_INTERVAL_SECONDS)

    def stop(self) -> None:
        """Stop serving and sampling, then shut NVML down."""
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
        if self.alerts is not None:
            self.alerts.stop()
        self.sampler.close()


def _no_verdicts() -> tuple[GpuVerdict, ...]:
    return ()
