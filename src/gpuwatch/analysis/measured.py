"""A GPU's memory need measured from the inference server on it, not from NVML.

Inference servers preallocate most of the GPU (vLLM 90 % by default) whatever they need,
so the memory NVML reports says nothing about need. The server itself says how much of
its KV cache is in use (`gpuwatch.tokens.kv`); with the model it serves (its
``model_name`` matched in the sizing catalog, or the token source's `model` or
`config_json`) the sizing model turns that into bytes:

    need per GPU = engines x weights / the GPUs the token source names
                   + tokens in use / engines x KV bytes per token x the rank's share
                   + the engine's runtime overhead

Each data-parallel engine (a pool of its own on the page: `KvCacheReading.engines`)
holds a full copy of the weights on its GPUs; tensor parallelism splits one copy across
the GPUs of an engine. So `engines` copies of the weights spread over the source's GPUs,
while the runtime overhead (the sizing model's engine overhead: activation peak, CUDA
context, CUDA graphs) is each GPU's own: every GPU runs a worker that holds it whole.
The KV cache of an engine's tokens splits over its tensor-parallel ranks only as far as
its KV heads do (`gpuwatch.sizing.parallel.kv_share`): a latent-attention model
(DeepSeek-V2/V3, Kimi K2: `ModelSpec.is_mla`) keeps its whole latent cache on every rank
(vLLM's `ModelConfig.get_num_kv_heads` in vllm/config/model.py: "When using MLA during
decode it becomes MQA", one head per GPU), and KV heads fewer than the ranks are
replicated.

Weights and overhead are the sizing model's inference figures (`memory_requirement`: the
overhead is vLLM's profile at its defaults, `gpuwatch.sizing.engine`); KV bytes per
token are layers x (2 x KV heads x head dim, or MLA's latent + RoPE key) x bytes per
value, the value's bytes from the server's cache dtype (``auto``: the model's 16-bit or
wider compute precision; ``fp8*``: 1 B). Only
the layers that cache K and V count (`ModelSpec.kv_cache_bytes_per_token`: not
Qwen3-Next's linear-attention or Nemotron-H's Mamba layers, plus DeepSeek-V3.2's indexer
keys); their fixed state per sequence is not counted, the reading having no count of
sequences.

A need is bounded by the hardware: a source whose share of the need on one of its GPUs
is above that GPU's memory (NVML's total), or that reports more engines than it names
GPUs, is `implausible_need`, not a need; a GPU whose memory total is unknown, or whose
servers' needs add up to more than it holds, gets no measured need.

`MeasuredNeeds` resolves each token source's model once per (model name, cache dtype),
logs one line per outage of a source's measured need (`gpuwatch.core.health`), and
exports ``gpuwatch_token_source_need_info``. Pure but for logging: the readings come in, the
per-GPU samples go out (`per_gpu`), the analysis engine keeps their lookback.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.core.health import Outage
from gpuwatch.core.snapshot import GpuSample
from gpuwatch.sizing import ModelCatalog, ModelSpec, UnknownModelError, memory_requirement
from gpuwatch.sizing.hf_config import ConfigJsonError, model_name_for
from gpuwatch.sizing.parallel import kv_share
from gpuwatch.sizing.served_names import match_served_model
from gpuwatch.tokens import TokenReading, TokenSourceConfig
from gpuwatch.workloads import config_json_workload, served_workload

log = logging.getLogger(__name__)

NeedStatus = Literal[
    "measured",
    "no_gpus",
    "down",
    "no_kv_cache",
    "no_model_name",
    "several_models",
    "unknown_model",
    "ambiguous_model",
    "unknown_cache_dtype",
    "invalid_model",
    "implausible_need",
]
"""Whether a token source gives its GPUs a measured need, and if not, why not."""

STALE_AFTER_INTERVALS = 3.0
"""A reading older than this many scrape periods is not used (the source is down)."""

_FP8 = 1.0
_KV_BYTES = {
    "bfloat16": 2.0,
    "bf16": 2.0,
    "half": 2.0,
    "float16": 2.0,
    "fp16": 2.0,
    "float": 4.0,
    "float32": 4.0,
    "fp32": 4.0,
}


@dataclass(frozen=True, slots=True)
class ServedModel:
    """The sizing model's view of what a server serves, in bytes."""

    name: str  # the catalog name, or the config.json's model name
    weights_bytes: int
    overhead_bytes: int  # the runtime overhead of inference (activations, CUDA context)
    kv_bytes_per_token: float  # all layers, at the server's cache dtype
    architecture: ModelSpec | None = None  # what says how tensor parallelism splits the cache


