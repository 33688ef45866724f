"""The `[plan]` config section: policy a team states for `gpuwatch plan`.

Namespaces whose units are never time-sliced (latency services), quotas on the GPUs or
MIG profiles a namespace's units may request (as a Kubernetes ResourceQuota names
them), and the smallest saving a move must bring. docs/plan.md says how the plan
applies each one.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A Kubernetes namespace name (an RFC 1123 label, at most 63 characters)."""

GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PATTERN = r"^nvidia\.com/mig-(\d+)g\.(\d+)gb(\+me)?$"
"""The device plugin's resource of one MIG profile (mixed strategy), e.g.
``nvidia.com/mig-1g.10gb``."""


class PlanQuota(BaseModel):
    """One `[[plan.quotas]]`: at most `limit` of `resource` requested in `namespace`."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    namespace: str = Field(pattern=NAMESPACE_PATTERN, max_length=63)
    resource: str = Field(max_length=64)
    limit: int = Field(ge=0, le=1_000_000)

    @field_validator("resource")
    @classmethod
    def _device_plugin_resource(cls, value: str) -> str:
        if value != GPU_RESOURCE and not re.fullmatch(MIG_RESOURCE_PATTERN, value):
            raise ValueError(
                f"{value!r} is not nvidia.com/gpu nor a MIG profile's resource "
                "(nvidia.com/mig-<N>g.<M>gb)"
            )
        return value


class PlanConfig(BaseModel):
    """[plan]: what the plan may not do, whatever it would save."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    no_time_slicing_namespaces: list[str] = Field(default_factory=list, max_length=1000)
    min_saving_usd_per_month: float = Field(default=0.0, ge=0.0, le=1e9)
    # the share of a time-sliced GPU each unit on it adds for context switches (0-1; no
    # published figure: a conservative default, docs/plan.md)
    context_switch_ratio: float = Field(default=0.05, ge=0.0, lt=1.0)
    quotas: list[PlanQuota] = Field(default_factory=list, max_length=10_000)

    @field_validator("no_time_slicing_namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        for name in value:
            if len(name) > 63 or not re.fullmatch(NAMESPACE_PATTERN, name):
                raise ValueError(f"{name[:70]!r} is not a Kubernetes namespace name")
        return value

    @field_validator("quotas")
    @classmethod
    def _one_per_resource(cls, value: list[PlanQuota]) -> list[PlanQuota]:
        seen: set[tuple[str, str]] = set()
        for quota in value:
            key = (quota.namespace, quota.resource)
            if key in seen:
                raise ValueError(f"two quotas of {quota.resource} for namespace {quota.namespace}")
            seen.add(key)
        return value
