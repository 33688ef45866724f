"""The `[sizing]` config section: your own GPUs (negotiated prices, on-prem parts) and
models, laid over the built-in catalogs.

It lives beside the catalogs it extends; `gpuwatch.config` embeds it in `Config`.
This module must not import `gpuwatch.config` (the config sits above sizing).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator

from gpuwatch.sizing.gpus import GpuCatalogEntry
from gpuwatch.sizing.hf_config import catalog_entry_data
from gpuwatch.sizing.models import ModelCatalogEntry


class SizingConfig(BaseModel):
    """[sizing]: your own GPUs (negotiated prices, on-prem parts) and models."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gpus: list[GpuCatalogEntry] = []
    models: list[ModelCatalogEntry] = []

    @field_validator("models", mode="before")
    @classmethod
    def _expand_config_json(cls, value: object) -> object:
        """Entries giving ``config_json`` take their keys from that config.json."""
        if not isinstance(value, list):
            return value
        expanded = []
        for i, item in enumerate(value):
            try:
                expanded.append(catalog_entry_data(item))
            except ValueError as exc:
                raise ValueError(f"entry {i}: {exc}") from None
        return expanded
