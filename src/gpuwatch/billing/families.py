"""Metric families of the billing collector, rendered from a `BillingSnapshot`.

Pure: fresh families on every call. The per-GPU price series is the agent's (it joins
the effective quote with the GPUs); here are the sources, the requests and the
instance-level prices.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.billing.quotes import BillingSnapshot


def billing_families(snapshot: BillingSnapshot) -> Iterator[Metric]:
    """`gpuwatch_billing_up`, `..._api_requests_total`, `gpuwatch_instance_info`, prices."""
    up = GaugeMetricFamily(
        "gpuwatch_billing_up",
        "1 when the billing source's last attempt succeeded, 0 when it failed or has not "
        "answered (a static source is up when an entry matches this host).",
        labels=("source",),
    )
    for source, ok in sorted(snapshot.up.items()):
        up.add_metric([source], 1.0 if ok else 0.0)
    requests = CounterMetricFamily(
        "gpuwatch_billing_api_requests",
        "AWS API requests answered since the agent started (Cost Explorer bills $0.01 each "
        "request and page; the Pricing API is free).",
        labels=("api",),
    )
    for api, count in sorted(snapshot.api_requests.items()):
        requests.add_metric([api], float(count))
    info = InfoMetricFamily(
        "gpuwatch_instance",
        "Cloud instance identity (IMDSv2 and config); empty labels are unknown.",
        labels=("instance_id", "instance_type", "region", "lifecycle"),
    )
    ident = snapshot.identity
    if ident is not None:
        info.add_metric(
            [
                ident.instance_id or "",
                ident.instance_type or "",
                ident.region or "",
                ident.lifecycle or "",
            ],
            {},
        )
    price = GaugeMetricFamily(
        "gpuwatch_instance_price_usd_per_hour",
        "Price of the whole instance in USD per hour, per billing source that answered.",
        labels=("source",),
    )
    seen: set[str] = set()
    for quote in snapshot.quotes:
        if quote.source not in seen:
            seen.add(quote.source)
            price.add_metric([quote.source], quote.instance_usd_per_hour)
    for family in (up, requests, info, price):
        if family.samples:
            yield family
