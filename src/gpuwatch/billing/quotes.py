"""Value types of the billing collector and the rule that picks the effective price.

Pure data and one pure function (`choose_effective`); no I/O, no boto3.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpuwatch.sizing.candidates import RentedGpus

Source = Literal["cost_explorer", "static", "pricing_api", "catalog"]

PRIORITY: tuple[Source, ...] = ("cost_explorer", "static", "pricing_api", "catalog")
"""Which answering tier sets the cost, best first (see docs/billing.md for why).

Cost Explorer is what the account actually paid; a static price is a figure the
operator wrote down for this host on purpose (owned hardware, a negotiated or spot
price) and so beats the public on-demand list price of the Pricing API; the sizing
catalog's reference price is the last resort.
"""

API_GET_PRODUCTS = "pricing:GetProducts"
API_COST_AND_USAGE = "ce:GetCostAndUsage"
API_COST_AND_USAGE_WITH_RESOURCES = "ce:GetCostAndUsageWithResources"


@dataclass(frozen=True, slots=True)
class InstanceIdentity:
    """What this host is: from IMDSv2, overridden by the config's instance_type/region.

    `lifecycle` is IMDS's `instance-life-cycle` (``on-demand``, ``spot``, ...) or None.
    """

    instance_id: str | None
    instance_type: str | None
    region: str | None
    lifecycle: str | None


@dataclass(frozen=True, slots=True)
class PriceQuote:
    """One tier's price for this host, in USD per hour.

    `gpu_usd_per_hour` is the instance price divided by its GPUs (the whole instance is
    charged to its GPUs). `lifecycle` is the purchase option the price is for:
    "on-demand", "spot" or None (unknown, owned hardware, a mix of instances).
    `detail` says where the figure comes from and its caveats (stale, upper bound).
    """

    source: Source
    instance_usd_per_hour: float
    gpu_usd_per_hour: float
    instance_type: str | None
    lifecycle: str | None
    detail: str


@dataclass(frozen=True, slots=True)
class BillingSnapshot:
    """Everything the billing collector knows after one refresh.

    `quotes` holds every tier that answered, in priority order; `effective` is the one
    used for cost (None when no tier answered). `up` is per configured source ("imds",
    "static", "pricing_api", "cost_explorer"): whether its last attempt succeeded.
    `api_requests` counts AWS API requests made since start, by API name.
    """

    quotes: tuple[PriceQuote, ...] = ()
    effective: PriceQuote | None = None
    up: dict[str, bool] = field(default_factory=dict)
    api_requests: dict[str, int] = field(default_factory=dict)
    identity: InstanceIdentity | None = None
    rented_gpus: RentedGpus | None = None  # what AWS rents in the region, when listed


def make_quote(
    source: Source,
    instance_usd_per_hour: float,
    gpus: int,
    *,
    instance_type: str | None,
    lifecycle: str | None,
    detail: str,
) -> PriceQuote:
    """A quote for an instance price spread over `gpus` GPUs (at least 1)."""
    return PriceQuote(
        source=source,
        instance_usd_per_hour=instance_usd_per_hour,
        gpu_usd_per_hour=instance_usd_per_hour / max(gpus, 1),
        instance_type=instance_type,
        lifecycle=lifecycle,
        detail=detail,
    )


def normalize_lifecycle(value: str | None) -> str | None:
    """IMDS's lifecycle reduced to "on-demand", "spot" or None (other purchase options)."""
    return value if value in ("on-demand", "spot") else None


def choose_effective(quotes: tuple[PriceQuote, ...]) -> PriceQuote | None:
    """The quote of the best tier by `PRIORITY`; the first one of that tier."""
    for source in PRIORITY:
        for quote in quotes:
            if quote.source == source:
                return quote
    return None


def in_priority_order(quotes: list[PriceQuote]) -> tuple[PriceQuote, ...]:
    """`quotes` sorted by `PRIORITY` (stable within a tier)."""
    return tuple(sorted(quotes, key=lambda quote: PRIORITY.index(quote.source)))