@dataclass(frozen=True, slots=True)
class MeasuredSample:
    """One GPU's need now, measured from the servers on it (bytes, no headroom)."""

    need_bytes: float
    model: str  # the served model (several joined by " + ")
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SourceNeed:
    """What a token source's last reading gives: its status, the model name the server
    reports and the one it resolved to ("" when none), and the whole need (all its
    GPUs, bytes) when measured."""

    status: NeedStatus
    served_model: str = ""
    model: str = ""
    need_bytes: float | None = None


def kv_bytes_per_value(cache_dtype: str | None, compute_bytes: float) -> float | None:
    """Bytes per cached K or V value for a server's cache dtype: "auto" (or unsaid) the
    model's `compute_bytes`; fp8 variants (fp8, fp8_e4m3, fp8_e5m2, ...) 1; 16-bit 2;
    32-bit 4; None for a dtype not known here."""
    dtype = (cache_dtype or "auto").strip().casefold()
    if dtype == "auto":
        return compute_bytes
    if dtype.startswith("fp8"):
        return _FP8
    return _KV_BYTES.get(dtype)


def served_model(
    spec_or_workload: ModelSpec | str, precision: str | None, cache_dtype: str | None
) -> ServedModel | None:
    """`ServedModel` of a catalog model (or a config.json path) at `precision` with a
    cache of `cache_dtype`; None when the cache dtype is not known. Raises
    ConfigJsonError for a config.json that cannot be sized, ValueError for a precision
    the model cannot take."""
    if isinstance(spec_or_workload, str):
        workload = config_json_workload(spec_or_workload, precision)
        name = model_name_for_path(spec_or_workload)
    else:
        # None: as published (gpt-oss MXFP4, DeepSeek-V3 FP8: `ModelSpec.published_precision`)
        workload = served_workload(spec_or_workload, precision)
        name = spec_or_workload.name
    per_value = kv_bytes_per_value(cache_dtype, workload.compute_bytes)
    if per_value is None:
        return None
    breakdown = memory_requirement(workload)
    return ServedModel(
        name=name,
        weights_bytes=breakdown.weights_bytes,
        overhead_bytes=breakdown.overhead_bytes,
        kv_bytes_per_token=workload.training_architecture.kv_cache_bytes_per_token(per_value),
        architecture=workload.training_architecture,
    )


def model_name_for_path(path: str) -> str:
    """The model name a config.json gives (its folder's name when it names none)."""
    return model_name_for(Path(path))


