"""The GPUs AWS rents in a region, from the Pricing API (botocore Stubber on a real
`pricing` client), and what they do to right-sizing recommendations."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest

from gpuwatch.billing import BillingCollector, BillingConfig
from gpuwatch.billing.aws_pricing import AWS_GPU_FAMILIES, rented_gpu_ids
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.sizing import build_gpu_catalog
from gpuwatch.sizing.candidates import RentedGpus
from tests.analysis.test_scenarios import run_until, verdict
from tests.billing.conftest import (
    H100_NVML,
    HOSTNAME,
    START,
    Stubbed,
    StubSession,
    price_list_entry,
    pricing_params,
    pricing_response,
)
from tests.conftest import scenario_agent, simulated

P5 = BillingConfig(pricing_api=True, instance_type="p5.48xlarge", region="us-east-1")

US_EAST_1 = (  # a few of the region's GPU instance types, one per family and then some
    "p3.2xlarge",
    "p3.16xlarge",
    "g4dn.xlarge",
    "g5.xlarge",
    "g6.xlarge",
    "g6e.xlarge",
    "p5.48xlarge",
    "g6f.large",  # a fraction of an L4: not a whole GPU
    "g5g.xlarge",  # T4G: not in the catalog
    "g4ad.xlarge",  # AMD
)


def listing_params(region: str = "us-east-1", token: str | None = None) -> dict[str, Any]:
    """The get_products parameters of the GPU listing: the price filters, with the
    instance family in place of the instance type."""
    params = pricing_params(region=region)
    filters = list(params["Filters"])
    filters[0] = {"Type": "TERM_MATCH", "Field": "instanceFamily", "Value": "GPU instance"}
    params["Filters"] = filters
    if token is not None:
        params["NextToken"] = token
    return params


def listing(*types: str, token: str | None = None) -> dict[str, Any]:
    page: dict[str, Any] = {
        "FormatVersion": "aws_v1",
        "PriceList": [price_list_entry(t, usd="1.0000000000") for t in types],
    }
    if token is not None:
        page["NextToken"] = token
    return page


def collector(
    tmp_path: Path, stub: Stubbed, config: BillingConfig = P5
) -> tuple[BillingCollector, ManualClock]:
    clock = ManualClock(START)
    return BillingCollector(
        config,
        state_dir=tmp_path / "state",
        clock=clock,
        hostname=HOSTNAME,
        gpu_count=8,
        gpu_name=H100_NVML,
        catalog_price_usd_per_gpu_hour=6.88,
        session_factory=lambda: StubSession(pricing=stub.client),
        http_timeout=0.5,
        list_rented_gpus=True,
    ), clock


def test_every_mapped_family_is_a_catalog_gpu() -> None:
    catalog = build_gpu_catalog()
    for family, gpu in AWS_GPU_FAMILIES.items():
        assert gpu in catalog, family
        assert catalog.get(gpu).tier == "datacenter", family


def test_instance_types_map_to_whole_catalog_gpus_with_a_price() -> None:
    entries = [price_list_entry(t, usd="1.0000000000") for t in US_EAST_1]
    entries.append(price_list_entry("p4d.24xlarge", usd="0.0000000000"))  # no price: not rented
    assert rented_gpu_ids(entries) == {
        "v100-sxm2-16gb",
        "t4-16gb",
        "a10g-24gb",
        "l4-24gb",
        "l40s-48gb",
        "h100-sxm-80gb",
    }


def test_the_listing_follows_pages_and_is_asked_once_per_ttl(
    tmp_path: Path, pricing_stub: Stubbed
) -> None:
    stubber = pricing_stub.stubber
    stubber.add_response("get_products", pricing_response(), pricing_params())
    stubber.add_response("get_products", listing(*US_EAST_1[:4], token="p2"), listing_params())
    stubber.add_response("get_products", listing(*US_EAST_1[4:]), listing_params(token="p2"))
    billing, clock = collector(tmp_path, pricing_stub)

    first = billing.refresh()
    clock.advance(3600)
    again = billing.refresh()  # within the TTL: the Stubber has no answer left

    stubber.assert_no_pending_responses()
    rented = {"v100-sxm2-16gb", "t4-16gb", "a10g-24gb", "l4-24gb", "l40s-48gb", "h100-sxm-80gb"}
    assert first.rented_gpus == RentedGpus("us-east-1", frozenset(rented))
    assert again.rented_gpus == first.rented_gpus
    assert again.api_requests == {"pricing:GetProducts": 3}
    assert first.effective is not None
    assert first.effective.source == "pricing_api"


def test_a_failed_listing_keeps_the_last_one_and_logs_once(
    tmp_path: Path, pricing_stub: Stubbed, caplog: pytest.LogCaptureFixture
) -> None:
    stubber = pricing_stub.stubber
    stubber.add_response("get_products", pricing_response(), pricing_params())
    stubber.add_client_error("get_products", "ThrottlingException", http_status_code=400)
    billing, clock = collector(tmp_path, pricing_stub)
    with caplog.at_level(logging.WARNING, logger="gpuwatch.billing"):
        assert billing.refresh().rented_gpus is None  # no listing yet: same-class rule
        clock.advance(60)
        assert billing.refresh().rented_gpus is None  # backing off: not asked again
    assert len(caplog.records) == 1
    assert "GPU instance listing" in caplog.text

    clock.advance(600)  # past the backoff
    stubber.add_response("get_products", listing("g6.xlarge"), listing_params())
    rented = billing.refresh().rented_gpus
    assert rented == RentedGpus("us-east-1", frozenset({"l4-24gb"}))

    clock.advance(P5.pricing_cache_ttl_seconds + 1)  # both due again; both fail
    stubber.add_client_error("get_products", "ServiceUnavailableException", http_status_code=503)
    stubber.add_client_error("get_products", "ServiceUnavailableException", http_status_code=503)
    snapshot = billing.refresh()
    stubber.assert_no_pending_responses()
    assert snapshot.rented_gpus == rented, "the last listing stands while the API fails"


def test_no_listing_without_a_region(tmp_path: Path, pricing_stub: Stubbed) -> None:
    billing, _ = collector(tmp_path, pricing_stub, BillingConfig(pricing_api=True))
    snapshot = billing.refresh()
    assert snapshot.rented_gpus is None
    assert snapshot.api_requests == {"pricing:GetProducts": 0}


def test_a_listing_of_no_catalog_gpu_is_no_listing(tmp_path: Path, pricing_stub: Stubbed) -> None:
    stubber = pricing_stub.stubber
    stubber.add_response("get_products", pricing_response(), pricing_params())
    stubber.add_response("get_products", listing("g4ad.xlarge", "g6f.large"), listing_params())
    billing, _ = collector(tmp_path, pricing_stub)
    assert billing.refresh().rented_gpus is None


def test_the_agent_recommends_what_aws_rents_in_the_region(
    tmp_path: Path, pricing_stub: Stubbed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The legacy fleet priced by the Pricing API in us-east-1: the V100 training job
    is told to move to an L40S (AWS rents no L40, the same-class choice), and says why."""
    stubber = pricing_stub.stubber
    stubber.add_response(
        "get_products", pricing_response(usd="3.0600000000"), pricing_params("p3.2xlarge")
    )
    stubber.add_response("get_products", listing(*US_EAST_1), listing_params())
    session = StubSession(pricing=pricing_stub.client)
    monkeypatch.setattr("gpuwatch.billing.collector.default_session", lambda: session)
    config = Config(
        agent=AgentConfig(hostname="test-host", state_dir=tmp_path),
        billing=BillingConfig(pricing_api=True, instance_type="p3.2xlarge", region="us-east-1"),
    )
    nv, clock = simulated("legacy")
    agent = scenario_agent(config, nv, clock)
    try:
        agent.refresh_billing()
        snapshot = run_until(agent, clock, 1900, step=2.0)
        text = generate_latest(agent.registry).decode("utf-8")
    finally:
        agent.stop()
    stubber.assert_no_pending_responses()
    training = verdict(snapshot, 0).recommendation
    assert training is not None
    assert (training.gpu_id, training.rule) == ("L40S-48GB", "aws:us-east-1")
    for gpu in (0, 1, 2, 3):
        rec = verdict(snapshot, gpu).recommendation
        assert rec is None or rec.gpu_id.casefold() in {
            AWS_GPU_FAMILIES[t.partition(".")[0]].casefold()
            for t in US_EAST_1
            if t.partition(".")[0] in AWS_GPU_FAMILIES
        }
    assert 'recommended="L40S-48GB",rule="aws:us-east-1"' in text
