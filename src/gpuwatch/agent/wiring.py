"""The agent's parts, built once from its config: what it samples, analyses and serves.

`build()` turns a `Config` (plus a simulated scenario's extras) into `Parts`; the
agent's lifecycle (`gpuwatch.agent`) and its tick (`gpuwatch.agent.pipeline`) only use
what is built here. Nothing here samples, schedules or serves. Billing waits for
`open()` (`build_billing`): its price depends on which GPUs NVML finds.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import gpuwatch.alerts as alerting
from gpuwatch.analysis.engine import AnalysisEngine, AnalysisSettings, analysis_settings
from gpuwatch.analysis.measured import MeasuredNeeds
from gpuwatch.billing import BillingCollector, BillingConfig, StaticPrice
from gpuwatch.collectors.nvml import NvmlCollector
from gpuwatch.collectors.registry import Switches, sources_on
from gpuwatch.config import Config
from gpuwatch.core.clock import Clock
from gpuwatch.core.snapshot import FleetSnapshot, GpuIdentity
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.cost.engine import CostEngine
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.nvml import NvmlApi, NvmlSampler
from gpuwatch.sizing import GpuCatalog, build_gpu_catalog, build_model_catalog
from gpuwatch.store import SnapshotStore
from gpuwatch.tokens import TokenCollector, TokenSourceConfig
from gpuwatch.tokens.fetch import Fetch
from gpuwatch.workloads import WorkloadDeclaration

if TYPE_CHECKING:  # each imported where it is used, only when that part is on
    from gpuwatch.alerts.dispatcher import AlertDispatcher
    from gpuwatch.collectors.attribution import AttributionCollector
    from gpuwatch.collectors.slurm import SlurmCollector
    from gpuwatch.history.writer import HistoryWriter

log = logging.getLogger("gpuwatch.agent")  # its lines are the agent's

MIN_REAL_INTERVAL_SECONDS = 0.05
"""The shortest real interval between two runs of a job (under --speed X as well)."""

GAP_TICKS = 3
"""A gap between samples counts as sampled time up to this many tick intervals."""


@dataclass
class Parts:
    """What `build()` makes; `billing` is None until `build_billing` (at `open()`),
    `history` until the agent opens it."""

    config: Config
    clock: Clock
    speed: float
    hostname: str
    store: SnapshotStore
    sampler: NvmlSampler
    nvml: NvmlCollector
    catalog: GpuCatalog
    analysis: AnalysisEngine
    cost: CostEngine
    kubernetes: KubernetesConfig
    attribution: AttributionCollector | None
    slurm: SlurmCollector | None
    tokens: TokenCollector
    needs: MeasuredNeeds
    billing_config: BillingConfig
    alerts: AlertDispatcher | None
    alerts_broken: bool
    sources: frozenset[str]  # the names of the sources on (gpuwatch.collectors.registry)
    billing: BillingCollector | None = None
    history: HistoryWriter | None = None  # set by the agent's `open_history()`
    history_broken: bool = False  # the history could not be opened

    def real(self, simulated_seconds: float) -> float:
        """Real seconds between two runs of a job every `simulated_seconds`."""
        return real_seconds(simulated_seconds, self.speed)


def real_seconds(simulated_seconds: float, speed: float) -> float:
    """`simulated_seconds` under `--speed`, never under MIN_REAL_INTERVAL_SECONDS."""
    return max(simulated_seconds / speed, MIN_REAL_INTERVAL_SECONDS)


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """What an agent takes beyond its config: a simulated scenario's additions (after
    the config's workloads, token sources and static prices), its `--speed` (simulated
    seconds per real second), the environment the Slack secret is read from (None:
    `os.environ`), `kubernetes` in place of `[kubernetes]` (a simulated cluster's kubelet
    and paths) and `token_fetch` in place of the token sources' HTTP GET (a replay reads
    its simulated servers' pages in process); `slurm` turns `[slurm]` on (a simulated Slurm
    node)."""

    speed: float = 1.0
    extra_workloads: tuple[WorkloadDeclaration, ...] = ()
    extra_token_sources: tuple[TokenSourceConfig, ...] = ()
    extra_static_prices: tuple[StaticPrice, ...] = ()
    environ: Mapping[str, str] | None = None
    kubernetes: KubernetesConfig | None = None
    token_fetch: Fetch | None = None
    slurm: bool = False  # a simulated Slurm node (the `slurm` scenario): [slurm] on


DEFAULT_OPTIONS = AgentOptions()
"""A real host's: the config alone, real time."""