def measured_need_bytes(
    model: ServedModel, used_tokens: float, gpus: int = 1, engines: int = 1
) -> float:
    """One GPU's need: `engines` x weights / `gpus` + each GPU's share of the
    `used_tokens`' KV cache + the overhead. Each data-parallel engine holds its own copy of
    the weights; every GPU runs a worker with its own engine overhead (vLLM's profile:
    activation peak, CUDA context, CUDA graphs), which tensor parallelism does not split.
    An engine's tokens are cached on each of its t = `gpus` / `engines` GPUs at
    `kv_share` (`gpuwatch.sizing.parallel`): 1/t of the KV heads when they split, the
    whole cache for latent attention (vLLM's `ModelConfig.get_num_kv_heads` keeps one
    latent head on every rank) and for KV heads fewer than t (replicated).

    By hand, Llama-3.1-8B in bf16 (meta-llama/Llama-3.1-8B config.json): weights
    8,030,261,248 parameters x 2 B = 16,060,522,496 B (16.06 GB); KV 32 layers x 2 (K
    and V) x 8 KV heads x 128 head dim x 2 B = 131,072 B per token; overhead, vLLM's
    profile at its defaults (`gpuwatch.sizing.engine`): activation peak 1,274,301,645
    (256 x 128,256 logits x 38.3 B + 2,048 x 4,096 x 2 B of hidden states) + CUDA
    context 654,982,513 + non-torch 139,586,437 + CUDA graphs 1,073,741,824 =
    3,142,612,419 B. With 10,000 tokens in use on one GPU: 16,060,522,496 + 10,000 x
    131,072 + 3,142,612,419 = 20,513,854,915 B; on two GPUs (tensor parallel 2) half the
    weights and tokens and a whole overhead each, 8,685,621,248 + 3,142,612,419 =
    11,828,233,667 B. Two data-parallel engines on two GPUs with 10,000 tokens each:
    (2 x 16,060,522,496 + 20,000 x 131,072) / 2 + 3,142,612,419 = 20,513,854,915 B
    each, as one engine alone on its GPU. DeepSeek-V3 (latent attention, 70,272 B per
    token) on eight GPUs: weights / 8 + every token's 70,272 B + the overhead.
    """
    if gpus < 1:
        raise ValueError("a server runs on one GPU at least")
    if engines < 1:
        raise ValueError("a server has one engine at least")
    tensor_parallel = max(1, gpus // engines)
    share = (
        1 / tensor_parallel
        if model.architecture is None
        else kv_share(model.architecture, tensor_parallel)
    )
    kv_per_gpu = used_tokens / engines * model.kv_bytes_per_token * share
    return engines * model.weights_bytes / gpus + kv_per_gpu + model.overhead_bytes


class MeasuredNeeds:
    """The measured need of every token source's GPUs, tick by tick."""

    def __init__(
        self,
        sources: Sequence[TokenSourceConfig],
        models: ModelCatalog,
        *,
        scrape_floor_seconds: float = 0.0,
    ) -> None:
        """`scrape_floor_seconds`: the shortest period (simulated seconds) at which the
        sources can be scraped at all (under `--speed X` the scrape job fires every
        0.05 x X simulated seconds), so that a reading is stale after
        `STALE_AFTER_INTERVALS` x max(its `interval_seconds`, this)."""
        self._floor = scrape_floor_seconds
        self._sources = {source.name: source for source in sources}
        self._models = models
        self._resolved: dict[
            tuple[str, str, str | None, str | None], tuple[NeedStatus, ServedModel | None]
        ] = {}
        self._outages: dict[str, Outage] = {}
        self._said_measured: dict[str, str] = {}
        self._said_gpus: set[str] = set()
        self._status: dict[str, SourceNeed] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether any source can give a measured need (a kind that publishes its KV cache)."""
        return any(source.kv_cache_names() for source in self._sources.values())

    def per_gpu(
        self, now: float, gpus: Sequence[GpuSample], readings: Sequence[TokenReading]
    ) -> dict[str, MeasuredSample]:
        """The measured need of each GPU (by uuid) that token sources name, from their
        latest readings at epoch time `now`. A GPU gets one only when every source naming
        it gives one now (two servers on one GPU add up) and its memory total is known
        and holds that need."""
        memory: dict[int | str, int | None] = {}
        for sample in gpus:
            memory[sample.identity.index] = memory[sample.identity.uuid] = (
                sample.identity.memory_total_bytes
            )
        needs = {reading.source: self._source_need(now, reading, memory) for reading in readings}
        with self._lock:
            self._status = needs
        result: dict[str, MeasuredSample] = {}
        for gpu in gpus:
            ids: set[int | str] = {gpu.identity.index, gpu.identity.uuid}
            names = [
                name
                for name, source in self._sources.items()
                if source.kv_cache_names() and ids & set(source.gpus)
            ]
            parts = [needs.get(name) for name in names]
            if not names or any(p is None or p.need_bytes is None for p in parts):
                continue
            total = 0.0
            models = []
            for name, part in zip(names, parts, strict=True):
                assert part is not None
                assert part.need_bytes is not None
                total += part.need_bytes / len(self._sources[name].gpus)
                models.append(part.model)
            if not self._fits(gpu, total):
                continue
            result[gpu.identity.uuid] = MeasuredSample(
                total, " + ".join(dict.fromkeys(models)), tuple(names)
            )
        return result

    def _fits(self, gpu: GpuSample, need_bytes: float) -> bool:
        """Whether `gpu` can hold `need_bytes` (False when its memory is unknown); one
        WARNING per GPU the first time it cannot."""
        capacity = gpu.identity.memory_total_bytes
        if capacity is not None and need_bytes <= capacity:
            return True
        if capacity is not None and gpu.identity.uuid not in self._said_gpus:
            self._said_gpus.add(gpu.identity.uuid)
            log.warning("GPU %d: its token sources' needs add up to %.0f B, more than its "
                        "%d B; it gets no measured need", gpu.identity.index, need_bytes,
                        capacity)  # fmt: skip
        return False

    def _source_need(
        self, now: float, reading: TokenReading, memory: Mapping[int | str, int | None]
    ) -> SourceNeed:
        source = self._sources.get(reading.source)
        if source is None or not source.kv_cache_names():
            return SourceNeed("no_kv_cache")
        if not source.gpus:
            return self._say(source, SourceNeed("no_gpus"))
        age = None if reading.last_scrape_seconds is None else now - reading.last_scrape_seconds
        period = max(source.interval_seconds, self._floor)
        if not reading.up or age is None or age > STALE_AFTER_INTERVALS * period:
            return SourceNeed("down")
        kv = reading.kv_cache
        if kv is None or kv.used_tokens is None:
            return self._say(source, SourceNeed("no_kv_cache"))
        served = kv.model_names[0] if len(kv.model_names) == 1 else ""
        configured = source.model or source.config_json
        if configured is None and len(kv.model_names) > 1:
            return self._say(source, SourceNeed("several_models", ", ".join(kv.model_names)))
        if configured is None and not served:
            return self._say(source, SourceNeed("no_model_name"))
        root = dict(kv.model_roots).get(served)
        status, model = self._resolve(source, served, root, kv.cache_dtype)
        if model is None:
            return self._say(source, SourceNeed(status, served), kv.cache_dtype)
        gpus = len(source.gpus)
        if kv.engines > gpus:
            detail = f"{kv.engines} engines on the {gpus} GPU(s) it names"
            return self._say(source, SourceNeed("implausible_need", served, model.name), detail)
        # the source's total, which its GPUs share equally
        need = gpus * measured_need_bytes(model, kv.used_tokens, gpus=gpus, engines=kv.engines)
        totals = [t for t in (memory.get(gpu) for gpu in source.gpus) if t is not None]
        if totals and need / gpus > min(totals):
            detail = f"{need / gpus:.4g} B on each GPU, more than the {min(totals)} B one holds"
            return self._say(source, SourceNeed("implausible_need", served, model.name), detail)
        return self._say(source, SourceNeed("measured", served, model.name, need))

    def _resolve(
        self, source: TokenSourceConfig, served: str, root: str | None, cache_dtype: str | None
    ) -> tuple[NeedStatus, ServedModel | None]:
        dtype = cache_dtype or source.kv_cache_dtype
        key = (source.name, served, root, dtype)
        known = self._resolved.get(key)
        if known is None:
            known = self._resolved[key] = self._resolve_now(source, served, root, dtype)
        return known

    def _resolve_now(
        self, source: TokenSourceConfig, served: str, root: str | None, dtype: str | None
    ) -> tuple[NeedStatus, ServedModel | None]:
        precision = source.precision
        try:
            if source.config_json is not None:
                model = served_model(source.config_json, precision, dtype)
            elif source.model is not None:
                model = served_model(self._models.get(source.model), precision, dtype)
            else:
                match = match_served_model(served, self._models)
                if root is not None:  # what the server loaded, over what it calls it
                    by_root = match_served_model(root, self._models)
                    match = by_root if by_root.model is not None else match
                if match.model is None:
                    status: NeedStatus = (
                        "ambiguous_model" if match.status == "ambiguous" else "unknown_model"
                    )
                    return status, None
                model = served_model(match.model, precision or match.layout, dtype)
        except (ConfigJsonError, UnknownModelError, ValueError):
            return "invalid_model", None
        return ("measured", model) if model is not None else ("unknown_cache_dtype", None)

    def _say(
        self, source: TokenSourceConfig, need: SourceNeed, detail: str | None = None
    ) -> SourceNeed:
        """`need`, logged once per outage of the source's measured need (WARNING, with
        why; a need that flaps stays in one outage) and when it is measured (INFO: the
        first time, for another model, or at the end of an outage)."""
        name = source.name
        served = need.served_model
        outage = self._outages.setdefault(name, Outage())
        if need.status == "measured":
            ended = outage.succeed()
            if not outage.failing and (ended or self._said_measured.get(name) != need.model):
                self._said_measured[name] = need.model
                log.info("token source %r: GPU memory need measured from its KV cache use (%s)",
                         name, need.model)  # fmt: skip
            return need
        why = {
            "no_gpus": "it names no GPU (set `gpus`)",
            "no_kv_cache": "the server publishes no KV cache use",
            "no_model_name": "the server names no model (set `model` on the token source)",
            "several_models": f"the server serves several models ({served}); set "
            "label_matchers or `model`",
            "unknown_model": f"the sizing catalog does not know the model {served!r} (set "
            "`model` or `config_json` on the token source)",
            "ambiguous_model": f"the model {served!r} matches several catalog entries (set "
            "`model` on the token source)",
            "unknown_cache_dtype": f"its KV cache dtype {detail!r} is not known here",
            "invalid_model": "its `model`, `config_json` or `precision` cannot be sized",
            "implausible_need": f"what its server says is beyond its GPUs ({detail})",
        }.get(need.status, need.status)
        (log.warning if outage.fail() else log.debug)(
            "token source %r: no measured memory need for its GPUs: %s; they are judged on "
            "declarations or observed memory",
            name,
            why,
        )
        return need

    def statuses(self) -> Mapping[str, SourceNeed]:
        """Each source's status at the last `per_gpu` (thread-safe)."""
        with self._lock:
            return dict(self._status)

    def families(self) -> Iterator[Metric]:
        """gpuwatch_token_source_need_info{source,served_model,model,status}, for the
        token sources of a kind that publishes its KV cache (vllm, sglang)."""
        info = GaugeMetricFamily(
            "gpuwatch_token_source_need_info",
            "Whether the token source gives its GPUs a memory need measured from its KV "
            "cache use (value 1): status measured, else why not (down, no_gpus, "
            "no_kv_cache, no_model_name, several_models, unknown_model, ambiguous_model, "
            "unknown_cache_dtype, invalid_model, implausible_need); served_model: the "
            "server's model_name; model: the sizing catalog's model it was matched to.",
            labels=("source", "served_model", "model", "status"),
        )
        statuses = self.statuses()
        for name, source in self._sources.items():
            if not source.kv_cache_names():
                continue
            need = statuses.get(name, SourceNeed("down"))
            info.add_metric([name, need.served_model, need.model, need.status], 1.0)
        if info.samples:
            yield info
