"""The Cost Explorer tier: what the account actually paid for this kind of instance.

Each request and each page costs $0.01, so the tier asks at most once per
`cost_explorer_interval_seconds` (default 8 h; CE data refreshes up to 3 times a day),
backs off after failures, and counts every answered request. Two queries:

* with resources (opt-in, last 14 days): SERVICE = EC2 Compute and RESOURCE_ID = this
  instance's id -> this instance's own cost per running hour (the best figure); when it
  fails or has no data yet (a new instance), the aggregate query answers instead;
* aggregate: SERVICE = EC2 Compute and INSTANCE_TYPE = this type, or the configured
  cost-allocation tags -> cost per instance-hour over all matching instances.

Both ask DAILY amounts of the cost metric and of UsageQuantity over the complete days
(UTC) of the lookback; the hourly price is total cost / total usage hours (for EC2
Compute, usage is instance running hours), which needs no guess of how many instances
ran. Without usage hours it assumes one instance running 24 h a day (flagged).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuwatch.billing.aws_session import SessionFactory, call_aws, client_config, make_client
from gpuwatch.billing.config import MAX_WITH_RESOURCES_DAYS, BillingConfig
from gpuwatch.billing.health import SourceError, SourceHealth
from gpuwatch.billing.quotes import (
    API_COST_AND_USAGE,
    API_COST_AND_USAGE_WITH_RESOURCES,
    InstanceIdentity,
    PriceQuote,
    make_quote,
    normalize_lifecycle,
)
from gpuwatch.core.text import counted
from gpuwatch.core.units import HOUR_SECONDS

EC2_COMPUTE = "Amazon Elastic Compute Cloud - Compute"
USAGE_METRIC = "UsageQuantity"
CE_REGION = "us-east-1"
"""Cost Explorer's endpoint lives in us-east-1 for every account."""

MAX_ATTEMPTS = 3
"""botocore attempts per request (adaptive retry mode)."""

MAX_PAGES = 20
"""At most this many pages ($0.01 each) per query; DAILY without GroupBy needs one."""

CE_INITIAL_BACKOFF_SECONDS = 900.0
STALE_MAX_SECONDS = 86400.0
"""A Cost Explorer figure is still used (marked stale) this long after it was fetched."""


def time_period(now_seconds: float, days: int) -> dict[str, str]:
    """The last `days` complete UTC days before `now_seconds`: Start, End (exclusive)."""
    today = dt.datetime.fromtimestamp(now_seconds, tz=dt.UTC).date()
    start = today - dt.timedelta(days=days)
    return {"Start": start.isoformat(), "End": today.isoformat()}


def _dimension(key: str, value: str) -> dict[str, Any]:
    return {"Dimensions": {"Key": key, "Values": [value], "MatchOptions": ["EQUALS"]}}


def aggregate_filter(instance_type: str | None, tags: Mapping[str, str]) -> dict[str, Any]:
    """SERVICE = EC2 Compute AND (the tags when given, else INSTANCE_TYPE)."""
    parts = [_dimension("SERVICE", EC2_COMPUTE)]
    if tags:
        parts.extend(
            {"Tags": {"Key": key, "Values": [value], "MatchOptions": ["EQUALS"]}}
            for key, value in sorted(tags.items())
        )
    elif instance_type is not None:
        parts.append(_dimension("INSTANCE_TYPE", instance_type))
    else:
        raise SourceError(
            "cost explorer needs the instance type (set it or enable imds) or cost_allocation_tags"
        )
    return {"And": parts}


def resource_filter(instance_id: str) -> dict[str, Any]:
    """SERVICE = EC2 Compute AND RESOURCE_ID = `instance_id` (what with-resources requires)."""
    return {"And": [_dimension("SERVICE", EC2_COMPUTE), _dimension("RESOURCE_ID", instance_id)]}


