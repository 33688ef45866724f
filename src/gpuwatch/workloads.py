"""Workload declarations: what runs on a GPU, so the sizing model can say what it needs.

Declared in the config (`[[workloads]]`) or in a simulated scenario; `declared_workload`
turns one into the sizing model's `Workload`. The config (which validates declarations
against the model catalog) and the analysis (which sizes them) both import this module;
it imports neither of them, only the sizing model and the snapshot. A declaration
matches a GPU by index, uuid, a glob on a process name, or globs on the Kubernetes
namespace and pod of the GPU's holder or of a process on it (attribution on); every key
set must match. It names the model (a catalog name or a parameter count), precision,
mode, the longest context and the largest batch it serves, and the KV cache's storage.
"""

from __future__ import annotations

import fnmatch
import functools
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuwatch.core.snapshot import GpuSample, PodRef
from gpuwatch.core.values import Text
from gpuwatch.sizing import Mode as SizingMode
from gpuwatch.sizing import ModelCatalog, ModelSpec, Workload, parse_param_count
from gpuwatch.sizing import Precision as SizingPrecision
from gpuwatch.sizing.hf_config import (
    ConfigJsonError,
    LoadedConfig,
    load_config_json,
    model_name_for,
)
from gpuwatch.sizing.models import PublishedPrecision
from gpuwatch.sizing.quantization import SCHEMES

Precision = PublishedPrecision
"""Storage precisions, then quantized checkpoint layouts (`gpuwatch.sizing.quantization`)."""
KvCachePrecision = Literal["fp32", "fp16", "bf16", "fp8"]
"""The KV cache's storage, as servers offer it (vLLM's ``--kv-cache-dtype fp8``); the
values of ``gpuwatch size --kv-cache-precision``."""

_PRECISION_VALUES = frozenset(p.value for p in SizingPrecision)


class WorkloadDeclaration(BaseModel):
    """One `[[workloads]]` entry."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gpu_index: int | None = Field(default=None, ge=0, le=1023)
    gpu_uuid: str | None = Field(default=None, pattern=r"^(GPU|MIG)-[0-9a-fA-F-]+$")
    process_name: Text | None = Field(default=None, max_length=256)  # glob
    namespace: Text | None = Field(default=None, max_length=256)  # glob, Kubernetes
    pod: Text | None = Field(default=None, max_length=256)  # glob, Kubernetes
    model: Text | None = None  # a catalog name: "llama-3.1-8b"
    config_json: Text | None = Field(default=None, max_length=4096)  # a Hugging Face config.json
    params: str | float | None = None  # parameter count: 7e9, "7B", "125M"
    precision: Precision | None = None  # None: the mode's default (fp16 inference, ...)
    mode: SizingMode = SizingMode.INFERENCE  # one home: sizing.Mode
    context: int = Field(default=4096, ge=1, le=100_000_000)  # tokens
    batch: int = Field(default=1, ge=1, le=1_000_000)  # concurrent sequences
    kv_cache_precision: KvCachePrecision | None = None  # None: 16-bit (the compute precision)

    @field_validator("params")
    @classmethod
    def _param_count(cls, value: str | float | None) -> str | float | None:
        if value is not None and parse_param_count(str(value)) <= 0:
            raise ValueError("a parameter count must be positive")
        return value

    @model_validator(mode="after")
    def _complete(self) -> WorkloadDeclaration:
        keys = (self.gpu_index, self.gpu_uuid, self.process_name, self.namespace, self.pod)
        if all(key is None for key in keys):
            raise ValueError(
                "set at least one of gpu_index, gpu_uuid, process_name, namespace, pod"
            )
        if sum(key is not None for key in (self.model, self.params, self.config_json)) != 1:
            raise ValueError("set exactly one of model, params and config_json")
        if self.precision in SCHEMES and self.precision not in _PRECISION_VALUES:
            if self.params is not None:
                raise ValueError(
                    f"precision {self.precision} (a checkpoint layout) needs a model, not "
                    "params: its 16-bit embeddings and head depend on the vocabulary"
                )
            if self.mode != "inference":
                raise ValueError(
                    f"precision {self.precision} (a checkpoint layout) is for mode inference"
                )
        if self.kv_cache_precision is not None and self.mode != "inference":
            raise ValueError(
                f"kv_cache_precision ({self.kv_cache_precision}) is for mode inference: "
                "training keeps no KV cache"
            )
        return self

    @property
    def kv_cache_sizing_precision(self) -> SizingPrecision | None:
        """`kv_cache_precision` as the sizing model's `Precision`, None when not set."""
        value = self.kv_cache_precision
        return None if value is None else SizingPrecision(value)

    @property
    def label(self) -> str:
        """What to call the workload in metrics and messages."""
        if self.config_json is not None:
            return model_name_for(Path(self.config_json))
        return self.model or f"{self.params} params"

    def matches(self, gpu: GpuSample) -> bool:
        """True when every match key that is set agrees with this GPU."""
        ident = gpu.identity
        if self.gpu_index is not None and ident.index != self.gpu_index:
            return False
        if self.gpu_uuid is not None and ident.uuid != self.gpu_uuid:
            return False
        if self.process_name is not None:
            names = [p.name for p in gpu.processes or ()]
            if not any(fnmatch.fnmatchcase(name, self.process_name) for name in names):
                return False
        if self.namespace is not None or self.pod is not None:
            pods = [gpu.pod, *(p.pod for p in gpu.processes or ())]
            return any(self._matches_pod(pod) for pod in pods if pod is not None)
        return True

    def _matches_pod(self, pod: PodRef) -> bool:
        """True when the namespace and pod globs that are set match `pod`."""
        if self.namespace is not None and not fnmatch.fnmatchcase(pod.namespace, self.namespace):
            return False
        return self.pod is None or fnmatch.fnmatchcase(pod.pod, self.pod)


