"""The sizing model: what a workload needs and which GPU serves it cheapest.

The arithmetic of the seeds as a library, in base units (bytes, bytes/s, FLOP/s, USD):
`gpus` and `models` are the catalogs (package data, overridable from the agent config),
`workload` what is sized (`Workload`, `Precision`, `Mode`), `memory` the VRAM breakdown,
`throughput` tokens/s from the roofline, `fit` which GPUs hold a workload, how many and
how fast, `candidates` which catalog GPUs a team can get (billing, the analysis and the
plan use it), `config` the ``[sizing]`` section; `doc` renders the catalogs for
docs/sizing.md. No module here reads NVML, touches the network
or keeps global state beyond cached package data.

What must not live here: dollars beyond the catalog's prices (cost per token, owning,
ranking by price are `gpuwatch.tco`'s, which sits above sizing), a command or its output
(``gpuwatch size`` is `gpuwatch.cli.size`), an import of `gpuwatch.config`.

Layer: sizing, right above core (core < sizing < sources < tco); it imports core only.
"""

from __future__ import annotations

from gpuwatch.core.units import GIB
from gpuwatch.sizing.fit import (
    DEFAULT_HEADROOM,
    GpuFit,
    cheapest_fitting,
    fit_gpus,
    fits,
    gpus_needed,
)
from gpuwatch.sizing.gpus import (
    CatalogError,
    GpuCatalog,
    GpuCatalogEntry,
    GpuSpec,
    UnknownGpuError,
    build_gpu_catalog,
)
from gpuwatch.sizing.memory import MemoryBreakdown, kv_cache_bytes, memory_requirement
from gpuwatch.sizing.models import (
    ModelCatalog,
    ModelCatalogEntry,
    ModelSpec,
    UnknownModelError,
    build_model_catalog,
)
from gpuwatch.sizing.served_names import ServedModelMatch, match_served_model
from gpuwatch.sizing.throughput import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_TRAINING_MFU,
    decode_tokens_per_second,
    ridge_point_flops_per_byte,
    tokens_per_second,
    training_tokens_per_second,
)
from gpuwatch.sizing.units import GB, parse_param_count
from gpuwatch.sizing.workload import MemoryAssumptions, Mode, Precision, Workload

__all__ = [
    "DEFAULT_BANDWIDTH_EFFICIENCY",
    "DEFAULT_HEADROOM",
    "DEFAULT_TRAINING_MFU",
    "GB",
    "GIB",
    "CatalogError",
    "GpuCatalog",
    "GpuCatalogEntry",
    "GpuFit",
    "GpuSpec",
    "MemoryAssumptions",
    "MemoryBreakdown",
    "Mode",
    "ModelCatalog",
    "ModelCatalogEntry",
    "ModelSpec",
    "Precision",
    "ServedModelMatch",
    "UnknownGpuError",
    "UnknownModelError",
    "Workload",
    "build_gpu_catalog",
    "build_model_catalog",
    "cheapest_fitting",
    "decode_tokens_per_second",
    "fit_gpus",
    "fits",
    "gpus_needed",
    "kv_cache_bytes",
    "match_served_model",
    "memory_requirement",
    "parse_param_count",
    "ridge_point_flops_per_byte",
    "tokens_per_second",
    "training_tokens_per_second",
]
