"""The GPU catalog: specifications and reference prices of the parts gpuwatch sizes against.

The figures live in the package data file ``gpus.toml`` in a datasheet's units (decimal
GB, GB/s, dense TFLOPS, W, USD), each with a named source. `GpuCatalogEntry` is that
schema as a pydantic model, so the agent config can embed ``list[GpuCatalogEntry]`` to
override a figure of a built-in part or add a part; `build_gpu_catalog` merges both into
a `GpuCatalog` of `GpuSpec` values in base units (bytes, bytes/s, FLOP/s). Nothing here
talks to NVML: `GpuCatalog.match_nvml_name` only compares strings.
"""

from __future__ import annotations

import fnmatch
import functools
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gpuwatch.sizing.units import GB, TERA

Tier = Literal["consumer", "workstation", "datacenter"]

T = TypeVar("T")

# Catalog field (gpus.toml, GpuCatalogEntry) -> GpuSpec field. Every one carries a source.
_SPEC_FIELD: Mapping[str, str] = MappingProxyType(
    {
        "tier": "tier",
        "nvml_names": "nvml_names",
        "memory_gb": "memory_bytes",
        "memory_bandwidth_gb_per_second": "memory_bandwidth_bytes_per_second",
        "bf16_tflops": "bf16_flops_per_second",
        "fp8_tflops": "fp8_flops_per_second",
        "fp4_tflops": "fp4_flops_per_second",
        "tdp_watts": "tdp_watts",
        "nvlink_gb_per_second": "nvlink_bytes_per_second",
        "nvlink_domain_gpus": "nvlink_domain_gpus",
        "gpus_per_node": "gpus_per_node",
        "purchase_usd": "purchase_usd",
        "rent_usd_per_hour": "rent_usd_per_hour",
    }
)

REQUIRED_FIGURES = (
    "tier",
    "memory_gb",
    "memory_bandwidth_gb_per_second",
    "bf16_tflops",
    "tdp_watts",
    "purchase_usd",
    "rent_usd_per_hour",
)
"""What a new (not built-in) id must give; the others default to none."""

DEFAULT_GPUS_PER_NODE = 8
"""`gpus_per_node` of a part that does not give one: an HGX board's, and the most PCIe
servers hold (AWS g6e.48xlarge: 8 L40S; g5.48xlarge: 8 A10G)."""

CONFIG_SOURCE = "agent config"
"""The source recorded for a figure set from the agent config without its own source."""


class CatalogError(ValueError):
    """A catalog entry that cannot be used (missing figures, duplicate ids)."""


class UnknownGpuError(KeyError):
    """`GpuCatalog.get` of an id the catalog lacks; the message lists the known ids."""

    def __str__(self) -> str:
        return str(self.args[0])


