"""The `[[token_sources]]` config entries: which inference servers to scrape, and how.

Each entry names one server's Prometheus endpoint and the kind of server, which fixes
the two counters read from it (`COUNTER_NAMES`); `kind = "custom"` names them instead.
The lead embeds `TokenSources` in `gpuwatch.config.Config`. This module must not import
`gpuwatch.config` (which imports it) and does no I/O.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuwatch.core.values import Text, check_http_url
from gpuwatch.tokens.kv import KV_CACHE_NAMES
from gpuwatch.workloads import Precision

ServerKind = Literal["vllm", "sglang", "llamacpp", "tgi", "custom"]
TokenKind = Literal["prompt", "generation"]
KvCacheDtype = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bf16", "fp16", "fp32"]

COUNTER_NAMES: dict[str, tuple[str, str]] = {
    "vllm": ("vllm:prompt_tokens_total", "vllm:generation_tokens_total"),
    "sglang": ("sglang:prompt_tokens_total", "sglang:generation_tokens_total"),
    "llamacpp": ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total"),
    "tgi": ("tgi_request_input_length_sum", "tgi_request_generated_tokens_sum"),
}
"""(prompt, generation) sample names per server kind, as the server exposes them."""

PROMPT_BY_ORIGIN: dict[str, tuple[str, str]] = {
    "vllm": ("vllm:prompt_tokens_by_source_total", "source"),
}
"""Per server kind, an optional counter that splits prompt tokens by where their KV cache
came from, and the label that names the origin (vLLM: `local_compute`, `local_cache_hit`,
`external_kv_transfer`). Read when the server exposes it; never required."""

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_GPU_UUID = re.compile(r"^(GPU|MIG)-[0-9a-fA-F-]+$")


class TokenSourceConfig(BaseModel):
    """[[token_sources]]: one inference server whose token counters gpuwatch reads.

    `gpus` lists the GPUs (indexes or UUIDs) the server runs on: their whole cost, idle
    time included, is charged to this source's tokens.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=100)  # data: escaped where shown
    """The `source` label of the exported series."""
    url: str
    """The server's /metrics URL (http or https)."""
    kind: ServerKind = "vllm"
    prompt_metric: str | None = None
    """kind = "custom" only: the prompt-token counter's sample name (e.g. `x_total`)."""
    generation_metric: str | None = None
    """kind = "custom" only: the generated-token counter's sample name."""
    gpus: list[int | str] = Field(default_factory=list)
    label_matchers: dict[str, str] = Field(default_factory=dict)
    """Only series with these label values count; default: the sum over all series."""
    interval_seconds: float = Field(default=15.0, ge=1.0, le=3600.0)
    timeout_seconds: float = Field(default=2.0, gt=0.0, le=60.0)
    model: Text | None = Field(default=None, max_length=64)
    """The sizing catalog's name of the model served (wins over the server's
    ``model_name``), for the GPU's need measured from the KV cache (vllm, sglang)."""
    config_json: Text | None = Field(default=None, max_length=4096)
    """Instead of `model`: the served model's Hugging Face config.json."""
    precision: Precision | None = None
    """The served weights' storage or checkpoint layout; default: what the server's model
    name says (``-AWQ``, ``-FP8``, ...), else the checkpoint's own (bf16 for most)."""
    kv_cache_dtype: KvCacheDtype | None = None
    """The KV cache's storage when the server does not say (SGLang's --kv-cache-dtype);
    default auto: the model's 16-bit (or wider) compute precision."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        check_http_url(url)
        return url

    @field_validator("prompt_metric", "generation_metric")
    @classmethod
    def _metric_name(cls, name: str | None) -> str | None:
        if name is not None and not METRIC_NAME.match(name):
            raise ValueError(f"{name!r} is not a Prometheus metric name")
        return name

    @field_validator("gpus")
    @classmethod
    def _gpu_ids(cls, gpus: list[int | str]) -> list[int | str]:
        for gpu in gpus:
            if isinstance(gpu, int) and gpu < 0:
                raise ValueError("a GPU index must be >= 0")
            if isinstance(gpu, str) and not _GPU_UUID.match(gpu):
                raise ValueError(f"{gpu!r} is neither a GPU index nor a GPU-/MIG- UUID")
        if len(set(gpus)) != len(gpus):
            raise ValueError("gpus must not repeat a GPU")
        return gpus

    @field_validator("label_matchers")
    @classmethod
    def _label_names(cls, matchers: dict[str, str]) -> dict[str, str]:
        for label in matchers:
            if not LABEL_NAME.match(label) or label.startswith("__"):
                raise ValueError(f"{label!r} is not a label name")
        return matchers

    @model_validator(mode="after")
    def _metrics_for_kind(self) -> TokenSourceConfig:
        given = (self.prompt_metric, self.generation_metric)
        if self.kind == "custom":
            if None in given:
                raise ValueError('kind = "custom" needs prompt_metric and generation_metric')
            if self.prompt_metric == self.generation_metric:
                raise ValueError("prompt_metric and generation_metric must differ")
        elif given != (None, None):
            raise ValueError('prompt_metric and generation_metric are for kind = "custom" only')
        if self.timeout_seconds > self.interval_seconds:
            raise ValueError("timeout_seconds must not exceed interval_seconds")
        if self.model is not None and self.config_json is not None:
            raise ValueError("set at most one of model and config_json")
        measured = (self.model, self.config_json, self.precision, self.kv_cache_dtype)
        if self.kind not in KV_CACHE_NAMES and any(v is not None for v in measured):
            raise ValueError(
                "model, config_json, precision and kv_cache_dtype are for kind vllm or "
                "sglang (the others publish no KV cache use)"
            )
        return self

    def kv_cache_names(self) -> tuple[str, ...]:
        """Sample names read for the KV cache from this kind of server (none for most)."""
        return KV_CACHE_NAMES.get(self.kind, ())

    def counter_names(self) -> tuple[str, str]:
        """(prompt, generation) sample names read from this source."""
        if self.kind == "custom":
            assert self.prompt_metric is not None  # checked by _metrics_for_kind
            assert self.generation_metric is not None
            return self.prompt_metric, self.generation_metric
        return COUNTER_NAMES[self.kind]

    def prompt_by_origin(self) -> tuple[str, str] | None:
        """(sample name, origin label) of this kind's prompt-token breakdown, if it has one."""
        return PROMPT_BY_ORIGIN.get(self.kind)


def check_unique_names(sources: list[TokenSourceConfig]) -> list[TokenSourceConfig]:
    """The sources unchanged; raises ValueError when two share a name."""
    seen: set[str] = set()
    for source in sources:
        if source.name in seen:
            raise ValueError(f"token source name {source.name!r} is used twice")
        seen.add(source.name)
    return sources


TokenSources = Annotated[list[TokenSourceConfig], AfterValidator(check_unique_names)]
"""The `token_sources` list of the config: names must be unique."""
