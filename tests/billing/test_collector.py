"""The collector end to end: tier priority, fallbacks, spot, metrics, secrets, imports."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from gpuwatch.billing import PRIORITY, BillingCollector, BillingConfig
from gpuwatch.billing.aws_cost_explorer import aggregate_filter, time_period
from tests.billing.conftest import (
    FAKE_KEY_ID,
    FAKE_SECRET,
    FAKE_SESSION_TOKEN,
    INSTANCE_ID,
    START,
    FakeImds,
    Stubbed,
    StubSession,
    make_collector,
    pricing_params,
    pricing_response,
)

STATIC_P5 = {"instance_type": "p5.48xlarge", "usd_per_hour": 40.0}
STATIC_P5_SPOT = {"instance_type": "p5.48xlarge", "usd_per_hour": 22.0, "lifecycle": "spot"}


def ce_answer(cost: float, hours: float) -> dict[str, Any]:
    return {
        "ResultsByTime": [
            {
                "TimePeriod": {"Start": "2025-12-31", "End": "2026-01-01"},
                "Total": {
                    "AmortizedCost": {"Amount": str(cost), "Unit": "USD"},
                    "UsageQuantity": {"Amount": str(hours), "Unit": "N/A"},
                },
                "Estimated": False,
            }
        ]
    }


def ce_params(instance_type: str = "p5.48xlarge") -> dict[str, Any]:
    return {
        "TimePeriod": time_period(START, 7),
        "Granularity": "DAILY",
        "Metrics": ["AmortizedCost", "UsageQuantity"],
        "Filter": aggregate_filter(instance_type, {}),
    }


def config(**section: Any) -> BillingConfig:
    return BillingConfig.model_validate(
        {"instance_type": "p5.48xlarge", "region": "us-east-1", **section}
    )


def test_priority_cost_explorer_then_static_then_pricing_then_catalog(
    tmp_path: Path, pricing_stub: Stubbed, ce_stub: Stubbed
) -> None:
    assert PRIORITY == ("cost_explorer", "static", "pricing_api", "catalog")
    pricing_stub.stubber.add_response("get_products", pricing_response(), pricing_params())
    ce_stub.stubber.add_response("get_cost_and_usage", ce_answer(792.0, 24.0), ce_params())
    session = StubSession(pricing=pricing_stub.client, ce=ce_stub.client)
    every = config(cost_explorer=True, pricing_api=True, static=[STATIC_P5])
    snapshot = make_collector(every, tmp_path, session=session)[0].refresh()
    assert [q.source for q in snapshot.quotes] == list(PRIORITY)
    assert snapshot.effective is snapshot.quotes[0]
    assert snapshot.effective.instance_usd_per_hour == pytest.approx(33.0)
    assert snapshot.effective.gpu_usd_per_hour == pytest.approx(33.0 / 8)
    assert snapshot.up == {"cost_explorer": True, "pricing_api": True, "static": True}

    # explicit static beats the list price; the cached list price needs no call now
    no_ce = config(pricing_api=True, static=[STATIC_P5])
    snapshot = make_collector(no_ce, tmp_path, session=StubSession())[0].refresh()
    assert snapshot.effective is not None
    assert snapshot.effective.source == "static"
    assert snapshot.effective.gpu_usd_per_hour == pytest.approx(5.0)

    only_pricing = config(pricing_api=True)
    snapshot = make_collector(only_pricing, tmp_path, session=StubSession())[0].refresh()
    assert snapshot.effective is not None
    assert snapshot.effective.source == "pricing_api"

    snapshot = make_collector(config(), tmp_path)[0].refresh()
    assert snapshot.effective is not None
    assert snapshot.effective.source == "catalog"
    assert snapshot.effective.gpu_usd_per_hour == pytest.approx(6.88)
    assert snapshot.effective.instance_usd_per_hour == pytest.approx(55.04)
    assert snapshot.up == {}

    nothing = make_collector(config(), tmp_path, catalog_price=None)[0].refresh()
    assert nothing.effective is None
    assert nothing.quotes == ()


def test_latest_before_the_first_refresh_has_the_offline_tiers(tmp_path: Path) -> None:
    collector, _ = make_collector(
        config(pricing_api=True, static=[STATIC_P5]), tmp_path, session=StubSession()
    )
    first = collector.latest()
    assert [q.source for q in first.quotes] == ["static", "catalog"]
    assert first.up == {"pricing_api": False, "static": True}
    assert first.api_requests == {"pricing:GetProducts": 0}


def test_owned_hardware_static_per_gpu_and_gpus_per_instance(tmp_path: Path) -> None:
    section = BillingConfig.model_validate(
        {
            "gpus_per_instance": 4,
            "static": [{"gpu_model": "h100-sxm-80gb", "usd_per_hour": 1.25, "per_gpu": True}],
        }
    )
    snapshot = make_collector(section, tmp_path, hostname="rack3-node1")[0].refresh()
    assert snapshot.effective is not None
    assert snapshot.effective.source == "static"
    assert snapshot.effective.instance_usd_per_hour == pytest.approx(5.0)
    assert snapshot.effective.gpu_usd_per_hour == pytest.approx(1.25)
    assert snapshot.identity is None


def test_a_static_list_that_matches_nothing_is_down(tmp_path: Path) -> None:
    section = BillingConfig.model_validate({"static": [{"host": "other-*", "usd_per_hour": 9}]})
    snapshot = make_collector(section, tmp_path)[0].refresh()
    assert snapshot.up == {"static": False}
    assert snapshot.effective is not None
    assert snapshot.effective.source == "catalog"


def test_spot_uses_a_static_spot_price_else_flags_the_list_price(
    tmp_path: Path, imds: FakeImds, pricing_stub: Stubbed
) -> None:
    imds.metadata["meta-data/instance-life-cycle"] = "spot"
    pricing_stub.stubber.add_response("get_products", pricing_response(), pricing_params())
    section = {"imds": True, "imds_endpoint": imds.endpoint, "pricing_api": True}
    with_spot = BillingConfig.model_validate({**section, "static": [STATIC_P5, STATIC_P5_SPOT]})
    session = StubSession(pricing=pricing_stub.client)
    snapshot = make_collector(with_spot, tmp_path, session=session)[0].refresh()
    assert snapshot.identity is not None
    assert snapshot.identity.lifecycle == "spot"
    assert snapshot.effective is not None
    assert (snapshot.effective.source, snapshot.effective.lifecycle) == ("static", "spot")
    assert snapshot.effective.instance_usd_per_hour == pytest.approx(22.0)

    list_only = BillingConfig.model_validate(section)
    snapshot = make_collector(list_only, tmp_path, session=StubSession())[0].refresh()
    assert snapshot.effective is not None
    assert snapshot.effective.source == "pricing_api"
    assert snapshot.effective.lifecycle == "on-demand"
    assert "upper bound" in snapshot.effective.detail


def test_missing_credentials_fall_back_with_one_log_line_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    section = config(pricing_api=True, cost_explorer=True)
    collector, clock = make_collector(section, tmp_path)  # the real default boto3 session
    with caplog.at_level(logging.DEBUG, logger="gpuwatch"):
        for _ in range(5):
            snapshot = collector.refresh()
            clock.advance(3600)
    records = [r for r in caplog.records if r.name.startswith("gpuwatch")]
    assert len(records) == 2  # one per source, not one per attempt
    assert all(r.levelno == logging.WARNING for r in records)
    assert snapshot.up == {"cost_explorer": False, "pricing_api": False}
    assert snapshot.api_requests == {"ce:GetCostAndUsage": 0, "pricing:GetProducts": 0}
    assert snapshot.effective is not None
    assert snapshot.effective.source == "catalog"


def test_no_network_is_a_fallback(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The autouse loopback guard refuses the endpoint: what an offline host sees."""
    collector, _ = make_collector(config(pricing_api=True), tmp_path, http_timeout=0.2)
    with caplog.at_level(logging.WARNING, logger="gpuwatch.billing"):
        snapshot = collector.refresh()
    assert snapshot.up == {"pricing_api": False}
    assert snapshot.effective is not None
    assert snapshot.effective.source == "catalog"
    assert [r.levelno for r in caplog.records] == [logging.WARNING]  # one line


