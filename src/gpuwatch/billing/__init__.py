"""What a GPU-hour on this host costs, from real billing where it exists.

Tiers, best first: Cost Explorer (actual spend), static prices from the config, the AWS
Pricing API (on-demand list price), the sizing catalog's reference price. `config` is
the `[billing]` section, `identity` reads IMDSv2, `static` matches configured prices,
`aws_pricing` and `aws_cost_explorer` are the AWS tiers (the only modules, with
`aws_session`, that import boto3, lazily), `collector` puts them together. Importing
this package never imports boto3.

A source package: it may import `gpuwatch.core` (a failing tier raises
`core.failures.CollectorFailedError`) and the sizing catalog (`sizing.candidates` for a
region's GPUs), never the analysis, the collectors, the agent or `gpuwatch.config`
(which embeds `[billing]` from `billing.config`).

Layer: a source (beside nvml, kube, tokens), above core and sizing, below tco.
"""

from __future__ import annotations

from gpuwatch.billing.collector import BillingCollector
from gpuwatch.billing.config import BillingConfig, StaticPrice
from gpuwatch.billing.families import billing_families
from gpuwatch.billing.quotes import PRIORITY, BillingSnapshot, InstanceIdentity, PriceQuote

__all__ = [
    "PRIORITY",
    "BillingCollector",
    "BillingConfig",
    "BillingSnapshot",
    "InstanceIdentity",
    "PriceQuote",
    "StaticPrice",
    "billing_families",
]