class GpuCatalogEntry(BaseModel):
    """One part as written in ``gpus.toml`` or in the agent config.

    Every field but `id` is optional: an entry whose id is built in overrides only the
    figures it sets; a new id must set all of `REQUIRED_FIGURES`. `sources` maps a
    figure's name to where it comes from.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=64)
    tier: Tier | None = None
    nvml_names: tuple[str, ...] | None = None
    memory_gb: float | None = Field(default=None, gt=0)
    memory_bandwidth_gb_per_second: float | None = Field(default=None, gt=0)
    bf16_tflops: float | None = Field(default=None, gt=0)
    fp8_tflops: float | None = Field(default=None, gt=0)
    fp4_tflops: float | None = Field(default=None, gt=0)
    tdp_watts: float | None = Field(default=None, gt=0)
    nvlink_gb_per_second: float | None = Field(default=None, gt=0)
    nvlink_domain_gpus: int | None = Field(default=None, ge=1, le=576)
    gpus_per_node: int | None = Field(default=None, ge=1, le=576)
    purchase_usd: float | None = Field(default=None, gt=0)
    rent_usd_per_hour: float | None = Field(default=None, gt=0)
    sources: dict[str, str] | None = None

    @field_validator("sources")
    @classmethod
    def _sources_name_figures(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        unknown = sorted(set(value or {}) - set(_SPEC_FIELD))
        if unknown:
            raise ValueError(
                f"sources for unknown figures {unknown}; figures are: {', '.join(_SPEC_FIELD)}"
            )
        return value

    @model_validator(mode="after")
    def _new_id_is_complete(self, info: ValidationInfo) -> GpuCatalogEntry:
        if info.context and info.context.get("builtin"):
            return self
        if self.id.casefold() not in _builtin_ids():
            _require_figures(self)
        return self


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One part in base units.

    `memory_bytes` is the marketed capacity in decimal bytes (80 GB = 80e9), which for
    every built-in part is at most NVML's total. FLOP/s figures are dense tensor-core
    peaks; `fp8_flops_per_second`, `fp4_flops_per_second` and `nvlink_bytes_per_second`
    are None where the part has no FP8, no FP4 (before Blackwell) or no NVLink.
    `rent_usd_per_hour` is the reference on-demand price of one GPU-hour used for
    comparisons. `nvlink_domain_gpus`: GPUs one NVLink domain joins, the most a
    tensor-parallel group may span (8 on an HGX board, 2 over a PCIe card's bridge, 1
    without NVLink); `gpus_per_node`: GPUs in the server the part is rented or sold in.
    `sources` maps each field name to where its figure comes from.
    """

    id: str
    tier: Tier
    nvml_names: tuple[str, ...]
    memory_bytes: int
    memory_bandwidth_bytes_per_second: float
    bf16_flops_per_second: float
    fp8_flops_per_second: float | None
    tdp_watts: float
    nvlink_bytes_per_second: float | None
    purchase_usd: float
    rent_usd_per_hour: float
    fp4_flops_per_second: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    nvlink_domain_gpus: int = 1
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE


def _normalize(name: str) -> str:
    return " ".join(name.split()).casefold()


def _is_glob(pattern: str) -> bool:
    return any(char in pattern for char in "*?[")