class _Wrap(Collector):
    def __init__(self, collector: BillingCollector) -> None:
        self.collector = collector

    def collect(self) -> Iterator[Metric]:
        return self.collector.families()


def _exposition(collector: BillingCollector) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Wrap(collector))
    return generate_latest(registry).decode()


def test_metric_families(
    tmp_path: Path, imds: FakeImds, pricing_stub: Stubbed, ce_stub: Stubbed
) -> None:
    pricing_stub.stubber.add_response("get_products", pricing_response(), pricing_params())
    ce_stub.stubber.add_client_error(
        "get_cost_and_usage", "AccessDeniedException", http_status_code=400
    )
    section = BillingConfig.model_validate(
        {"imds": True, "imds_endpoint": imds.endpoint, "pricing_api": True, "cost_explorer": True}
    )
    session = StubSession(pricing=pricing_stub.client, ce=ce_stub.client)
    collector, _ = make_collector(section, tmp_path, session=session)
    collector.refresh()
    text = _exposition(collector)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("gpuwatch_billing_up", (("source", "imds"),))] == 1
    assert samples[("gpuwatch_billing_up", (("source", "pricing_api"),))] == 1
    assert samples[("gpuwatch_billing_up", (("source", "cost_explorer"),))] == 0
    assert samples[("gpuwatch_billing_api_requests_total", (("api", "pricing:GetProducts"),))] == 1
    assert samples[("gpuwatch_billing_api_requests_total", (("api", "ce:GetCostAndUsage"),))] == 1
    info = (
        ("instance_id", INSTANCE_ID),
        ("instance_type", "p5.48xlarge"),
        ("lifecycle", "on-demand"),
        ("region", "us-east-1"),
    )
    assert samples[("gpuwatch_instance_info", info)] == 1
    price = "gpuwatch_instance_price_usd_per_hour"
    assert samples[(price, (("source", "pricing_api"),))] == pytest.approx(55.04)
    assert samples[(price, (("source", "catalog"),))] == pytest.approx(55.04)
    assert (price, (("source", "cost_explorer"),)) not in samples
    assert "# TYPE gpuwatch_billing_api_requests_total counter" in text


