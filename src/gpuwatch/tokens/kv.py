"""What an inference server says about its KV cache: how much of it is in use, and of what.

Pure, no I/O: from the samples `parse.find_samples` found in one /metrics body, a
`KvCacheReading` in tokens. The families read, by server kind:

- vLLM: ``vllm:cache_config_info`` (a gauge of 1 whose labels carry the engine's cache
  settings: ``block_size``, ``num_gpu_blocks``, ``cache_dtype``,
  ``gpu_memory_utilization``, ...) and ``vllm:kv_cache_usage_perc`` (v1: 1 = the whole
  pool in use), or ``vllm:gpu_cache_usage_perc`` in releases before v1, labelled
  ``model_name`` and ``engine``. Tokens in use = usage x num_gpu_blocks x block_size,
  each engine with its own cache_config_info (paired by ``engine``).
- SGLang (python/sglang/srt/metrics/collector.py, `SchedulerMetricsCollector`):
  ``sglang:num_used_tokens`` (tokens whose KV is held), ``sglang:max_total_num_tokens``
  ("Maximum total number of tokens in the KV cache pool") and ``sglang:token_usage``
  (0-1), labelled ``model_name``, ``engine_type``, ``tp_rank``, ``pp_rank`` and, with
  data-parallel attention, ``dp_rank`` (`SchedulerMetricsMixin.init_metrics` in
  python/sglang/srt/managers/scheduler_metrics_mixin.py). SGLang publishes
  no cache dtype: the token source's `kv_cache_dtype` says it (default: the model's).
- llama.cpp, TGI and custom servers: nothing read. llama.cpp's /metrics names no model
  and current builds dropped its ``llamacpp:kv_cache_usage_ratio`` and
  ``llamacpp:kv_cache_tokens`` gauges; TGI publishes no KV cache usage.

Series that differ only by ``tp_rank`` or ``pp_rank`` are one pool seen by each
tensor- or pipeline-parallel rank (the largest is taken: a pipeline stage holds the KV
of its own layers for the same tokens, and its share of the same copy of the weights);
other series (``dp_rank``: data-parallel engines) are pools of their own,
and add up: `KvCacheReading.engines` counts them (each engine holds a copy of the
weights).

What a server may claim is bounded: a pool or a token count above `MAX_POOL_TOKENS`,
or a pool size that is negative or fractional, is an ExpositionError (the source is
down), never a number passed on; a pool of 0 tokens is no pool (unknown), not an empty
one, since no server serves without one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuwatch.tokens.parse import ExpositionError, LabelSet, Sample, matching

VLLM_CACHE_INFO = "vllm:cache_config_info"
VLLM_USAGE = "vllm:kv_cache_usage_perc"
VLLM_USAGE_OLD = "vllm:gpu_cache_usage_perc"
SGLANG_USED = "sglang:num_used_tokens"
SGLANG_CAPACITY = "sglang:max_total_num_tokens"
SGLANG_USAGE = "sglang:token_usage"

KV_CACHE_NAMES: dict[str, tuple[str, ...]] = {
    "vllm": (VLLM_CACHE_INFO, VLLM_USAGE, VLLM_USAGE_OLD),
    "sglang": (SGLANG_USED, SGLANG_CAPACITY, SGLANG_USAGE),
}
"""Per server kind, the sample names read for the KV cache (none for the other kinds)."""

RANK_LABELS = frozenset({"tp_rank", "pp_rank"})
"""Labels whose series repeat one pool (one copy of the weights), once per tensor- or
pipeline-parallel rank."""

MAX_POOL_TOKENS = 2**40
"""The most tokens a source may say one pool holds or uses (1,099,511,627,776). Any
model caches at least 128 B a token (K and V of one 64-wide head on one layer, at one
byte a value), so 2^40 tokens would take 128 TiB: over 60 times the GPU memory of the largest
8-GPU node (8 x 288 GB). Above it the page is a lie, not a big server."""


@dataclass(frozen=True, slots=True)
class KvCacheReading:
    """A server's KV cache at one scrape, in tokens (None: the server did not say).

    `used_tokens` hold KV now, of a pool of `capacity_tokens`; `model_names` are the
    distinct ``model_name`` labels of the usage series (sorted); `cache_dtype` is vLLM's
    ``cache_dtype`` label (None for SGLang, or engines that disagree); `engines` the
    pools (data-parallel engines, each with its own copy of the weights) they add up.
    """

    used_tokens: float | None
    capacity_tokens: float | None
    model_names: tuple[str, ...] = ()
    cache_dtype: str | None = None
    engines: int = 1
    model_roots: tuple[tuple[str, str], ...] = ()
    """(served name, root) for the `model_names` the server's /v1/models resolves
    (`gpuwatch.tokens.served`): the model an alias stands for."""

    @property
    def usage_ratio(self) -> float | None:
        """used / capacity (0-1); None when either is unknown or the pool is empty."""
        if self.used_tokens is None or not self.capacity_tokens:
            return None
        return self.used_tokens / self.capacity_tokens


def _pool_key(labels: LabelSet) -> LabelSet:
    return tuple((k, v) for k, v in labels if k not in RANK_LABELS)


def _pools(series: Mapping[LabelSet, float]) -> dict[LabelSet, float]:
    """One value per pool: series that differ only by a rank label are one pool (max)."""
    pools: dict[LabelSet, float] = {}
    for labels, value in series.items():
        key = _pool_key(labels)
        pools[key] = max(pools.get(key, value), value)
    return pools


def _whole(text: str | None, label: str) -> int | None:
    """A label value that is a whole number within 0-`MAX_POOL_TOKENS` ("27277"); None
    when it is no number ("None" before vLLM's profiling, ""). Raises ExpositionError
    for a number that is negative, fractional, not finite or above the bound."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if not 0 <= value <= MAX_POOL_TOKENS or value != math.floor(value):  # NaN fails too
        raise ExpositionError(f"{label}={text[:40]!r} is not a pool size (0-{MAX_POOL_TOKENS})")
    return int(value)


def _tokens(series: Mapping[LabelSet, float], name: str) -> dict[LabelSet, float]:
    """`series` unchanged; raises ExpositionError for a value above `MAX_POOL_TOKENS`."""
    for labels, value in series.items():
        if value > MAX_POOL_TOKENS:
            raise ExpositionError(
                f"{name} {dict(labels)} is {value:g} tokens, above {MAX_POOL_TOKENS}"
            )
    return dict(series)


def _model_names(series: Mapping[LabelSet, float]) -> tuple[str, ...]:
    return tuple(sorted({dict(labels)["model_name"] for labels in series if _has_model(labels)}))


def _has_model(labels: LabelSet) -> bool:
    return any(k == "model_name" and v for k, v in labels)


def vllm_reading(
    found: Mapping[str, Sequence[Sample]], matchers: Mapping[str, str]
) -> KvCacheReading | None:
    """vLLM's KV cache; None when the page has no usage gauge.

    `matchers` select the usage series (they carry ``model_name`` and ``engine`` as the
    token counters do); each is paired with the ``cache_config_info`` of its ``engine``,
    or with the only one when there is one. Capacity is unknown when an engine's info is
    missing or its ``num_gpu_blocks`` is not a number (before the profiling run) or 0.
    Raises ExpositionError for a pool size out of bounds (`_whole`, `MAX_POOL_TOKENS`).
    """
    name = VLLM_USAGE if VLLM_USAGE in found else VLLM_USAGE_OLD
    if name not in found:
        return None
    usage = _pools(matching(found[name], matchers))
    infos = [dict(labels) for labels, _ in found.get(VLLM_CACHE_INFO, ())]
    by_engine = {info.get("engine", ""): info for info in infos}
    used = 0.0
    capacity = 0.0
    known = bool(usage)
    dtypes: set[str] = set()
    for labels, ratio in usage.items():
        engine = dict(labels).get("engine", "")
        info = by_engine.get(engine) if len(infos) != 1 else infos[0]
        if info is None:
            known = False
            continue
        blocks = _whole(info.get("num_gpu_blocks"), "num_gpu_blocks")
        block_size = _whole(info.get("block_size"), "block_size")
        if not blocks or not block_size:  # unknown, or 0: no pool (no server serves without)
            known = False
            continue
        if blocks * block_size > MAX_POOL_TOKENS:  # whole numbers: no overflow
            raise ExpositionError(
                f"num_gpu_blocks x block_size = {blocks} x {block_size} is above "
                f"{MAX_POOL_TOKENS} tokens"
            )
        dtypes.add(info.get("cache_dtype", "auto") or "auto")
        pool = float(blocks * block_size)
        capacity += pool
        used += min(ratio, 1.0) * pool
    return KvCacheReading(
        used_tokens=used if known else None,
        capacity_tokens=capacity if known else None,
        model_names=_model_names(usage),
        cache_dtype=dtypes.pop() if len(dtypes) == 1 else None,
        engines=max(len(usage), 1),
    )


def sglang_reading(
    found: Mapping[str, Sequence[Sample]], matchers: Mapping[str, str]
) -> KvCacheReading | None:
    """SGLang's KV cache; None when the page has neither the used tokens nor the usage.

    Tokens in use: ``num_used_tokens``, else ``token_usage`` x ``max_total_num_tokens``;
    both unknown when the pool is said to hold 0 tokens. Raises ExpositionError for a
    token count above `MAX_POOL_TOKENS`.
    """
    used_series = _tokens(_pools(matching(found.get(SGLANG_USED, ()), matchers)), SGLANG_USED)
    capacity_series = _tokens(
        _pools(matching(found.get(SGLANG_CAPACITY, ()), matchers)), SGLANG_CAPACITY
    )
    usage_series = _pools(matching(found.get(SGLANG_USAGE, ()), matchers))
    if not used_series and not usage_series:
        return None
    names = _model_names({**used_series, **usage_series})
    engines = max(len(used_series), len(usage_series), len(capacity_series), 1)
    capacity = sum(capacity_series.values()) if capacity_series else None
    if capacity == 0:  # no pool: no evidence of a need
        return KvCacheReading(None, None, names, engines=engines)
    if used_series:
        used: float | None = sum(used_series.values())
    elif capacity_series and set(usage_series) <= set(capacity_series):
        used = sum(min(r, 1.0) * capacity_series[k] for k, r in usage_series.items())
    else:
        used = None
    if used is not None and capacity is not None:
        used = min(used, capacity)  # as a usage ratio is at most 1
    return KvCacheReading(
        used_tokens=used, capacity_tokens=capacity, model_names=names, engines=engines
    )


def kv_cache_reading(
    kind: str, found: Mapping[str, Sequence[Sample]], matchers: Mapping[str, str]
) -> KvCacheReading | None:
    """The KV cache a server of `kind` publishes in `found` (samples by name); None when
    it publishes none. Raises ExpositionError on a repeated series, a value that is
    not a finite number >= 0, or a pool or token count out of bounds."""
    if kind == "vllm":
        return vllm_reading(found, matchers)
    if kind == "sglang":
        return sglang_reading(found, matchers)
    return None
