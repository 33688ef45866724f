"""The `[billing]` config section: where the price of this host's GPUs comes from.

Options only, never credentials: AWS access goes through boto3's usual credential chain
(instance role, environment, shared files). This module must not import
`gpuwatch.config` (which embeds it) nor boto3.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuwatch.core.values import Text, check_http_url

INSTANCE_TYPE_PATTERN = r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$"
"""An EC2 instance type such as ``p5.48xlarge`` or ``g6e.xlarge``."""

REGION_PATTERN = r"^[a-z]{2}(-[a-z]+)+-\d+$"
"""An AWS region code such as ``us-east-1``."""

Lifecycle = Literal["on-demand", "spot"]
"""How an instance is bought, as IMDS names it (`instance-life-cycle`)."""

PricingRegion = Literal["us-east-1", "eu-central-1", "ap-south-1"]
"""The regions that serve the AWS Price List Query API."""

CostMetric = Literal[
    "AmortizedCost", "UnblendedCost", "NetAmortizedCost", "NetUnblendedCost", "BlendedCost"
]
"""Cost Explorer cost metrics; amortized ones spread RI and Savings Plan fees over usage."""

MAX_WITH_RESOURCES_DAYS = 14
"""Cost Explorer keeps resource-level data for the last 14 days only."""


class StaticPrice(BaseModel):
    """One `[[billing.static]]` price: owned hardware, negotiated or spot prices.

    Exactly one of `host` (hostname glob, case-insensitive), `gpu_model` (an NVML name,
    glob allowed, or a sizing-catalog id) and `instance_type` says which hosts it is
    for. `usd_per_hour` is for the whole instance, or for one GPU when `per_gpu` is
    true. With `lifecycle` set the entry applies only to instances bought that way
    (e.g. a spot price for spot instances).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    host: Text | None = Field(default=None, min_length=1, max_length=253)
    gpu_model: Text | None = Field(default=None, min_length=1, max_length=128)
    instance_type: str | None = Field(default=None, pattern=INSTANCE_TYPE_PATTERN, max_length=64)
    usd_per_hour: float = Field(gt=0.0, le=100_000.0)
    per_gpu: bool = False
    lifecycle: Lifecycle | None = None

    @model_validator(mode="after")
    def _exactly_one_match(self) -> StaticPrice:
        given = [name for name in ("host", "gpu_model", "instance_type") if getattr(self, name)]
        if len(given) != 1:
            raise ValueError(
                "set exactly one of host, gpu_model, instance_type"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self


class BillingConfig(BaseModel):
    """[billing]: the tiers that price a GPU-hour on this host.

    Tiers, best first: Cost Explorer (actual spend), static prices, the AWS Pricing API
    (on-demand list price), the sizing catalog's reference price. See docs/billing.md.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # instance identity
    imds: bool = False
    imds_endpoint: str = "http://169.254.169.254"
    instance_type: str | None = Field(default=None, pattern=INSTANCE_TYPE_PATTERN, max_length=64)
    region: str | None = Field(default=None, pattern=REGION_PATTERN, max_length=32)
    gpus_per_instance: int | None = Field(default=None, ge=1, le=256)
    # tier: static prices
    static: list[StaticPrice] = Field(default_factory=list, max_length=1000)
    # tier: AWS Pricing API
    pricing_api: bool = False
    pricing_region: PricingRegion = "us-east-1"
    pricing_cache_ttl_seconds: float = Field(default=86400.0, ge=60.0, le=30 * 86400.0)
    # tier: Cost Explorer
    cost_explorer: bool = False
    cost_explorer_metric: CostMetric = "AmortizedCost"
    cost_explorer_interval_seconds: float = Field(default=8 * 3600.0, ge=3600.0, le=7 * 86400.0)
    cost_explorer_lookback_days: int = Field(default=7, ge=1, le=90)
    cost_allocation_tags: dict[str, str] = Field(default_factory=dict, max_length=10)
    cost_explorer_with_resources: bool = False

    @field_validator("imds_endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        check_http_url(value, path_allowed=False)
        return value.rstrip("/")

    @field_validator("cost_allocation_tags")
    @classmethod
    def _tag_sizes(cls, value: dict[str, str]) -> dict[str, str]:
        for key, tag_value in value.items():
            if not 1 <= len(key) <= 128 or not re.fullmatch(r"[\w.:/=+@ -]+", key):
                raise ValueError(f"tag key {key!r} is not a valid cost allocation tag key")
            if len(tag_value) > 256:
                raise ValueError(f"the value of tag {key!r} is longer than 256 characters")
        return value

    @model_validator(mode="after")
    def _with_resources_needs(self) -> BillingConfig:
        if self.cost_explorer_with_resources and not (self.cost_explorer and self.imds):
            raise ValueError(
                "cost_explorer_with_resources needs cost_explorer = true and imds = true "
                "(the instance id comes from IMDS)"
            )
        return self
