"""The Pricing API tier: the on-demand Linux list price of this instance type.

`pricing:GetProducts` (free of charge, served only from us-east-1, eu-central-1 and
ap-south-1) with TERM_MATCH filters that leave the one shared-tenancy, no-license,
no-preinstalled-software on-demand product. Prices are cached in a JSON file in the
state directory for `pricing_cache_ttl_seconds`, so restarts do not ask again; when
the API fails a stale cached price is still used, marked stale. The Pricing API has no
spot prices: for a spot instance the on-demand price is flagged as an upper bound.

When asked (`PricingSource.rented_gpus`, the agent does unless `[analysis]
candidate_gpus` is set), the same API also lists the region's GPU instance types
(`instanceFamily` "GPU instance") that have an on-demand Linux price; `AWS_GPU_FAMILIES`
maps them to catalog GPUs, the candidates of right-sizing recommendations. The listing
is kept in memory for `pricing_cache_ttl_seconds` (asked again after a restart).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwatch.billing.aws_session import SessionFactory, call_aws, client_config, make_client
from gpuwatch.billing.config import BillingConfig
from gpuwatch.billing.health import SourceError, SourceHealth
from gpuwatch.billing.quotes import API_GET_PRODUCTS, InstanceIdentity, PriceQuote, make_quote
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.sizing.candidates import RentedGpus

log = logging.getLogger("gpuwatch.billing")

CACHE_FILE = "billing-pricing-cache.json"
CACHE_VERSION = 1
MAX_PAGES = 5
"""The filters match one product; more pages than this mean the filters are wrong."""

LISTING_MAX_PAGES = 20
"""A region has well under 2,000 GPU instance types; more pages mean the filters are wrong."""

AWS_GPU_FAMILIES: Mapping[str, str] = {
    "p3": "V100-SXM2-16GB",
    "p3dn": "V100-SXM2-32GB",
    "p4d": "A100-SXM-40GB",
    "p4de": "A100-SXM-80GB",
    "p5": "H100-SXM-80GB",
    "p5e": "H200-141GB",
    "p5en": "H200-141GB",
    "p6-b200": "B200-180GB",
    "g4dn": "T4-16GB",
    "g5": "A10G-24GB",
    "g6": "L4-24GB",
    "gr6": "L4-24GB",
    "g6e": "L40S-48GB",
}
"""EC2 instance family (the type before the dot) -> the built-in catalog GPU it carries,
whole GPUs only (AWS, "Amazon EC2 instance types: accelerated computing"). Not mapped:
g6f (fractions of an L4), g5g (T4G), g4ad (AMD), p6e-gb200 (GB200), inf/trn (not GPUs)."""

PRICING_INITIAL_BACKOFF_SECONDS = 300.0
PRICING_MAX_BACKOFF_SECONDS = 6 * 3600.0


def product_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """`get_products` filters for the on-demand Linux price of `instance_type` in `region`."""
    fields = {
        "instanceType": instance_type,
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "licenseModel": "No License required",
        "marketoption": "OnDemand",
    }
    return [{"Type": "TERM_MATCH", "Field": key, "Value": value} for key, value in fields.items()]


def parse_on_demand_usd_per_hour(price_list: Iterable[str | dict[str, Any]]) -> list[float]:
    """Hourly USD prices at `terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD`.

    `price_list` entries are JSON strings as boto3 returns them (dicts accepted too).
    Zero prices and non-hourly dimensions are left out. Raises SourceError on a
    document of another shape.
    """
    prices: list[float] = []
    try:
        for entry in price_list:
            document = json.loads(entry) if isinstance(entry, str) else entry
            for offer in document["terms"].get("OnDemand", {}).values():
                for dimension in offer["priceDimensions"].values():
                    if dimension.get("unit", "Hrs") not in ("Hrs", "Hours"):
                        continue
                    usd = float(dimension["pricePerUnit"]["USD"])
                    if usd > 0:
                        prices.append(usd)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise SourceError("pricing:GetProducts returned an unexpected price document") from None
    return prices


def gpu_listing_filters(region: str) -> list[dict[str, str]]:
    """`get_products` filters for every on-demand Linux GPU instance type in `region`."""
    filters = product_filters("", region)
    filters[0] = {"Type": "TERM_MATCH", "Field": "instanceFamily", "Value": "GPU instance"}
    return filters


def rented_gpu_ids(price_list: Iterable[str | dict[str, Any]]) -> frozenset[str]:
    """The catalog GPUs (`AWS_GPU_FAMILIES`, casefolded ids) of the instance types in a
    `get_products` page that have an hourly on-demand price. Raises SourceError on a
    document of another shape."""
    found: set[str] = set()
    for entry in price_list:
        try:
            document = json.loads(entry) if isinstance(entry, str) else entry
            instance_type = str(document["product"]["attributes"]["instanceType"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise SourceError("pricing:GetProducts returned an unexpected product") from None
        gpu = AWS_GPU_FAMILIES.get(instance_type.partition(".")[0])
        if gpu is not None and parse_on_demand_usd_per_hour([document]):
            found.add(gpu.casefold())
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class CachedPrice:
    """A list price and when it was fetched (epoch seconds)."""

    usd_per_hour: float
    fetched_at_seconds: float


class PriceCache:
    """On-disk cache of list prices by ``region/instance_type`` (a small JSON file).

    A missing or unreadable file is an empty cache; a failed write is logged once and
    the cache lives on in memory.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._prices: dict[str, CachedPrice] = self._load()
        self._write_failed = False

    def _load(self) -> dict[str, CachedPrice]:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring the price cache %s: %s", self.path, type(exc).__name__)
            return {}
        prices: dict[str, CachedPrice] = {}
        if not isinstance(document, dict) or document.get("version") != CACHE_VERSION:
            return prices
        for key, item in dict(document.get("prices", {})).items():
            try:
                prices[str(key)] = CachedPrice(
                    float(item["usd_per_hour"]), float(item["fetched_at_seconds"])
                )
            except (KeyError, TypeError, ValueError):
                continue
        return prices

    def get(self, key: str) -> CachedPrice | None:
        """The cached price for `key`, fresh or not."""
        return self._prices.get(key)

    def put(self, key: str, price: CachedPrice) -> None:
        """Remember `price` and rewrite the file atomically."""
        self._prices[key] = price
        document = {
            "version": CACHE_VERSION,
            "prices": {
                name: {"usd_per_hour": p.usd_per_hour, "fetched_at_seconds": p.fetched_at_seconds}
                for name, p in sorted(self._prices.items())
            },
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
            tmp.replace(self.path)
        except OSError as exc:
            if not self._write_failed:
                log.warning("cannot write the price cache %s: %s", self.path, exc.strerror)
                self._write_failed = True
        else:
            self._write_failed = False


class PricingSource:
    """Quotes the on-demand list price of this instance type, cached with a TTL."""

    def __init__(
        self,
        config: BillingConfig,
        *,
        state_dir: Path,
        session_factory: SessionFactory,
        timeout_seconds: float,
        count: Callable[[str], None],
    ) -> None:
        self._config = config
        self._session_factory = session_factory
        self._timeout = timeout_seconds
        self._count = count
        self._client: Any = None
        self.cache = PriceCache(state_dir / CACHE_FILE)
        self.health = SourceHealth(
            "pricing_api",
            initial_backoff_seconds=PRICING_INITIAL_BACKOFF_SECONDS,
            max_backoff_seconds=PRICING_MAX_BACKOFF_SECONDS,
        )
        self.listing_health = SourceHealth(
            "pricing_api (GPU instance listing)",
            initial_backoff_seconds=PRICING_INITIAL_BACKOFF_SECONDS,
            max_backoff_seconds=PRICING_MAX_BACKOFF_SECONDS,
        )
        self._rented: tuple[RentedGpus, float] | None = None  # and when it was fetched

    def quote(self, now: float, identity: InstanceIdentity | None, gpus: int) -> PriceQuote | None:
        """The list-price quote at `now` (epoch seconds); asks AWS only when the cache is due."""
        instance_type = identity.instance_type if identity else None
        region = identity.region if identity else None
        if instance_type is None or region is None:
            reason = "instance type and region unknown: set them or enable imds"
            self.health.failed(now, reason, backoff=False)
            return None
        key = f"{region}/{instance_type}"
        cached = self.cache.get(key)
        fresh = cached is not None and 0 <= now - cached.fetched_at_seconds < self.ttl
        if fresh:
            if not self.health.up:  # a fresh cached price is a working source
                self.health.succeeded()
        elif self.health.may_try(now):
            try:
                usd = self._fetch(instance_type, region)
            except SourceError as exc:
                self.health.failed(now, str(exc))
            else:
                cached = CachedPrice(usd, now)
                self.cache.put(key, cached)
                self.health.succeeded()
        if cached is None:
            return None
        age_hours = max(now - cached.fetched_at_seconds, 0.0) / HOUR_SECONDS
        detail = f"AWS on-demand Linux list price of {instance_type} in {region}"
        if self.health.up:
            detail += f" (fetched {age_hours:.1f} h ago)"
        else:
            detail += f" (stale: the Pricing API fails; cached {age_hours:.1f} h ago)"
        if identity is not None and identity.lifecycle == "spot":
            detail += "; the instance is spot: an upper bound of what it costs"
        return make_quote(
            "pricing_api",
            cached.usd_per_hour,
            gpus,
            instance_type=instance_type,
            lifecycle="on-demand",
            detail=detail,
        )

    def rented_gpus(self, now: float, region: str | None) -> RentedGpus | None:
        """The catalog GPUs AWS rents on demand in `region`, asked once per TTL; the last
        listing while the API fails; None before one arrived or without a region."""
        if region is None:
            return None
        rented = self._rented
        fresh = (
            rented is not None and rented[0].region == region and 0 <= now - rented[1] < self.ttl
        )
        if not fresh and self.listing_health.may_try(now):
            try:
                gpu_ids = self._list_gpus(region)
            except SourceError as exc:
                self.listing_health.failed(now, str(exc))
            else:
                self._rented = rented = (RentedGpus(region, gpu_ids), now)
                self.listing_health.succeeded()
        if rented is None or rented[0].region != region:
            return None
        return rented[0]

    def _list_gpus(self, region: str) -> frozenset[str]:
        client = self._pricing_client()
        params: dict[str, Any] = {
            "ServiceCode": "AmazonEC2",
            "Filters": gpu_listing_filters(region),
            "FormatVersion": "aws_v1",
            "MaxResults": 100,
        }
        found: set[str] = set()
        for _ in range(LISTING_MAX_PAGES):
            page = call_aws(
                API_GET_PRODUCTS,
                functools.partial(client.get_products, **params),
                answered=lambda: self._count(API_GET_PRODUCTS),
            )
            found |= rented_gpu_ids(page.get("PriceList", []))
            token = page.get("NextToken")
            if not token:
                break
            params["NextToken"] = token
        if not found:
            raise SourceError(f"no GPU instance type of the catalog has a price in {region}")
        return frozenset(found)

    def _pricing_client(self) -> Any:
        if self._client is None:
            self._client = make_client(
                self._session_factory,
                "pricing",
                self._config.pricing_region,
                client_config(timeout_seconds=self._timeout, retry_mode="standard", max_attempts=3),
            )
        return self._client

    @property
    def ttl(self) -> float:
        """Seconds a fetched price is fresh."""
        return self._config.pricing_cache_ttl_seconds

    def _fetch(self, instance_type: str, region: str) -> float:
        client = self._pricing_client()
        params: dict[str, Any] = {
            "ServiceCode": "AmazonEC2",
            "Filters": product_filters(instance_type, region),
            "FormatVersion": "aws_v1",
            "MaxResults": 100,
        }
        prices: list[float] = []
        for _ in range(MAX_PAGES):
            page = call_aws(
                API_GET_PRODUCTS,
                functools.partial(client.get_products, **params),
                answered=lambda: self._count(API_GET_PRODUCTS),
            )
            prices.extend(parse_on_demand_usd_per_hour(page.get("PriceList", [])))
            token = page.get("NextToken")
            if not token:
                break
            params["NextToken"] = token
        if not prices:
            raise SourceError(f"no on-demand Linux price for {instance_type} in {region}")
        return min(prices)