class GpuCatalog:
    """An ordered, read-only set of `GpuSpec`, looked up by id or by NVML name."""

    __slots__ = ("_by_id", "_gpus")

    def __init__(self, gpus: Iterable[GpuSpec]) -> None:
        self._gpus = tuple(gpus)
        self._by_id: dict[str, GpuSpec] = {}
        for gpu in self._gpus:
            key = gpu.id.casefold()
            if key in self._by_id:
                raise CatalogError(f"duplicate GPU id {gpu.id!r}")
            self._by_id[key] = gpu

    def __iter__(self) -> Iterator[GpuSpec]:
        return iter(self._gpus)

    def __len__(self) -> int:
        return len(self._gpus)

    def __contains__(self, gpu_id: object) -> bool:
        return isinstance(gpu_id, str) and gpu_id.casefold() in self._by_id

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids in catalog order."""
        return tuple(gpu.id for gpu in self._gpus)

    def get(self, gpu_id: str) -> GpuSpec:
        """The part with this id (case-insensitive); raises `UnknownGpuError`."""
        try:
            return self._by_id[gpu_id.casefold()]
        except KeyError:
            raise UnknownGpuError(f"unknown GPU {gpu_id!r}; known: {', '.join(self.ids)}") from None

    def match_nvml_name(self, name: str) -> GpuSpec | None:
        """The part whose `nvml_names` match an `nvmlDeviceGetName` string, else None.

        Comparison ignores case and repeated whitespace. Exact names win over glob
        patterns (``*``, ``?``, ``[...]``); ties go to catalog order. MIG devices
        ("... MIG 1g.10gb") match nothing: they have a fraction of the part.
        """
        wanted = _normalize(name)
        for exact in (True, False):
            for gpu in self._gpus:
                for pattern in gpu.nvml_names:
                    norm = _normalize(pattern)
                    if _is_glob(norm) == exact:
                        continue
                    if norm == wanted if exact else fnmatch.fnmatchcase(wanted, norm):
                        return gpu
        return None


def _require_figures(entry: GpuCatalogEntry) -> None:
    missing = [name for name in REQUIRED_FIGURES if getattr(entry, name) is None]
    if missing:
        raise CatalogError(
            f"GPU {entry.id!r} is not in the built-in catalog, so it needs: {', '.join(missing)}"
        )


def _read_builtin() -> dict[str, Any]:
    text = resources.files("gpuwatch.sizing").joinpath("gpus.toml").read_text("utf-8")
    return tomllib.loads(text)


@functools.cache
def builtin_gpu_entries() -> tuple[GpuCatalogEntry, ...]:
    """The entries of the packaged ``gpus.toml``, in file order."""
    entries = []
    for key, table in _read_builtin().items():
        try:
            entry = GpuCatalogEntry.model_validate({"id": key, **table}, context={"builtin": True})
        except ValidationError as exc:  # a packaging bug, not a user error
            raise RuntimeError(f"gpus.toml [{key}] is invalid: {exc}") from exc
        _require_figures(entry)
        unsourced = [
            name
            for name in _SPEC_FIELD
            if getattr(entry, name) is not None and name not in (entry.sources or {})
        ]
        if unsourced:
            raise RuntimeError(f"gpus.toml [{key}] has figures without a source: {unsourced}")
        entries.append(entry)
    return tuple(entries)


@functools.cache
def _builtin_ids() -> frozenset[str]:
    return frozenset(key.casefold() for key in _read_builtin())


def _merge(base: GpuCatalogEntry, override: GpuCatalogEntry) -> GpuCatalogEntry:
    figures = override.model_dump(exclude_unset=True, exclude={"id", "sources"})
    sources = dict(base.sources or {})
    given = override.sources or {}
    for name in figures:
        sources[name] = given.get(name, CONFIG_SOURCE)
    sources.update(given)
    return base.model_copy(update={**figures, "sources": sources})


def _with_default_sources(entry: GpuCatalogEntry) -> GpuCatalogEntry:
    sources = {name: CONFIG_SOURCE for name in _SPEC_FIELD if getattr(entry, name) is not None}
    sources.update(entry.sources or {})
    return entry.model_copy(update={"sources": sources})


def _figure(entry: GpuCatalogEntry, name: str, value: T | None) -> T:
    if value is None:
        raise CatalogError(f"GPU {entry.id!r} lacks {name}")
    return value


def to_spec(entry: GpuCatalogEntry) -> GpuSpec:
    """Convert a complete entry to base units; raises `CatalogError` when incomplete."""
    _require_figures(entry)
    sources = entry.sources or {}
    fp8 = entry.fp8_tflops
    nvlink = entry.nvlink_gb_per_second
    return GpuSpec(
        id=entry.id,
        tier=_figure(entry, "tier", entry.tier),
        nvml_names=entry.nvml_names or (),
        memory_bytes=round(_figure(entry, "memory_gb", entry.memory_gb) * GB),
        memory_bandwidth_bytes_per_second=_figure(
            entry, "memory_bandwidth_gb_per_second", entry.memory_bandwidth_gb_per_second
        )
        * GB,
        bf16_flops_per_second=_figure(entry, "bf16_tflops", entry.bf16_tflops) * TERA,
        fp8_flops_per_second=None if fp8 is None else fp8 * TERA,
        tdp_watts=_figure(entry, "tdp_watts", entry.tdp_watts),
        nvlink_bytes_per_second=None if nvlink is None else nvlink * GB,
        purchase_usd=_figure(entry, "purchase_usd", entry.purchase_usd),
        rent_usd_per_hour=_figure(entry, "rent_usd_per_hour", entry.rent_usd_per_hour),
        fp4_flops_per_second=None if entry.fp4_tflops is None else entry.fp4_tflops * TERA,
        nvlink_domain_gpus=entry.nvlink_domain_gpus or 1,
        gpus_per_node=entry.gpus_per_node or DEFAULT_GPUS_PER_NODE,
        sources=MappingProxyType({_SPEC_FIELD[name]: text for name, text in sources.items()}),
    )


def build_gpu_catalog(overrides: Sequence[GpuCatalogEntry] = ()) -> GpuCatalog:
    """The built-in catalog with `overrides` applied in order.

    An override whose id (case-insensitive) is built in replaces only the figures it
    sets, and each of those figures' source becomes its own `sources` entry or
    "agent config"; any other id is appended as a new part and must be complete.
    """
    entries = {entry.id.casefold(): entry for entry in builtin_gpu_entries()}
    for override in overrides:
        key = override.id.casefold()
        base = entries.get(key)
        if base is None:
            _require_figures(override)
            entries[key] = _with_default_sources(override)
        else:
            entries[key] = _merge(base, override)
    return GpuCatalog(to_spec(entry) for entry in entries.values())