@dataclass(frozen=True, slots=True)
class CostTotals:
    """Sums over the daily results: cost (USD), usage (instance-hours), days with cost."""

    cost_usd: float
    usage_hours: float
    days_with_cost: int
    estimated: bool


def sum_results(pages: Iterable[Mapping[str, Any]], metric: str) -> CostTotals:
    """Add up `ResultsByTime[].Total` of every page; raises SourceError on another shape."""
    cost = usage = 0.0
    days = 0
    estimated = False
    try:
        for page in pages:
            for period in page.get("ResultsByTime", []):
                total = period.get("Total", {})
                amount = float(total.get(metric, {}).get("Amount", 0.0))
                unit = total.get(metric, {}).get("Unit", "USD")
                if amount and unit != "USD":
                    raise SourceError(f"cost explorer answered in {unit!r}, not USD")
                cost += amount
                usage += float(total.get(USAGE_METRIC, {}).get("Amount", 0.0))
                days += 1 if amount > 0 else 0
                estimated = estimated or bool(period.get("Estimated", False))
    except (AttributeError, TypeError, ValueError):
        raise SourceError("cost explorer returned an unexpected result") from None
    return CostTotals(cost, usage, days, estimated)


def usd_per_hour(totals: CostTotals) -> tuple[float, str] | None:
    """Instance $/hour from the totals and how it was derived; None when there is no cost."""
    if totals.cost_usd <= 0:
        return None
    if totals.usage_hours > 0:
        return (
            totals.cost_usd / totals.usage_hours,
            f"${totals.cost_usd:.2f} over {totals.usage_hours:.1f} instance-hours",
        )
    hours = 24.0 * max(totals.days_with_cost, 1)
    return (
        totals.cost_usd / hours,
        f"${totals.cost_usd:.2f} over {counted(totals.days_with_cost, 'day')}, usage hours "
        "unknown: assumes one instance running all day",
    )