def build(
    config: Config,
    nv: NvmlApi,
    clock: Clock,
    options: AgentOptions = DEFAULT_OPTIONS,
) -> Parts:
    """The agent's parts from its config, NVML binding, clock and `options`.

    Raises WebhookSecretError when Slack alerting is configured but its secret cannot
    be read. An unusable alert outbox turns alerting off (one ERROR line); monitoring
    goes on.
    """
    sampler = NvmlSampler(nv, clock, retry_max_seconds=config.agent.nvml_retry_max_seconds)
    hostname = config.agent.hostname or socket.gethostname()
    catalog = build_gpu_catalog(config.sizing.gpus)
    models = build_model_catalog(config.sizing.models)
    analysis = AnalysisEngine(
        with_gap_limit(analysis_settings(config.analysis), config, options.speed),
        (*config.workloads, *options.extra_workloads),
        catalog,
        models,
    )
    kube = config.kubernetes if options.kubernetes is None else options.kubernetes
    tokens = TokenCollector(
        (*config.token_sources, *options.extra_token_sources), clock, fetch=options.token_fetch
    )
    slurm_on = config.slurm.enabled or options.slurm
    sources = sources_on(Switches(kube.enabled, len(tokens.sources), slurm_on))
    alerts, alerts_broken = _alerts(config, options.environ, clock, hostname)
    return Parts(
        config=config,
        clock=clock,
        speed=options.speed,
        hostname=hostname,
        store=SnapshotStore(),
        sampler=sampler,
        nvml=NvmlCollector(sampler, clock),
        catalog=catalog,
        analysis=analysis,
        cost=CostEngine(catalog, config.rent_vs_buy),
        kubernetes=kube,
        attribution=_attribution(config, kube, clock, options.speed)
        if "attribution" in sources
        else None,
        slurm=_slurm(config, clock, options) if "slurm" in sources else None,
        tokens=tokens,
        needs=MeasuredNeeds(
            tokens.sources,
            models,
            scrape_floor_seconds=real_seconds(1.0, options.speed) * options.speed,
        ),
        billing_config=config.billing.model_copy(
            update={"static": [*config.billing.static, *options.extra_static_prices]}
        ),
        alerts=alerts,
        alerts_broken=alerts_broken,
        sources=sources,
    )


def _attribution(
    config: Config, kube: KubernetesConfig, clock: Clock, speed: float
) -> AttributionCollector:
    """The pod attribution collector (the kubelet client: built only when the source is on)."""
    # lazy: the pod-resources client and h2 only where attribution is on
    from gpuwatch.collectors.attribution import AttributionCollector  # noqa: PLC0415

    # under --speed X a scheduled job fires at most every 50 ms of real time
    list_every = max(kube.list_interval_seconds, MIN_REAL_INTERVAL_SECONDS * speed)
    return AttributionCollector(
        kube,
        clock,
        list_interval_seconds=list_every,
        noise_floor_ratio=config.analysis.noise_floor_ratio,
    )


def _slurm(config: Config, clock: Clock, options: AgentOptions) -> SlurmCollector:
    """The Slurm job collector (built only when `[slurm] enabled`)."""
    # lazy: the Slurm code (squeue, /proc scans) only where [slurm] is on
    from gpuwatch.collectors.slurm import SlurmCollector  # noqa: PLC0415

    every = max(config.slurm.list_interval_seconds, MIN_REAL_INTERVAL_SECONDS * options.speed)
    return SlurmCollector(
        config.slurm.model_copy(update={"enabled": True}),
        clock,
        environ=options.environ,
        list_interval_seconds=every,
        noise_floor_ratio=config.analysis.noise_floor_ratio,
    )