def find_declaration(
    declarations: tuple[WorkloadDeclaration, ...], gpu: GpuSample
) -> WorkloadDeclaration | None:
    """The first declaration that matches the GPU (config order, scenario ones last)."""
    return next((d for d in declarations if d.matches(gpu)), None)


def declared_workload(declaration: WorkloadDeclaration, models: ModelCatalog) -> Workload:
    """The sizing model's `Workload` for a declaration.

    Raises UnknownModelError (a KeyError) for a model name not in `models`, ValueError
    for a parameter count that does not parse or a config.json that cannot be sized
    (`gpuwatch.sizing.hf_config.ConfigJsonError`).
    """
    if declaration.config_json is not None:
        return _config_json_workload(declaration)
    model: ModelSpec | int = (
        models.get(declaration.model)
        if declaration.model is not None
        else parse_param_count(str(declaration.params))
    )
    name = declaration.precision
    layout = name is not None and name not in _PRECISION_VALUES
    return Workload(
        model=model,
        mode=SizingMode(declaration.mode),
        precision=None if name is None or layout else SizingPrecision(name),
        quantization=SCHEMES[name] if layout and name is not None else None,
        context_tokens=declaration.context,
        batch=declaration.batch,
        kv_cache_precision=declaration.kv_cache_sizing_precision,
    )


@functools.lru_cache(maxsize=64)
def _load_config_json(path: str, mtime_ns: int) -> LoadedConfig:
    """`load_config_json`, once per file version (`mtime_ns` keys the cache)."""
    del mtime_ns
    return load_config_json(Path(path))


def _config_json_workload(declaration: WorkloadDeclaration) -> Workload:
    """The `Workload` of a declaration naming a config.json: its architecture, and its
    ``quantization_config`` as the weights' layout (inference only, no `precision`)."""
    return config_json_workload(
        str(declaration.config_json),
        declaration.precision,
        mode=declaration.mode,
        context=declaration.context,
        batch=declaration.batch,
        kv_cache_precision=declaration.kv_cache_sizing_precision,
    )


def config_json_workload(
    config_json: str,
    precision: str | None,
    *,
    mode: str = "inference",
    context: int = 4096,
    batch: int = 1,
    kv_cache_precision: SizingPrecision | None = None,
) -> Workload:
    """The `Workload` of the model a Hugging Face config.json describes (read once per
    file version); its ``quantization_config`` (or a sibling ``hf_quant_config.json``),
    when it has one, is the weights' layout as published, unless `precision` is given:
    then the architecture is sized at that precision. Raises ConfigJsonError when the
    file cannot be read or sized."""
    path = Path(config_json).expanduser()
    try:
        mtime_ns = path.stat().st_mtime_ns
    except OSError as exc:
        raise ConfigJsonError(f"{path}: {exc.strerror or exc}") from None
    loaded = _load_config_json(str(path), mtime_ns)
    checkpoint = None if precision is not None else loaded.quantization
    if checkpoint is not None and mode != "inference":
        raise ConfigJsonError(
            f"{path}: a quantized checkpoint ({checkpoint.name}) is for mode inference "
            "(give a precision to size its architecture)"
        )
    layout = precision is not None and precision not in {p.value for p in SizingPrecision}
    return Workload(
        model=loaded.spec,
        mode=SizingMode(mode),
        precision=None if precision is None or layout else SizingPrecision(precision),
        quantization=checkpoint or (SCHEMES[precision] if layout and precision else None),
        quantization_published=checkpoint is not None,
        context_tokens=context,
        batch=batch,
        kv_cache_precision=kv_cache_precision,
    )


def served_workload(model: ModelSpec, precision: str | None) -> Workload:
    """The inference `Workload` of `model` with weights stored at `precision`: a storage
    precision ("bf16", "fp8") or a checkpoint layout ("awq-int4", "mxfp4"); None: the
    model's published precision (`ModelSpec.published_precision`), else bf16. Context and
    batch are left at their defaults (what a measured need does not use)."""
    if precision is None and model.published_precision is not None:
        return Workload(model=model, mode=SizingMode.INFERENCE)
    name = precision or "bf16"
    layout = name not in _PRECISION_VALUES
    return Workload(
        model=model,
        mode=SizingMode.INFERENCE,
        precision=None if layout else SizingPrecision(name),
        quantization=SCHEMES[name] if layout else None,
    )
