"""The Pricing API tier through botocore's Stubber on a real `pricing` client."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from gpuwatch.billing import BillingConfig
from gpuwatch.billing.aws_pricing import CACHE_FILE, parse_on_demand_usd_per_hour
from gpuwatch.billing.health import SourceError
from tests.billing.conftest import (
    FakeImds,
    Stubbed,
    StubSession,
    make_collector,
    price_list_entry,
    pricing_params,
    pricing_response,
)

P5 = BillingConfig(pricing_api=True, instance_type="p5.48xlarge", region="us-east-1")


def test_parse_takes_the_on_demand_hourly_price_only() -> None:
    assert parse_on_demand_usd_per_hour([price_list_entry()]) == [55.04]
    assert parse_on_demand_usd_per_hour([price_list_entry(usd="0.0000000000")]) == []
    assert parse_on_demand_usd_per_hour([]) == []


@pytest.mark.parametrize("entry", ["not json", json.dumps({"terms": []}), json.dumps([1])])
def test_parse_refuses_other_shapes(entry: str) -> None:
    with pytest.raises(SourceError, match="unexpected price document"):
        parse_on_demand_usd_per_hour([entry])


def test_list_price_of_p5(tmp_path: Path, pricing_stub: Stubbed) -> None:
    pricing_stub.stubber.add_response("get_products", pricing_response(), pricing_params())
    session = StubSession(pricing=pricing_stub.client)
    collector, _ = make_collector(P5, tmp_path, session=session)

    snapshot = collector.refresh()

    pricing_stub.stubber.assert_no_pending_responses()
    assert session.calls == [("pricing", "us-east-1")]
    assert snapshot.up == {"pricing_api": True}
    assert snapshot.api_requests == {"pricing:GetProducts": 1}
    quote = snapshot.effective
    assert quote is not None
    assert quote.source == "pricing_api"
    assert quote.instance_usd_per_hour == pytest.approx(55.04)
    assert quote.gpu_usd_per_hour == pytest.approx(6.88)
    assert quote.lifecycle == "on-demand"
    assert [q.source for q in snapshot.quotes] == ["pricing_api", "catalog"]


def test_the_pricing_region_is_the_client_region(tmp_path: Path, pricing_stub: Stubbed) -> None:
    pricing_stub.stubber.add_response("get_products", pricing_response(), pricing_params())
    session = StubSession(pricing=pricing_stub.client)
    config = BillingConfig.model_validate({**P5.model_dump(), "pricing_region": "ap-south-1"})
    make_collector(config, tmp_path, session=session)[0].refresh()
    assert session.calls == [("pricing", "ap-south-1")]


def test_next_token_pages_are_followed(tmp_path: Path, pricing_stub: Stubbed) -> None:
    stubber = pricing_stub.stubber
    stubber.add_response("get_products", {"PriceList": [], "NextToken": "page-2"}, pricing_params())
    stubber.add_response(
        "get_products", pricing_response(), {**pricing_params(), "NextToken": "page-2"}
    )
    collector, _ = make_collector(P5, tmp_path, session=StubSession(pricing=pricing_stub.client))
    snapshot = collector.refresh()
    stubber.assert_no_pending_responses()
    assert snapshot.api_requests == {"pricing:GetProducts": 2}
    assert snapshot.effective is not None
    assert snapshot.effective.instance_usd_per_hour == pytest.approx(55.04)


def test_cache_ttl_and_restart(tmp_path: Path, pricing_stub: Stubbed) -> None:
    pricing_stub.stubber.add_response("get_products", pricing_response(), pricing_params())
    session = StubSession(pricing=pricing_stub.client)
    collector, clock = make_collector(P5, tmp_path, session=session)
    collector.refresh()
    clock.advance(3600)
    again = collector.refresh()  # within the TTL: the Stubber has no answer left to give
    assert again.api_requests == {"pricing:GetProducts": 1}
    assert again.up == {"pricing_api": True}
    cache = json.loads((tmp_path / "state" / CACHE_FILE).read_text())
    assert cache["prices"]["us-east-1/p5.48xlarge"]["usd_per_hour"] == pytest.approx(55.04)

    restarted, _ = make_collector(P5, tmp_path, clock=clock, session=StubSession())
    after_restart = restarted.refresh()  # StubSession() has no client: any call would fail
    assert after_restart.api_requests == {"pricing:GetProducts": 0}
    assert after_restart.up == {"pricing_api": True}
    assert after_restart.effective is not None
    assert after_restart.effective.source == "pricing_api"
    assert after_restart.effective.instance_usd_per_hour == pytest.approx(55.04)


def test_a_stale_cache_is_used_and_marked_when_the_api_fails(
    tmp_path: Path, pricing_stub: Stubbed, caplog: pytest.LogCaptureFixture
) -> None:
    stubber = pricing_stub.stubber
    stubber.add_response("get_products", pricing_response(), pricing_params())
    collector, clock = make_collector(
        P5, tmp_path, session=StubSession(pricing=pricing_stub.client)
    )
    collector.refresh()
    clock.advance(P5.pricing_cache_ttl_seconds + 1)
    stubber.add_client_error("get_products", "ServiceUnavailableException", http_status_code=503)
    with caplog.at_level(logging.WARNING, logger="gpuwatch.billing"):
        snapshot = collector.refresh()
        clock.advance(60)
        collector.refresh()  # within the backoff: not asked again, no second log line
    stubber.assert_no_pending_responses()
    assert snapshot.up == {"pricing_api": False}
    assert snapshot.effective is not None
    assert snapshot.effective.source == "pricing_api"
    assert "stale" in snapshot.effective.detail
    assert snapshot.api_requests == {"pricing:GetProducts": 2}
    assert len(caplog.records) == 1


def test_an_error_without_cache_falls_back_to_the_catalog(
    tmp_path: Path, pricing_stub: Stubbed, caplog: pytest.LogCaptureFixture
) -> None:
    pricing_stub.stubber.add_client_error(
        "get_products",
        "AccessDeniedException",
        "User: arn:aws:iam::123456789012:user/alice is not authorized to perform: "
        "pricing:GetProducts",
        http_status_code=400,
    )
    collector, _ = make_collector(P5, tmp_path, session=StubSession(pricing=pricing_stub.client))
    with caplog.at_level(logging.WARNING, logger="gpuwatch.billing"):
        snapshot = collector.refresh()
    assert snapshot.up == {"pricing_api": False}
    assert snapshot.effective is not None
    assert snapshot.effective.source == "catalog"
    assert snapshot.effective.gpu_usd_per_hour == pytest.approx(6.88)
    assert len(caplog.records) == 1
    assert "123456789012" not in caplog.text  # the error code only, not AWS's message


def test_unknown_instance_type_is_down_without_a_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    collector, _ = make_collector(BillingConfig(pricing_api=True), tmp_path, session=StubSession())
    with caplog.at_level(logging.WARNING, logger="gpuwatch.billing"):
        collector.refresh()
        snapshot = collector.refresh()
    assert snapshot.up == {"pricing_api": False}
    assert snapshot.api_requests == {"pricing:GetProducts": 0}
    assert len(caplog.records) == 1


def test_an_unwritable_state_dir_keeps_the_price_in_memory(
    tmp_path: Path, pricing_stub: Stubbed
) -> None:
    (tmp_path / "state").write_text("a file where the directory should be")
    pricing_stub.stubber.add_response("get_products", pricing_response(), pricing_params())
    collector, clock = make_collector(
        P5, tmp_path, session=StubSession(pricing=pricing_stub.client)
    )
    assert collector.refresh().up == {"pricing_api": True}
    clock.advance(60)
    snapshot = collector.refresh()
    assert snapshot.api_requests == {"pricing:GetProducts": 1}
    assert snapshot.effective is not None
    assert snapshot.effective.source == "pricing_api"


def test_pricing_asks_as_soon_as_imds_answers(
    tmp_path: Path, imds: FakeImds, pricing_stub: Stubbed
) -> None:
    """A missing identity is no failed call: no backoff once IMDS comes back."""
    imds.put_status = 500
    section = BillingConfig(imds=True, imds_endpoint=imds.endpoint, pricing_api=True)
    pricing_stub.stubber.add_response("get_products", pricing_response(), pricing_params())
    collector, clock = make_collector(
        section, tmp_path, session=StubSession(pricing=pricing_stub.client)
    )
    first = collector.refresh()
    assert first.up == {"imds": False, "pricing_api": False}
    assert first.api_requests == {"pricing:GetProducts": 0}
    imds.put_status = 200
    clock.advance(31)  # past the IMDS backoff, far within the Pricing backoff
    second = collector.refresh()
    assert second.up == {"imds": True, "pricing_api": True}
    assert second.api_requests == {"pricing:GetProducts": 1}
