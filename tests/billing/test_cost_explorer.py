"""The Cost Explorer tier: moto's result queue (pagination, counting, interval), Stubber
for the errors and for get_cost_and_usage_with_resources (moto lacks it)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from moto import mock_aws

from gpuwatch.billing import BillingConfig
from gpuwatch.billing.aws_cost_explorer import (
    EC2_COMPUTE,
    aggregate_filter,
    sum_results,
    time_period,
    usd_per_hour,
)
from gpuwatch.billing.health import SourceError
from tests.billing.conftest import (
    INSTANCE_ID,
    START,
    FakeImds,
    Stubbed,
    StubSession,
    make_collector,
)

MOTO_CE_RESULTS = "http://motoapi.amazonaws.com/moto-api/static/ce/cost-and-usage-results"
CE_SECTION: dict[str, Any] = {
    "cost_explorer": True,
    "instance_type": "p5.48xlarge",
    "region": "us-east-1",
}
CE = BillingConfig.model_validate(CE_SECTION)


def day(start: str, end: str, cost: float, hours: float, *, estimated: bool = False) -> Any:
    """One DAILY ResultsByTime entry with the cost metric and UsageQuantity."""
    return {
        "TimePeriod": {"Start": start, "End": end},
        "Total": {
            "AmortizedCost": {"Amount": f"{cost:.10f}", "Unit": "USD"},
            "UsageQuantity": {"Amount": f"{hours:.10f}", "Unit": "N/A"},
        },
        "Groups": [],
        "Estimated": estimated,
    }


def test_time_period_is_the_complete_utc_days_before_now() -> None:
    assert time_period(START, 7) == {"Start": "2025-12-25", "End": "2026-01-01"}
    assert time_period(START, 1) == {"Start": "2025-12-31", "End": "2026-01-01"}


def test_filters() -> None:
    by_type = aggregate_filter("p5.48xlarge", {})
    assert by_type["And"][0]["Dimensions"] == {
        "Key": "SERVICE",
        "Values": [EC2_COMPUTE],
        "MatchOptions": ["EQUALS"],
    }
    assert by_type["And"][1]["Dimensions"]["Key"] == "INSTANCE_TYPE"
    by_tags = aggregate_filter("p5.48xlarge", {"team": "ml", "app": "llm"})
    assert [part.get("Tags", {}).get("Key") for part in by_tags["And"]] == [None, "app", "team"]
    with pytest.raises(SourceError, match="instance type"):
        aggregate_filter(None, {})


def test_hourly_price_is_cost_over_usage_hours() -> None:
    totals = sum_results(
        [{"ResultsByTime": [day("a", "b", 1320.96, 48.0), day("b", "c", 660.48, 24.0)]}],
        "AmortizedCost",
    )
    found = usd_per_hour(totals)
    assert found is not None
    assert found[0] == pytest.approx(27.52)
    no_hours = usd_per_hour(
        sum_results([{"ResultsByTime": [day("a", "b", 48.0, 0)]}], "AmortizedCost")
    )
    assert no_hours is not None
    assert no_hours[0] == pytest.approx(2.0)
    assert "assumes one instance" in no_hours[1]
    assert usd_per_hour(sum_results([{"ResultsByTime": []}], "AmortizedCost")) is None


@pytest.fixture
def moto_ce() -> Iterator[None]:
    with mock_aws():
        yield


def queue(*results: dict[str, Any]) -> None:
    """Queue CE results in moto: each distinct request body takes the next one."""
    response = requests.post(MOTO_CE_RESULTS, json={"results": list(results)}, timeout=5)
    assert response.status_code == 201


def test_pagination_counting_and_interval(moto_ce: None, tmp_path: Path) -> None:
    queue(
        {
            "ResultsByTime": [day("2025-12-25", "2025-12-26", 1320.96, 24.0)],
            "NextPageToken": "page-2",
        },
        {"ResultsByTime": [day("2025-12-26", "2025-12-27", 2641.92, 48.0, estimated=True)]},
    )
    session = boto3.session.Session()
    collector, clock = make_collector(CE, tmp_path, session=session)

    snapshot = collector.refresh()

    assert snapshot.api_requests == {"ce:GetCostAndUsage": 2}  # two pages, two requests
    assert snapshot.up == {"cost_explorer": True}
    quote = snapshot.effective
    assert quote is not None
    assert quote.source == "cost_explorer"
    assert quote.instance_usd_per_hour == pytest.approx(3962.88 / 72)
    assert quote.gpu_usd_per_hour == pytest.approx(3962.88 / 72 / 8)
    assert "estimated" in quote.detail

    for _ in range(10):  # the agent refreshes every minute: CE is not asked again
        clock.advance(60)
        assert collector.refresh().api_requests == {"ce:GetCostAndUsage": 2}
    clock.advance(CE.cost_explorer_interval_seconds)
    assert collector.refresh().api_requests == {"ce:GetCostAndUsage": 4}


def test_no_cost_data_is_up_without_a_quote(moto_ce: None, tmp_path: Path) -> None:
    collector, _ = make_collector(CE, tmp_path, session=boto3.session.Session())
    snapshot = collector.refresh()
    assert snapshot.up == {"cost_explorer": True}
    assert snapshot.effective is not None
    assert snapshot.effective.source == "catalog"
    assert snapshot.api_requests == {"ce:GetCostAndUsage": 1}


def ce_params(query_filter: dict[str, Any], days: int = 7) -> dict[str, Any]:
    return {
        "TimePeriod": time_period(START, days),
        "Granularity": "DAILY",
        "Metrics": ["AmortizedCost", "UsageQuantity"],
        "Filter": query_filter,
    }


@pytest.mark.parametrize(
    "code", ["LimitExceededException", "DataUnavailableException", "BillExpirationException"]
)
def test_errors_fall_back_and_log_once(
    code: str, tmp_path: Path, ce_stub: Stubbed, caplog: pytest.LogCaptureFixture
) -> None:
    config = BillingConfig.model_validate(
        {**CE_SECTION, "static": [{"instance_type": "p5.48xlarge", "usd_per_hour": 40}]}
    )
    stubber = ce_stub.stubber
    params = ce_params(aggregate_filter("p5.48xlarge", {}))
    stubber.add_client_error(
        "get_cost_and_usage", code, http_status_code=400, expected_params=params
    )
    collector, clock = make_collector(config, tmp_path, session=StubSession(ce=ce_stub.client))
    with caplog.at_level(logging.INFO, logger="gpuwatch.billing"):
        snapshot = collector.refresh()
        assert snapshot.up == {"cost_explorer": False, "static": True}
        assert snapshot.effective is not None
        assert snapshot.effective.source == "static"
        clock.advance(60)
        collector.refresh()  # within the backoff: no request (the Stubber would complain)
        clock.advance(900)
        stubber.add_client_error("get_cost_and_usage", code, http_status_code=400)
        collector.refresh()  # asked again, still failing: no second log line
        assert len(caplog.records) == 1
        assert caplog.records[0].levelno == logging.WARNING
        clock.advance(1800)
        stubber.add_response(
            "get_cost_and_usage",
            {"ResultsByTime": [day("2026-01-01", "2026-01-02", 240.0, 10.0)]},
        )
        recovered = collector.refresh()
    stubber.assert_no_pending_responses()
    assert recovered.up == {"cost_explorer": True, "static": True}
    assert recovered.effective is not None
    assert recovered.effective.source == "cost_explorer"
    assert recovered.effective.instance_usd_per_hour == pytest.approx(24.0)
    assert recovered.api_requests == {"ce:GetCostAndUsage": 3}
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.INFO]


def test_a_failure_keeps_the_last_figure_marked_stale_for_a_day(
    tmp_path: Path, ce_stub: Stubbed
) -> None:
    stubber = ce_stub.stubber
    stubber.add_response(
        "get_cost_and_usage", {"ResultsByTime": [day("2025-12-31", "2026-01-01", 240.0, 10.0)]}
    )
    collector, clock = make_collector(CE, tmp_path, session=StubSession(ce=ce_stub.client))
    collector.refresh()
    clock.advance(CE.cost_explorer_interval_seconds)
    stubber.add_client_error("get_cost_and_usage", "ThrottlingException", http_status_code=400)
    stale = collector.refresh()
    assert stale.up == {"cost_explorer": False}
    assert stale.effective is not None
    assert stale.effective.source == "cost_explorer"
    assert "stale" in stale.effective.detail
    clock.advance(86400)
    stubber.add_client_error("get_cost_and_usage", "ThrottlingException", http_status_code=400)
    gone = collector.refresh()
    assert gone.effective is not None
    assert gone.effective.source == "catalog"


def test_cost_allocation_tags_replace_the_instance_type(tmp_path: Path, ce_stub: Stubbed) -> None:
    config = BillingConfig.model_validate(
        {**CE_SECTION, "cost_allocation_tags": {"team": "ml-infra"}}
    )
    tag_filter = {
        "And": [
            {"Dimensions": {"Key": "SERVICE", "Values": [EC2_COMPUTE], "MatchOptions": ["EQUALS"]}},
            {"Tags": {"Key": "team", "Values": ["ml-infra"], "MatchOptions": ["EQUALS"]}},
        ]
    }
    ce_stub.stubber.add_response(
        "get_cost_and_usage",
        {"ResultsByTime": [day("2025-12-31", "2026-01-01", 100.0, 20.0)]},
        ce_params(tag_filter),
    )
    collector, _ = make_collector(config, tmp_path, session=StubSession(ce=ce_stub.client))
    quote = collector.refresh().effective
    ce_stub.stubber.assert_no_pending_responses()
    assert quote is not None
    assert quote.instance_usd_per_hour == pytest.approx(5.0)
    assert "team=ml-infra" in quote.detail


def test_with_resources_prices_this_instance(
    tmp_path: Path, ce_stub: Stubbed, imds: FakeImds
) -> None:
    config = BillingConfig(
        imds=True,
        imds_endpoint=imds.endpoint,
        cost_explorer=True,
        cost_explorer_with_resources=True,
        cost_explorer_lookback_days=30,
    )
    resource_filter = {
        "And": [
            {"Dimensions": {"Key": "SERVICE", "Values": [EC2_COMPUTE], "MatchOptions": ["EQUALS"]}},
            {
                "Dimensions": {
                    "Key": "RESOURCE_ID",
                    "Values": [INSTANCE_ID],
                    "MatchOptions": ["EQUALS"],
                }
            },
        ]
    }
    ce_stub.stubber.add_response(
        "get_cost_and_usage_with_resources",
        {"ResultsByTime": [day("2025-12-30", "2025-12-31", 1320.96, 24.0)], "NextPageToken": "p2"},
        ce_params(resource_filter, days=14),  # capped at the 14 days CE keeps
    )
    ce_stub.stubber.add_response(
        "get_cost_and_usage_with_resources",
        {"ResultsByTime": [day("2025-12-31", "2026-01-01", 660.48, 12.0)]},
        {**ce_params(resource_filter, days=14), "NextPageToken": "p2"},
    )
    collector, _ = make_collector(config, tmp_path, session=StubSession(ce=ce_stub.client))
    snapshot = collector.refresh()
    ce_stub.stubber.assert_no_pending_responses()
    assert snapshot.api_requests == {
        "ce:GetCostAndUsage": 0,
        "ce:GetCostAndUsageWithResources": 2,
    }
    quote = snapshot.effective
    assert quote is not None
    assert quote.source == "cost_explorer"
    assert quote.instance_usd_per_hour == pytest.approx(55.04)
    assert quote.lifecycle == "on-demand"
    assert INSTANCE_ID in quote.detail


@pytest.mark.parametrize("with_resources", ["not opted in", "no data yet"])
def test_with_resources_falls_back_to_the_instance_type(
    with_resources: str, tmp_path: Path, ce_stub: Stubbed, imds: FakeImds
) -> None:
    config = BillingConfig(
        imds=True,
        imds_endpoint=imds.endpoint,
        cost_explorer=True,
        cost_explorer_with_resources=True,
    )
    if with_resources == "not opted in":
        ce_stub.stubber.add_client_error(
            "get_cost_and_usage_with_resources", "DataUnavailableException", http_status_code=400
        )
    else:
        ce_stub.stubber.add_response("get_cost_and_usage_with_resources", {"ResultsByTime": []})
    ce_stub.stubber.add_response(
        "get_cost_and_usage",
        {"ResultsByTime": [day("2025-12-31", "2026-01-01", 1000.0, 20.0)]},
        ce_params(aggregate_filter("p5.48xlarge", {})),
    )
    collector, _ = make_collector(config, tmp_path, session=StubSession(ce=ce_stub.client))
    snapshot = collector.refresh()
    ce_stub.stubber.assert_no_pending_responses()
    assert snapshot.up == {"imds": True, "cost_explorer": True}
    assert snapshot.effective is not None
    assert snapshot.effective.instance_usd_per_hour == pytest.approx(50.0)
    assert "all p5.48xlarge instances" in snapshot.effective.detail
