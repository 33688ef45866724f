"""The waste analysis of every GPU, one sample at a time.

For each GPU: the state machine (`states.py`), the observed peak memory and DRAM
bandwidth over the lookback, and — every `evaluation_interval_seconds` — the
overprovisioning check against the GPU catalog:

need memory, on the first basis that has one (`need_basis`): the sizing model's
requirement for the declared workload when one is declared; else the need measured from
the inference server's KV cache use (`measured.py`: weights + the KV actually in use +
overhead; its maximum over the lookback, the p95 kept beside it), since servers such as
vLLM preallocate ~90 % of VRAM whatever they need and the observed figure says nothing
there; else the observed peak. Need bandwidth = the observed peak DRAM bandwidth ratio
x this GPU's bandwidth (memory-busy time stands in where GPM is missing: an upper
bound). When a catalog GPU with a lower rent price meets both with
headroom, the GPU is overprovisioned and the cheapest such GPU is recommended. Only
the GPUs a team can get are candidates (`candidates.py`: the allow-list, the GPUs AWS
rents in the region, else the current GPU's class), and the recommendation names the
rule that chose them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuwatch.analysis.activity import activity_of, dram_bandwidth_ratio_of
from gpuwatch.analysis.measured import MeasuredSample
from gpuwatch.analysis.rolling import BucketedQuantiles, BucketedWindow
from gpuwatch.analysis.states import GpuStateTracker, StateSettings
from gpuwatch.core.snapshot import GpuSample
from gpuwatch.core.verdict import GpuVerdict, Recommendation
from gpuwatch.sizing import (
    GpuCatalog,
    GpuSpec,
    ModelCatalog,
    Workload,
    cheapest_fitting,
    decode_tokens_per_second,
    memory_requirement,
)
from gpuwatch.sizing.candidates import CandidateRules, RentedGpus
from gpuwatch.workloads import WorkloadDeclaration, declared_workload, find_declaration

if TYPE_CHECKING:
    from gpuwatch.analysis.config import AnalysisConfig

NEED_QUANTILE = 0.95
"""The high percentile of the measured need kept beside its maximum (time-weighted)."""


@dataclass(frozen=True, slots=True)
class AnalysisSettings:
    """Everything the engine needs from `[analysis]`."""

    states: StateSettings = field(default_factory=StateSettings)
    lookback_seconds: float = 86400.0
    headroom_ratio: float = 0.1
    evaluation_interval_seconds: float = 10.0
    candidate_gpus: tuple[str, ...] | None = None  # the allow-list; None: by rule


def analysis_settings(config: AnalysisConfig) -> AnalysisSettings:
    """The engine's settings from the `[analysis]` config section."""
    return AnalysisSettings(
        states=StateSettings(
            window_seconds=config.window_seconds,
            noise_floor_ratio=config.noise_floor_ratio,
            underutilized_below_ratio=config.underutilized_below_ratio,
            underutilized_hysteresis_ratio=config.underutilized_hysteresis_ratio,
            resolve_after_seconds=config.resolve_after_seconds,
            power_veto_watts=config.power_veto_watts,
        ),
        lookback_seconds=config.lookback_seconds,
        headroom_ratio=config.headroom_ratio,
        evaluation_interval_seconds=config.evaluation_interval_seconds,
        candidate_gpus=None if config.candidate_gpus is None else tuple(config.candidate_gpus),
    )


class _GpuAnalysis:
    """All rolling state of one GPU."""

    def __init__(self, settings: AnalysisSettings, spec: GpuSpec | None) -> None:
        self.settings = settings
        self.spec = spec
        self.tracker = GpuStateTracker(settings.states)
        self.memory_peak = BucketedWindow(settings.lookback_seconds)
        self.dram_peak = BucketedWindow(settings.lookback_seconds)
        self.first_seen: float | None = None
        self.previous_t: float | None = None
        self.next_evaluation = 0.0
        self.process_key: tuple[object, ...] | None = None
        self.declaration: WorkloadDeclaration | None = None
        self.declared_bytes: int | None = None
        self.theoretical_tokens_per_second: float | None = None
        self.measured_peak = BucketedWindow(settings.lookback_seconds)
        self.measured_quantiles = BucketedQuantiles(settings.lookback_seconds)
        self.measured_model: str | None = None
        self.overprovision = _Evaluation()


@dataclass(frozen=True, slots=True)
class _Evaluation:
    """The last overprovisioning evaluation of a GPU."""

    required: tuple[tuple[str, int], ...] = ()
    bandwidth: float | None = None
    overprovisioned: bool | None = None
    recommendation: Recommendation | None = None
    basis: str | None = None


