"""The [billing] section's validation and the static tier's matching, on literals."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gpuwatch.billing import BillingConfig, StaticPrice
from gpuwatch.billing.static import best_static, static_quote
from tests.billing.conftest import H100_NVML, HOSTNAME


def _error_locations(exc: ValidationError) -> list[str]:
    return [".".join(str(part) for part in error["loc"]) for error in exc.errors()]


@pytest.mark.parametrize(
    ("raw", "location"),
    [
        ({"pricing_region": "us-west-2"}, "pricing_region"),
        ({"instance_type": "P5 48XL"}, "instance_type"),
        ({"region": "virginia"}, "region"),
        ({"cost_explorer_interval_seconds": 60}, "cost_explorer_interval_seconds"),
        ({"cost_explorer_metric": "Cost"}, "cost_explorer_metric"),
        ({"imds_endpoint": "file:///etc/passwd"}, "imds_endpoint"),
        ({"imds_endpoint": "http://169.254.169.254/latest"}, "imds_endpoint"),
        ({"cost_explorer_with_resources": True, "cost_explorer": True}, ""),
        ({"static": [{"usd_per_hour": 3.0}]}, "static.0"),
        ({"static": [{"host": "a*", "gpu_model": "L4", "usd_per_hour": 3.0}]}, "static.0"),
        ({"static": [{"host": "a*", "usd_per_hour": 0}]}, "static.0.usd_per_hour"),
        ({"static": [{"host": "a*", "usd_per_hour": 1, "lifecycle": "reserved"}]}, ""),
        ({"cost_allocation_tags": {"bad\nkey": "x"}}, "cost_allocation_tags"),
        ({"pricing_api": True, "typo": 1}, "typo"),
    ],
)
def test_invalid_configs_name_the_field(raw: dict[str, Any], location: str) -> None:
    with pytest.raises(ValidationError) as caught:
        BillingConfig.model_validate(raw)
    assert any(loc.startswith(location) for loc in _error_locations(caught.value))


def test_defaults_ask_no_aws_and_are_frozen() -> None:
    config = BillingConfig()
    assert not config.imds
    assert not config.pricing_api
    assert not config.cost_explorer
    assert config.cost_explorer_interval_seconds == 8 * 3600
    assert config.imds_endpoint == "http://169.254.169.254"
    with pytest.raises(ValidationError):
        config.imds = True


def test_a_full_section_validates() -> None:
    config = BillingConfig.model_validate(
        {
            "imds": True,
            "imds_endpoint": "http://127.0.0.1:1338/",
            "gpus_per_instance": 8,
            "static": [{"instance_type": "p5.48xlarge", "lifecycle": "spot", "usd_per_hour": 22}],
            "pricing_api": True,
            "pricing_region": "eu-central-1",
            "cost_explorer": True,
            "cost_explorer_metric": "UnblendedCost",
            "cost_allocation_tags": {"team": "ml-infra"},
            "cost_explorer_with_resources": True,
        }
    )
    assert config.imds_endpoint == "http://127.0.0.1:1338"
    assert config.static[0].lifecycle == "spot"


PRICES = [
    StaticPrice(gpu_model="NVIDIA H100*", usd_per_hour=2.0, per_gpu=True),
    StaticPrice(instance_type="p5.48xlarge", usd_per_hour=40.0),
    StaticPrice(instance_type="p5.48xlarge", usd_per_hour=20.0, lifecycle="spot"),
    StaticPrice(host="GPU-NODE-*", usd_per_hour=16.0),
    StaticPrice(host="gpu-node-*", usd_per_hour=99.0),  # a later duplicate never wins
]


def _best(**overrides: Any) -> StaticPrice | None:
    facts: dict[str, Any] = {
        "hostname": HOSTNAME,
        "gpu_name": H100_NVML,
        "catalog_id": "H100-SXM-80GB",
        "instance_type": "p5.48xlarge",
        "lifecycle": "on-demand",
    }
    facts.update(overrides)
    return best_static(PRICES, **facts)


def test_host_glob_beats_instance_type_beats_gpu_model() -> None:
    assert _best() == PRICES[3]  # case-insensitive host glob, first of its kind
    assert _best(hostname="other") == PRICES[1]
    assert _best(hostname="other", instance_type=None) == PRICES[0]
    assert _best(hostname="other", instance_type=None, gpu_name="NVIDIA L4") is None


def test_a_spot_entry_applies_to_spot_instances_only() -> None:
    assert _best(hostname="other", lifecycle="spot") == PRICES[2]
    assert _best(hostname="other", lifecycle="on-demand") == PRICES[1]
    assert _best(hostname="other", lifecycle=None) == PRICES[1]


def test_gpu_model_matches_nvml_names_and_catalog_ids() -> None:
    by_id = [StaticPrice(gpu_model="h100-sxm-80gb", usd_per_hour=3.0, per_gpu=True)]
    by_name = [StaticPrice(gpu_model="nvidia  h100 80gb hbm3", usd_per_hour=3.0, per_gpu=True)]
    facts: dict[str, Any] = {"hostname": "x", "instance_type": None, "lifecycle": None}
    assert best_static(by_id, gpu_name=H100_NVML, catalog_id="H100-SXM-80GB", **facts) == by_id[0]
    assert best_static(by_id, gpu_name=H100_NVML, catalog_id=None, **facts) is None
    assert best_static(by_name, gpu_name=H100_NVML, catalog_id=None, **facts) == by_name[0]


def test_per_gpu_and_per_instance_prices() -> None:
    facts: dict[str, Any] = {
        "hostname": "owned-1",
        "gpu_name": H100_NVML,
        "catalog_id": None,
        "instance_type": None,
        "lifecycle": None,
        "gpus": 8,
    }
    per_gpu = static_quote([StaticPrice(host="owned-*", usd_per_hour=1.5, per_gpu=True)], **facts)
    per_instance = static_quote([StaticPrice(host="owned-*", usd_per_hour=12.0)], **facts)
    assert per_gpu is not None
    assert per_instance is not None
    assert (per_gpu.instance_usd_per_hour, per_gpu.gpu_usd_per_hour) == (12.0, 1.5)
    assert (per_instance.instance_usd_per_hour, per_instance.gpu_usd_per_hour) == (12.0, 1.5)
    assert per_gpu.source == "static"
    assert per_gpu.lifecycle is None
    assert "per GPU-hour" in per_gpu.detail
