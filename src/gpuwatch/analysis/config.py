"""The `[analysis]` config section: when a GPU counts as idle, held, underutilized or
overprovisioned, and which GPUs a recommendation may name.

It lives beside the engine that reads it; `gpuwatch.config` embeds it in `Config`.
This module must not import `gpuwatch.config` (the config sits above the analysis).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class AnalysisConfig(BaseModel):
    """[analysis]: when a GPU counts as idle, held, underutilized or overprovisioned."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    window_seconds: float = Field(default=1800.0, ge=60.0, le=7 * 86400.0)
    noise_floor_ratio: float = Field(default=0.01, ge=0.0, le=1.0)
    underutilized_below_ratio: float = Field(default=0.25, ge=0.0, le=1.0)
    underutilized_hysteresis_ratio: float = Field(default=0.05, ge=0.0, le=1.0)
    resolve_after_seconds: float = Field(default=60.0, ge=0.0, le=7 * 86400.0)
    power_veto_watts: float | None = Field(default=None, gt=0.0)
    lookback_seconds: float = Field(default=86400.0, ge=60.0, le=90 * 86400.0)
    headroom_ratio: float = Field(default=0.1, ge=0.0, le=2.0)
    evaluation_interval_seconds: float = Field(default=10.0, ge=1.0, le=3600.0)
    # the GPUs a recommendation may name (catalog ids); unset: the GPUs AWS rents in the
    # region when billing asks the Pricing API, else the current GPU's class
    candidate_gpus: list[str] | None = Field(default=None, min_length=1, max_length=256)

    @model_validator(mode="after")
    def _band_fits(self) -> AnalysisConfig:
        if self.underutilized_below_ratio + self.underutilized_hysteresis_ratio > 1.0:
            raise ValueError(
                "underutilized_below_ratio + underutilized_hysteresis_ratio must not exceed 1 "
                "(an underutilized GPU could never be busy again)"
            )
        return self