class AnalysisEngine:
    """Turns each tick's GPU samples into verdicts."""

    def __init__(
        self,
        settings: AnalysisSettings,
        declarations: tuple[WorkloadDeclaration, ...],
        gpus: GpuCatalog,
        models: ModelCatalog,
    ) -> None:
        self._settings = settings
        self._declarations = declarations
        self._catalog = gpus
        self._candidates = CandidateRules(gpus, settings.candidate_gpus)
        self._models = models
        self._required_cache: dict[WorkloadDeclaration, tuple[int, Workload]] = {}
        self._gpus: dict[str, _GpuAnalysis] = {}

    def observe(
        self,
        t: float,
        samples: tuple[GpuSample, ...],
        measured: Mapping[str, MeasuredSample] | None = None,
    ) -> tuple[GpuVerdict, ...]:
        """Take one tick at epoch time `t`; GPUs that are down keep their last state.
        `measured`: the need measured from inference servers now, by GPU uuid."""
        verdicts = []
        for gpu in samples:
            if not gpu.up:
                continue
            self.tracker(gpu.identity.uuid, gpu.identity.name)
            uuid = gpu.identity.uuid
            sample = None if measured is None else measured.get(uuid)
            verdicts.append(self._observe_gpu(t, gpu, self._gpus[uuid], sample))
        return tuple(verdicts)

    def set_rented(self, rented: RentedGpus | None) -> None:
        """The GPUs a cloud rents in this host's region (billing's listing), or None:
        candidates for recommendations from the next evaluation on (thread-safe)."""
        self._candidates.set_rented(rented)

    def tracker(self, uuid: str, name: str) -> GpuStateTracker:
        """The state tracker of GPU `uuid` (NVML name `name`), created when new: the hook
        the history store restores a stored state through before the first sample."""
        state = self._gpus.get(uuid)
        if state is None:
            state = self._gpus[uuid] = _GpuAnalysis(
                self._settings, self._catalog.match_nvml_name(name)
            )
        return state.tracker

    def restore_peaks(self, uuid: str, name: str, hours: Sequence[StoredPeaks]) -> None:
        """Seed GPU `uuid`'s overprovisioning lookback from stored hours (oldest first),
        before its first sample: each hour's memory and DRAM peaks count from the hour's
        end, and so do the maximum and p95 of the hours whose need was measured (the
        hour's p95 standing for all its seconds); the GPU counts as observed since the
        first hour's start. Does nothing once the GPU was sampled."""
        self.tracker(uuid, name)
        a = self._gpus[uuid]
        if a.previous_t is not None or not hours:
            return
        for hour in hours:
            seconds = max(hour.end_seconds - hour.start_seconds, 0.0)
            if hour.memory_peak_bytes is not None:
                a.memory_peak.add(hour.end_seconds, hour.memory_peak_bytes, seconds)
            if hour.dram_peak_ratio is not None:
                a.dram_peak.add(hour.end_seconds, hour.dram_peak_ratio, seconds)
            if hour.need_basis == "measured" and hour.need_bytes is not None:
                a.measured_peak.add(hour.end_seconds, hour.need_bytes, seconds)
                p95 = hour.need_p95_bytes if hour.need_p95_bytes is not None else hour.need_bytes
                a.measured_quantiles.add(hour.end_seconds, min(p95, hour.need_bytes), seconds)
        a.first_seen = hours[0].start_seconds

    def _observe_gpu(
        self, t: float, gpu: GpuSample, a: _GpuAnalysis, measured: MeasuredSample | None
    ) -> GpuVerdict:
        if a.first_seen is None:
            a.first_seen = t
        dt = 0.0 if a.previous_t is None else min(t - a.previous_t, 60.0)
        a.previous_t = t
        processes = gpu.processes or ()
        tracker = a.tracker
        tracker.observe(t, activity_of(gpu), gpu.power_watts, bool(processes))
        if gpu.memory_used_bytes is not None and dt > 0:
            a.memory_peak.add(t, float(gpu.memory_used_bytes), dt)
        bandwidth_ratio = dram_bandwidth_ratio_of(gpu)
        if bandwidth_ratio is not None and dt > 0:
            a.dram_peak.add(t, bandwidth_ratio, dt)
        if measured is not None:
            a.measured_model = measured.model
            if dt > 0:
                a.measured_peak.add(t, measured.need_bytes, dt)
                a.measured_quantiles.add(t, measured.need_bytes, dt)
        key = (gpu.pod, *((p.pid, p.pod) for p in processes))
        if key != a.process_key:  # match declarations only when processes or pods change
            a.process_key = key
            a.declaration = find_declaration(self._declarations, gpu)
            declared = self._declared(a.declaration)
            a.declared_bytes = None if declared is None else declared[0]
            a.theoretical_tokens_per_second = (
                None
                if declared is None or a.spec is None
                else decode_tokens_per_second(a.spec, declared[1])
            )
        if t >= a.next_evaluation:
            a.next_evaluation = t + self._settings.evaluation_interval_seconds
            a.overprovision = self._evaluate_overprovisioning(t, a)
        evaluation = a.overprovision
        basis = evaluation.basis
        if basis == "declared":
            sample: float | None = a.declared_bytes
        elif basis == "measured":
            sample = None if measured is None else measured.need_bytes
        elif basis == "observed":
            sample = None if gpu.memory_used_bytes is None else gpu.memory_used_bytes
        else:
            sample = None
        workload = (
            a.declaration.label
            if a.declaration is not None
            else a.measured_model
            if basis == "measured"
            else None
        )
        return GpuVerdict(
            gpu_index=gpu.identity.index,
            uuid=gpu.identity.uuid,
            state=tracker.state,
            state_since_seconds=tracker.state_since,
            inactive_since_seconds=tracker.inactive_since,
            idle_seconds_total=tracker.idle_seconds_total,
            activity_mean_ratio=tracker.activity_mean,
            inactive_seconds=tracker.inactive_seconds,
            unsettled_seconds=tracker.unsettled_seconds,
            tick_seconds=tracker.tick_seconds,
            tick_class=tracker.tick_class,
            settlements=tracker.settlements,
            required_memory_bytes=evaluation.required,
            required_bandwidth_bytes_per_second=evaluation.bandwidth,
            catalog_gpu_id=None if a.spec is None else a.spec.id,
            overprovisioned=evaluation.overprovisioned,
            recommendation=evaluation.recommendation,
            workload=workload,
            theoretical_tokens_per_second=a.theoretical_tokens_per_second,
            need_basis=basis,
            need_sample_bytes=None if sample is None else int(sample),
        )

    def _declared(self, declaration: WorkloadDeclaration | None) -> tuple[int, Workload] | None:
        """(bytes the sizing model requires, the workload) for a declaration, cached."""
        if declaration is None:
            return None
        if declaration not in self._required_cache:
            workload = declared_workload(declaration, self._models)
            needed = int(memory_requirement(workload).total_bytes)
            self._required_cache[declaration] = (needed, workload)
        return self._required_cache[declaration]

    def _evaluate_overprovisioning(self, t: float, a: _GpuAnalysis) -> _Evaluation:
        settings = self._settings
        observed = a.memory_peak.maximum(t)
        measured = a.measured_peak.maximum(t)
        required: list[tuple[str, int]] = []
        if observed is not None:
            required.append(("observed", int(observed)))
        if a.declared_bytes is not None:
            required.append(("declared", a.declared_bytes))
        if measured is not None:
            required.append(("measured", int(measured)))
            p95 = a.measured_quantiles.quantile(t, NEED_QUANTILE)
            if p95 is not None:  # the sketch's bin edge is within 1 % above: cap at the max
                required.append(("measured_p95", int(min(p95, measured))))
        spec = a.spec
        peak_ratio = a.dram_peak.maximum(t)
        bandwidth = (
            None
            if spec is None or peak_ratio is None
            else peak_ratio * spec.memory_bandwidth_bytes_per_second
        )
        need: float | None
        basis: str | None
        if a.declared_bytes is not None:
            need, basis = a.declared_bytes, "declared"
        elif measured is not None:
            need, basis = measured, "measured"
        else:
            need, basis = observed, None if observed is None else "observed"
        if need is not None:
            required.append(("need", int(need * (1 + settings.headroom_ratio))))
        observed_long_enough = a.first_seen is not None and (
            t - a.first_seen >= settings.states.window_seconds
        )
        if (
            spec is None
            or need is None
            or bandwidth is None
            or not observed_long_enough
            or a.tracker.state not in ("busy", "underutilized")
        ):
            return _Evaluation(tuple(required), bandwidth, None, None, basis)
        candidates, rule = self._candidates.candidates(spec)
        cheaper = cheapest_fitting(candidates, int(need), bandwidth, settings.headroom_ratio)
        if cheaper is None or cheaper.rent_usd_per_hour >= spec.rent_usd_per_hour:
            return _Evaluation(tuple(required), bandwidth, False, None, basis)
        recommendation = Recommendation(
            gpu_id=cheaper.id,
            rent_usd_per_hour=cheaper.rent_usd_per_hour,
            savings_usd_per_hour=spec.rent_usd_per_hour - cheaper.rent_usd_per_hour,
            rule=rule,
        )
        return _Evaluation(tuple(required), bandwidth, True, recommendation, basis)


@dataclass(frozen=True, slots=True)
class StoredPeaks:
    """One stored GPU-hour's peaks, as the history restores them."""

    start_seconds: float  # epoch s, the hour's start
    end_seconds: float  # epoch s, the hour's last tick
    memory_peak_bytes: float | None
    dram_peak_ratio: float | None
    need_bytes: float | None = None  # the hour's maximum need on `need_basis`, bytes
    need_p95_bytes: float | None = None
    need_basis: str | None = None