class CostExplorerSource:
    """Quotes the actual cost per instance-hour; asks AWS once per interval at most."""

    def __init__(
        self,
        config: BillingConfig,
        *,
        session_factory: SessionFactory,
        timeout_seconds: float,
        count: Callable[[str], None],
    ) -> None:
        self._config = config
        self._session_factory = session_factory
        self._timeout = timeout_seconds
        self._count = count
        self._client: Any = None
        self._next_due = 0.0
        self._last: tuple[PriceQuote, float] | None = None
        self.health = SourceHealth(
            "cost_explorer",
            initial_backoff_seconds=CE_INITIAL_BACKOFF_SECONDS,
            max_backoff_seconds=config.cost_explorer_interval_seconds,
        )
        self.resources_health = SourceHealth(
            "cost_explorer (with resources)",
            initial_backoff_seconds=config.cost_explorer_interval_seconds,
            max_backoff_seconds=config.cost_explorer_interval_seconds,
        )

    def quote(self, now: float, identity: InstanceIdentity | None, gpus: int) -> PriceQuote | None:
        """The actual-spend quote at `now` (epoch seconds); asks AWS only when due."""
        if now >= self._next_due and self.health.may_try(now):
            try:
                quote = self._query(now, identity, gpus)
            except SourceError as exc:
                self.health.failed(now, str(exc))
                self._next_due = self.health.retry_at
            else:
                self.health.succeeded()
                self._next_due = now + self._config.cost_explorer_interval_seconds
                self._last = None if quote is None else (quote, now)
        if self._last is None:
            return None
        quote, fetched = self._last
        if self.health.up:
            return quote
        age = now - fetched
        if age > STALE_MAX_SECONDS:
            return None
        return make_quote(
            "cost_explorer",
            quote.instance_usd_per_hour,
            gpus,
            instance_type=quote.instance_type,
            lifecycle=quote.lifecycle,
            detail=f"{quote.detail} (stale: fetched {age / HOUR_SECONDS:.1f} h ago, CE fails now)",
        )

    def _query(self, now: float, identity: InstanceIdentity | None, gpus: int) -> PriceQuote | None:
        instance_id = identity.instance_id if identity else None
        instance_type = identity.instance_type if identity else None
        if (
            self._config.cost_explorer_with_resources
            and instance_id is not None
            and self.resources_health.may_try(now)
        ):
            try:
                own = self._with_resources(now, identity, instance_id, gpus)
            except SourceError as exc:
                self.resources_health.failed(now, str(exc))
            else:
                if own is not None:
                    return own
        # no resource-level figure (not asked, failed, or no data yet for this instance)
        return self._aggregate(now, instance_type, gpus)

    def _with_resources(
        self, now: float, identity: InstanceIdentity | None, instance_id: str, gpus: int
    ) -> PriceQuote | None:
        days = min(self._config.cost_explorer_lookback_days, MAX_WITH_RESOURCES_DAYS)
        totals = self._pages(
            API_COST_AND_USAGE_WITH_RESOURCES,
            "get_cost_and_usage_with_resources",
            {
                "TimePeriod": time_period(now, days),
                "Granularity": "DAILY",
                "Metrics": [self._config.cost_explorer_metric, USAGE_METRIC],
                "Filter": resource_filter(instance_id),
            },
        )
        self.resources_health.succeeded()
        found = usd_per_hour(totals)
        if found is None:
            return None
        usd, how = found
        return make_quote(
            "cost_explorer",
            usd,
            gpus,
            instance_type=identity.instance_type if identity else None,
            lifecycle=normalize_lifecycle(identity.lifecycle if identity else None),
            detail=f"{self._config.cost_explorer_metric} of this instance ({instance_id}), "
            f"last {counted(days, 'day')}: {how}{_estimated(totals)}",
        )

    def _aggregate(self, now: float, instance_type: str | None, gpus: int) -> PriceQuote | None:
        tags = self._config.cost_allocation_tags
        query_filter = aggregate_filter(instance_type, tags)
        days = self._config.cost_explorer_lookback_days
        totals = self._pages(
            API_COST_AND_USAGE,
            "get_cost_and_usage",
            {
                "TimePeriod": time_period(now, days),
                "Granularity": "DAILY",
                "Metrics": [self._config.cost_explorer_metric, USAGE_METRIC],
                "Filter": query_filter,
            },
        )
        found = usd_per_hour(totals)
        if found is None:
            return None
        usd, how = found
        what = (
            "instances tagged " + ", ".join(f"{k}={v}" for k, v in sorted(tags.items()))
            if tags
            else f"all {instance_type} instances"
        )
        return make_quote(
            "cost_explorer",
            usd,
            gpus,
            instance_type=instance_type,
            lifecycle=None,
            detail=f"{self._config.cost_explorer_metric} of {what}, last {counted(days, 'day')}: "
            f"{how}{_estimated(totals)}",
        )

    def _pages(self, api: str, method: str, params: dict[str, Any]) -> CostTotals:
        """Call `method` and follow NextPageToken with otherwise identical parameters."""
        if self._client is None:
            self._client = make_client(
                self._session_factory,
                "ce",
                CE_REGION,
                client_config(
                    timeout_seconds=self._timeout, retry_mode="adaptive", max_attempts=MAX_ATTEMPTS
                ),
            )
        call = getattr(self._client, method)
        pages: list[Mapping[str, Any]] = []
        token: str | None = None
        for _ in range(MAX_PAGES):
            request = dict(params) if token is None else {**params, "NextPageToken": token}
            page = call_aws(
                api, functools.partial(call, **request), answered=lambda: self._count(api)
            )
            pages.append(page)
            token = page.get("NextPageToken")
            if not token:
                break
        return sum_results(pages, self._config.cost_explorer_metric)


def _estimated(totals: CostTotals) -> str:
    return " (includes estimated days)" if totals.estimated else ""
