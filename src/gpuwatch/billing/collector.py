"""`BillingCollector`: the price of this host's GPU-hour from every configured tier.

`refresh()` runs on a slow schedule (about once a minute); each tier decides whether
it is due (IMDS until it answers, the Pricing cache TTL, the Cost Explorer interval),
so most refreshes touch no network. A tier that fails is skipped with
`gpuwatch_billing_up{source} 0` and one log line per failure episode; `refresh()`
never raises for a source failure. boto3 is imported only when an AWS tier first asks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric

from gpuwatch.billing.aws_session import SessionFactory, default_session
from gpuwatch.billing.config import BillingConfig
from gpuwatch.billing.families import billing_families
from gpuwatch.billing.identity import IdentityResolver
from gpuwatch.billing.quotes import (
    API_COST_AND_USAGE,
    API_COST_AND_USAGE_WITH_RESOURCES,
    API_GET_PRODUCTS,
    BillingSnapshot,
    InstanceIdentity,
    PriceQuote,
    choose_effective,
    in_priority_order,
    make_quote,
)
from gpuwatch.billing.static import static_quote

if TYPE_CHECKING:  # the AWS tiers' modules load only when configured (below)
    from gpuwatch.billing.aws_cost_explorer import CostExplorerSource
    from gpuwatch.billing.aws_pricing import PricingSource
from gpuwatch.core.clock import Clock
from gpuwatch.sizing import build_gpu_catalog
from gpuwatch.sizing.candidates import RentedGpus


class BillingCollector:
    """Prices a GPU-hour on this host; thread-safe (`refresh` serialised, reads lock-free).

    `gpu_count` and `gpu_name` are what NVML sees (`gpus_per_instance` overrides the
    count); `catalog_price_usd_per_gpu_hour` is the sizing catalog's reference price,
    the last resort. `session_factory` returns a boto3 session (tests pass one whose
    clients are stubbed); `http_timeout` is the connect timeout of every call in seconds.
    `list_rented_gpus`: with the Pricing API on, also list the GPUs AWS rents in the
    region (`BillingSnapshot.rented_gpus`, the candidates of recommendations).
    """

    def __init__(
        self,
        config: BillingConfig,
        *,
        state_dir: Path,
        clock: Clock,
        hostname: str,
        gpu_count: int,
        gpu_name: str,
        catalog_price_usd_per_gpu_hour: float | None,
        session_factory: SessionFactory | None = None,
        http_timeout: float = 2.0,
        list_rented_gpus: bool = False,
    ) -> None:
        self.config = config
        self._list_rented_gpus = list_rented_gpus
        self._rented: RentedGpus | None = None
        self._clock = clock
        self._hostname = hostname
        self._gpu_name = gpu_name
        self._gpus = config.gpus_per_instance or max(gpu_count, 1)
        self._catalog_price = catalog_price_usd_per_gpu_hour
        self._catalog_id = _catalog_id(gpu_name) if config.static else None
        session_factory = session_factory or default_session
        self._requests: dict[str, int] = {}
        self._identity = IdentityResolver(config, timeout_seconds=http_timeout)
        self._pricing: PricingSource | None = None
        self._cost_explorer: CostExplorerSource | None = None
        if config.pricing_api:
            # lazy: the AWS Pricing tier's code loads only when configured (agent memory)
            from gpuwatch.billing.aws_pricing import PricingSource  # noqa: PLC0415

            self._requests[API_GET_PRODUCTS] = 0
            self._pricing = PricingSource(
                config,
                state_dir=state_dir,
                session_factory=session_factory,
                timeout_seconds=http_timeout,
                count=self._count,
            )
        if config.cost_explorer:
            # lazy: the Cost Explorer tier's code loads only when configured (agent memory)
            from gpuwatch.billing.aws_cost_explorer import CostExplorerSource  # noqa: PLC0415

            self._requests[API_COST_AND_USAGE] = 0
            if config.cost_explorer_with_resources:
                self._requests[API_COST_AND_USAGE_WITH_RESOURCES] = 0
            self._cost_explorer = CostExplorerSource(
                config,
                session_factory=session_factory,
                timeout_seconds=http_timeout,
                count=self._count,
            )
        self._lock = threading.Lock()
        self._snapshot = self._assemble(self._config_identity(), [], {})

    def refresh(self) -> BillingSnapshot:
        """Ask every tier that is due, publish and return the new snapshot."""
        with self._lock:
            now = self._clock.time()
            identity = self._identity.resolve(now)
            up: dict[str, bool] = {}
            if self._identity.enabled:
                up["imds"] = self._identity.health.up
            quotes: list[PriceQuote] = []
            if self._cost_explorer is not None:
                quote = self._cost_explorer.quote(now, identity, self._gpus)
                up["cost_explorer"] = self._cost_explorer.health.up
                if quote is not None:
                    quotes.append(quote)
            if self._pricing is not None:
                quote = self._pricing.quote(now, identity, self._gpus)
                up["pricing_api"] = self._pricing.health.up
                if quote is not None:
                    quotes.append(quote)
                if self._list_rented_gpus:
                    region = identity.region if identity else None
                    self._rented = self._pricing.rented_gpus(now, region)
            self._snapshot = self._assemble(identity, quotes, up)
            return self._snapshot

    def latest(self) -> BillingSnapshot:
        """The snapshot of the last refresh (before any: static and catalog quotes only)."""
        return self._snapshot

    def families(self) -> Iterator[Metric]:
        """Metric families of the latest snapshot (see `billing_families`)."""
        return billing_families(self._snapshot)

    def _count(self, api: str) -> None:
        self._requests[api] = self._requests.get(api, 0) + 1

    def _config_identity(self) -> InstanceIdentity | None:
        if self.config.instance_type is None and self.config.region is None:
            return None
        return InstanceIdentity(None, self.config.instance_type, self.config.region, None)

    def _assemble(
        self, identity: InstanceIdentity | None, aws_quotes: list[PriceQuote], up: dict[str, bool]
    ) -> BillingSnapshot:
        """Add the offline tiers (static, catalog) and pick the effective quote."""
        quotes = list(aws_quotes)
        up = {name: up.get(name, False) for name in self._configured_sources()}
        instance_type = identity.instance_type if identity else None
        lifecycle = identity.lifecycle if identity else None
        if self.config.static:
            quote = static_quote(
                self.config.static,
                hostname=self._hostname,
                gpu_name=self._gpu_name,
                catalog_id=self._catalog_id,
                instance_type=instance_type,
                lifecycle=lifecycle,
                gpus=self._gpus,
            )
            up["static"] = quote is not None
            if quote is not None:
                quotes.append(quote)
        if self._catalog_price is not None:
            quotes.append(
                make_quote(
                    "catalog",
                    self._catalog_price * self._gpus,
                    self._gpus,
                    instance_type=instance_type,
                    lifecycle=None,
                    detail=f"sizing-catalog reference rent ${self._catalog_price:g} per GPU-hour"
                    f" for {self._gpu_name or 'this GPU'}: a list figure, not this host's bill",
                )
            )
        ordered = in_priority_order(quotes)
        return BillingSnapshot(
            quotes=ordered,
            effective=choose_effective(ordered),
            up=up,
            api_requests=dict(self._requests),
            identity=identity,
            rented_gpus=self._rented,
        )

    def _configured_sources(self) -> list[str]:
        names = []
        if self._identity.enabled:
            names.append("imds")
        if self._cost_explorer is not None:
            names.append("cost_explorer")
        if self._pricing is not None:
            names.append("pricing_api")
        if self.config.static:
            names.append("static")
        return names


def _catalog_id(gpu_name: str) -> str | None:
    """The built-in sizing-catalog id of an NVML name (for `gpu_model` static entries)."""
    if not gpu_name:
        return None
    spec = build_gpu_catalog().match_nvml_name(gpu_name)
    return None if spec is None else spec.id
