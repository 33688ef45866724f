"""The sizing model: what a workload needs and which GPU serves it cheapest.

The arithmetic of the seeds as a library, in base units (bytes, bytes/s, FLOP/s, USD):
`gpus` and `models` are the catalogs (package data, overridable from the agent config),
`memory` the VRAM breakdown, `throughput` tokens/s from the roofline, `cost` $/1M tokens
rented and owned, `fit` which GPUs hold a workload and the cheapest that does. `command`
is ``gpuwatch size``; `doc` renders the catalogs for docs/sizing.md. No module here reads
NVML, touches the network or keeps global state beyond cached package data.
"""

from __future__ import annotations

from gpuwatch.core.units import GIB
from gpuwatch.sizing.cost import (
    Ownership,
    owned_usd_per_hour,
    usd_per_million_tokens_owned,
    usd_per_million_tokens_rented,
)
from gpuwatch.sizing.fit import (
    DEFAULT_HEADROOM,
    RankedGpu,
    cheapest_fitting,
    fits,
    gpus_needed,
    rank_gpus,
)
from gpuwatch.sizing.gpus import (
    CatalogError,
    GpuCatalog,
    GpuCatalogEntry,
    GpuSpec,
    UnknownGpuError,
    build_gpu_catalog,
)
from gpuwatch.sizing.memory import (
    MemoryAssumptions,
    MemoryBreakdown,
    Mode,
    Precision,
    Workload,
    kv_cache_bytes,
    memory_requirement,
)
from gpuwatch.sizing.models import (
    ModelCatalog,
    ModelCatalogEntry,
    ModelSpec,
    ServedModelMatch,
    UnknownModelError,
    build_model_catalog,
    match_served_model,
)
from gpuwatch.sizing.throughput import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_TRAINING_MFU,
    decode_tokens_per_second,
    ridge_point_flops_per_byte,
    tokens_per_second,
    training_tokens_per_second,
)
from gpuwatch.sizing.units import GB, parse_param_count

__all__ = [
    "DEFAULT_BANDWIDTH_EFFICIENCY",
    "DEFAULT_HEADROOM",
    "DEFAULT_TRAINING_MFU",
    "GB",
    "GIB",
    "CatalogError",
    "GpuCatalog",
    "GpuCatalogEntry",
    "GpuSpec",
    "MemoryAssumptions",
    "MemoryBreakdown",
    "Mode",
    "ModelCatalog",
    "ModelCatalogEntry",
    "ModelSpec",
    "Ownership",
    "Precision",
    "RankedGpu",
    "ServedModelMatch",
    "UnknownGpuError",
    "UnknownModelError",
    "Workload",
    "build_gpu_catalog",
    "build_model_catalog",
    "cheapest_fitting",
    "decode_tokens_per_second",
    "fits",
    "gpus_needed",
    "kv_cache_bytes",
    "match_served_model",
    "memory_requirement",
    "owned_usd_per_hour",
    "parse_param_count",
    "rank_gpus",
    "ridge_point_flops_per_byte",
    "tokens_per_second",
    "training_tokens_per_second",
    "usd_per_million_tokens_owned",
    "usd_per_million_tokens_rented",
]