def _alerts(
    config: Config,
    environ: Mapping[str, str] | None,
    clock: Clock,
    hostname: str,
) -> tuple[AlertDispatcher | None, bool]:
    """(the Slack alert dispatcher or None, whether its outbox is broken)."""
    try:
        dispatcher = alerting.build_dispatcher(
            config.alerts.slack,
            os.environ if environ is None else environ,
            state_dir=config.agent.state_dir,
            clock=clock,
            hostname=hostname,
            costs=alert_costs,
        )
    # (read only when something is raised: the outbox module loads with the dispatcher)
    except alerting.OutboxError as exc:  # a broken outbox costs alerting, never monitoring
        log.error("Slack alerting is off: %s; GPU monitoring goes on", exc)
        return None, True
    return dispatcher, False


def alert_costs(snapshot: FleetSnapshot, uuid: str) -> tuple[float | None, float | None]:
    """(cost of the GPU's current condition so far, its $/h) in the snapshot the alert
    dispatcher evaluates, for Slack messages; (None, None) where it has no price."""
    cost = next((c for c in snapshot.cost.gpus if c.uuid == uuid), None)
    verdict = next((v for v in snapshot.verdicts if v.uuid == uuid), None)
    if cost is None or cost.price is None or verdict is None:
        return None, None
    hours = max(snapshot.timestamp_seconds - verdict.state_since_seconds, 0.0) / HOUR_SECONDS
    return cost.price.usd_per_hour * hours, cost.price.usd_per_hour


def build_billing(parts: Parts) -> BillingCollector:
    """Billing for the GPUs NVML found (call after `sampler.open()`)."""
    identities = parts.sampler.identities
    name = identities[0].name if identities else ""
    spec = parts.catalog.match_nvml_name(name)
    return BillingCollector(
        parts.billing_config,
        state_dir=parts.config.agent.state_dir,
        clock=parts.clock,
        hostname=parts.hostname,
        gpu_count=len(identities),
        gpu_name=name,
        catalog_price_usd_per_gpu_hour=None if spec is None else spec.rent_usd_per_hour,
        list_rented_gpus=parts.config.analysis.candidate_gpus is None,
    )


def with_gap_limit(settings: AnalysisSettings, config: Config, speed: float) -> AnalysisSettings:
    """`settings` whose sample-gap limit is at least GAP_TICKS ticks of simulated time.

    Under `--speed X` the scheduler cannot fire faster than every 50 ms of real time, so
    a tick spans up to 0.05 x X simulated seconds (150 s at --speed 3000): a fixed 60 s
    limit would count every tick as a gap and charge nothing.
    """
    tick = max(config.agent.interval_seconds, MIN_REAL_INTERVAL_SECONDS * speed)
    states = settings.states
    limit = max(states.max_sample_gap_seconds, GAP_TICKS * tick)
    return replace(settings, states=replace(states, max_sample_gap_seconds=limit))


def check_token_source_gpus(
    sources: tuple[TokenSourceConfig, ...], identities: Sequence[GpuIdentity]
) -> None:
    """Say once, at start, which token sources can have no $/1M tokens and why."""
    known: set[int | str] = {i.index for i in identities} | {i.uuid for i in identities}
    for source in sources:
        if not source.gpus:
            log.info(
                "token source %r names no GPU: tokens are counted, no $/1M tokens", source.name
            )
            continue
        missing = [gpu for gpu in source.gpus if gpu not in known]
        if missing:
            log.warning(
                "token source %r names GPU(s) %s that this host does not have: "
                "its $/1M tokens stays absent (MIG instances: name their GPU)",
                source.name,
                ", ".join(repr(gpu) for gpu in missing),
            )
