"""One tick of the agent: a table of named stages, run in order, ending in a snapshot.

    sources -> attribution -> analysis -> cost -> consumers

Each `Stage` names its phase and reads and fills one `Tick` (what the stages before it
made). The token readings are read once, by the `tokens` source, and every later stage
shares them; the families of the parts that report their own health are rendered at
the end of the tick and published with its snapshot, so a scrape reads one tick.
A new source or enricher joins the tick by one entry in `Pipeline.stages`; the derived
stages (attribution, analysis, cost) run guarded, so a bug there is one
`gpuwatch_collector_success{collector=name} 0` and one log line, never a lost tick.
Nothing here samples on a schedule or serves: `gpuwatch.agent` does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from prometheus_client.metrics_core import Metric

from gpuwatch.agent.wiring import Parts
from gpuwatch.analysis.changes import StateChanges
from gpuwatch.collectors.base import timed
from gpuwatch.core.costs import CostSummary, GpuPrice
from gpuwatch.core.failures import CollectorFailedError
from gpuwatch.core.jobs import JobAttribution
from gpuwatch.core.snapshot import Attribution, CollectorResult, FleetSnapshot, GpuSample
from gpuwatch.core.verdict import GpuVerdict
from gpuwatch.cost.engine import TokenTotals
from gpuwatch.export.attribution_families import attribution_health_families
from gpuwatch.history.rollup import TokenReadingTotals
from gpuwatch.tokens.collector import TokenReading

log = logging.getLogger("gpuwatch.agent")  # its lines are the agent's

T = TypeVar("T")

Phase = Literal["sources", "attribution", "analysis", "cost", "consumers"]


@dataclass
class Tick:
    """What the stages of one tick have made so far."""

    gpus: tuple[GpuSample, ...] = ()
    readings: tuple[TokenReading, ...] = ()
    results: list[CollectorResult] = field(default_factory=list)
    attribution: Attribution | None = None
    jobs: JobAttribution | None = None
    now: float = 0.0
    verdicts: tuple[GpuVerdict, ...] = ()
    cost: CostSummary = field(default_factory=CostSummary)
    snapshot: FleetSnapshot | None = None


@dataclass(frozen=True)
class Stage:
    """One named step of the tick."""

    name: str
    phase: Phase
    run: Callable[[Tick], None]


class Pipeline:
    """The tick's stages over the agent's parts; `run()` is one tick."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self._state_changes = StateChanges()
        self._failed_stages: set[str] = set()
        self.stages: tuple[Stage, ...] = (
            Stage("nvml", "sources", self._sample),
            Stage("tokens", "sources", self._read_tokens),
            *(
                ()
                if parts.attribution is None
                else (Stage("attribution", "attribution", self._attribute),)
            ),
            *(() if parts.slurm is None else (Stage("slurm", "attribution", self._jobs),)),
            Stage("clock", "analysis", self._read_clock),
            Stage("analysis", "analysis", self._analyse),
            Stage("cost", "cost", self._cost),
            Stage("snapshot", "consumers", self._snapshot),
            Stage("history", "consumers", self._offer_history),
            Stage("publish", "consumers", self._publish),
        )

    def run(self) -> FleetSnapshot:
        """Sample every GPU once, analyse the sample and publish the snapshot."""
        tick = Tick()
        for stage in self.stages:
            stage.run(tick)
        assert tick.snapshot is not None
        return tick.snapshot

    # -- sources -----------------------------------------------------------------------

    def _sample(self, tick: Tick) -> None:
        gpus, results = self.parts.nvml.collect()
        tick.gpus = gpus
        tick.results.extend(results)

    def _read_tokens(self, tick: Tick) -> None:
        """The token sources' latest readings (their scrapes run on their own thread)."""
        tick.readings = self.parts.tokens.readings()

    # -- attribution -------------------------------------------------------------------

    def _attribute(self, tick: Tick) -> None:
        """Pods joined into the GPU samples; a bug in the join is a failed attribution
        (logged once), never a lost tick."""
        attribution = self.parts.attribution
        assert attribution is not None
        gpus = tick.gpus
        joined, stage = self._guarded(
            "attribution", lambda: attribution.attribute(gpus), lambda: (gpus, None, None)
        )
        tick.gpus, tick.attribution, refresh = joined
        tick.results.append(stage if refresh is None or not stage.success else refresh)

    def _jobs(self, tick: Tick) -> None:
        """Slurm jobs joined with the GPU samples; a bug in the join is a failed `slurm`
        collector (logged once), never a lost tick."""
        slurm = self.parts.slurm
        assert slurm is not None
        gpus = tick.gpus
        joined, stage = self._guarded("slurm", lambda: slurm.attribute(gpus), lambda: (None, None))
        tick.jobs, refresh = joined
        tick.results.append(stage if refresh is None or not stage.success else refresh)

    # -- analysis ----------------------------------------------------------------------

    def _read_clock(self, tick: Tick) -> None:
        """The tick's time, read once its samples are in."""
        tick.now = self.parts.clock.time()

    def _analyse(self, tick: Tick) -> None:
        tick.verdicts, result = self._guarded(
            "analysis", lambda: self._verdicts(tick), _no_verdicts
        )
        tick.results.append(result)
        for line in self._state_changes.lines(tick.verdicts):
            log.info("%s", line)

    def _verdicts(self, tick: Tick) -> tuple[GpuVerdict, ...]:
        """The verdicts of this tick, with the need the token sources measure."""
        needs, now, gpus = self.parts.needs, tick.now, tick.gpus
        measured = needs.per_gpu(now, gpus, tick.readings) if needs.enabled else None
        return self.parts.analysis.observe(now, gpus, measured)

    # -- cost --------------------------------------------------------------------------

    def _cost(self, tick: Tick) -> None:
        parts = self.parts
        tick.cost, result = self._guarded(
            "cost",
            lambda: parts.cost.observe(
                tick.now,
                tick.gpus,
                tick.verdicts,
                self.prices(tick.gpus),
                self._token_totals(tick.readings),
                attribution=tick.attribution,
                kubernetes=parts.attribution is not None,
                jobs=tick.jobs,
                slurm=parts.slurm is not None,
            ),
            CostSummary,
        )
        tick.results.append(result)

    def prices(self, gpus: tuple[GpuSample, ...]) -> dict[str, GpuPrice]:
        """$/GPU-hour of each GPU by uuid: billing's effective price (the whole instance
        charged to its GPUs), else each GPU's own sizing-catalog reference price."""
        billing = self.parts.billing
        effective = None if billing is None else billing.latest().effective
        if effective is not None and effective.source != "catalog":
            price = GpuPrice(effective.gpu_usd_per_hour, effective.source)
            return {gpu.identity.uuid: price for gpu in gpus}
        prices = {}
        for gpu in gpus:
            spec = self.parts.catalog.match_nvml_name(gpu.identity.name)
            if spec is not None:
                prices[gpu.identity.uuid] = GpuPrice(spec.rent_usd_per_hour, "catalog")
        return prices

    def _token_totals(self, readings: tuple[TokenReading, ...]) -> list[TokenTotals]:
        source_gpus = {s.name: tuple(s.gpus) for s in self.parts.tokens.sources}
        return [
            TokenTotals(
                source=reading.source,
                gpus=source_gpus.get(reading.source, ()),
                prompt_tokens_total=reading.prompt_tokens_total,
                generation_tokens_total=reading.generation_tokens_total,
                scraped_at_seconds=reading.last_scrape_seconds,
                baseline_seconds=reading.baseline_seconds,
            )
            for reading in readings
        ]

    # -- consumers ---------------------------------------------------------------------

    def _snapshot(self, tick: Tick) -> None:
        parts = self.parts
        tick.snapshot = FleetSnapshot(
            timestamp_seconds=tick.now,
            driver=parts.sampler.driver,
            gpus=tick.gpus,
            collectors=tuple(tick.results),
            verdicts=tick.verdicts,
            hostname=parts.hostname,
            cost=tick.cost,
            attribution=tick.attribution,
            jobs=tick.jobs,
        )

    def _offer_history(self, tick: Tick) -> None:
        history = self.parts.history
        if history is not None and tick.snapshot is not None:
            readings = [
                TokenReadingTotals(r.source, r.prompt_tokens_total, r.generation_tokens_total)
                for r in tick.readings
            ]
            history.offer(tick.snapshot, readings)

    def _publish(self, tick: Tick) -> None:
        """The snapshot and the families rendered from this tick, for every reader."""
        assert tick.snapshot is not None
        self.parts.store.publish(tick.snapshot, self.health_families())

    def health_families(self) -> Iterator[Metric]:
        """The families of the parts that report their own health, as of now (the end
        of a tick, or the agent's start before its first)."""
        parts = self.parts
        yield from parts.tokens.families()
        yield from parts.needs.families()
        if parts.billing is not None:
            yield from parts.billing.families()
        if parts.alerts is not None:
            yield from parts.alerts.families()
        elif parts.alerts_broken:
            # lazy: the dispatcher (and its SQLite outbox) only when Slack alerting is on
            from gpuwatch.alerts.dispatcher import outbox_up_family  # noqa: PLC0415

            yield outbox_up_family(False)
        if parts.history is not None:
            yield from parts.history.families()
        elif parts.history_broken:
            # lazy: the writer imports sqlite3 (the store); only for a history that broke
            from gpuwatch.history.writer import HistoryWriter  # noqa: PLC0415

            yield from HistoryWriter.down_families()
        if parts.slurm is not None:
            yield from parts.slurm.reclaim_families()
        reason = "disabled" if parts.attribution is None else parts.attribution.reason
        yield from attribution_health_families(reason)

    # -- the guard ---------------------------------------------------------------------

    def _guarded(
        self, name: str, run: Callable[[], T], fallback: Callable[[], T]
    ) -> tuple[T, CollectorResult]:
        """Run a derived stage (attribution, analysis, cost) as a collector: a bug there
        is logged once, reported as `gpuwatch_collector_success{collector=name} 0`, and
        never stops sampling or export."""

        def guarded() -> T:
            try:
                return run()
            except Exception as exc:
                if name not in self._failed_stages:
                    log.exception("%s failed; sampling and export go on", name)
                    self._failed_stages.add(name)
                raise CollectorFailedError(type(exc).__name__) from exc

        return timed(name, self.parts.clock, guarded, failed=fallback)


def _no_verdicts() -> tuple[GpuVerdict, ...]:
    return ()