def test_no_secret_in_logs_metrics_or_snapshot(
    tmp_path: Path,
    imds: FakeImds,
    pricing_stub: Stubbed,
    ce_stub: Stubbed,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pricing_stub.stubber.add_client_error(
        "get_products", "UnrecognizedClientException", f"bad token {FAKE_SESSION_TOKEN}", 400
    )
    ce_stub.stubber.add_client_error(
        "get_cost_and_usage", "InvalidSignatureException", f"key {FAKE_KEY_ID}", 403
    )
    imds.put_status = 200
    section = BillingConfig.model_validate(
        {"imds": True, "imds_endpoint": imds.endpoint, "pricing_api": True, "cost_explorer": True}
    )
    session = StubSession(pricing=pricing_stub.client, ce=ce_stub.client)
    collector, _ = make_collector(section, tmp_path, session=session)
    with caplog.at_level(logging.DEBUG, logger="gpuwatch"):
        snapshot = collector.refresh()
    everything = caplog.text + _exposition(collector) + repr(snapshot)
    assert imds.tokens
    for secret in (FAKE_SECRET, FAKE_KEY_ID, FAKE_SESSION_TOKEN, *imds.tokens):
        assert secret not in everything


def test_importing_billing_does_not_import_boto3(tmp_path: Path) -> None:
    code = f"""
import sys
from pathlib import Path
from gpuwatch.billing import BillingCollector, BillingConfig
from gpuwatch.core.clock import ManualClock
config = BillingConfig.model_validate({{"static": [{{"host": "*", "usd_per_hour": 8}}]}})
collector = BillingCollector(config, state_dir=Path({str(tmp_path)!r}), clock=ManualClock(),
    hostname="h", gpu_count=1, gpu_name="NVIDIA L4", catalog_price_usd_per_gpu_hour=0.8)
collector.refresh()
list(collector.families())
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("boto3", "botocore"))
assert not loaded, loaded
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
