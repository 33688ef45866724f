"""The plan buys what the account can buy (issue 24, item 1).

The catalog's reference rents mix list prices, marketplace prices and estimates. The
issue's examples: on an AWS fleet three H100 vLLM units went to 3 x A100-PCIe-40GB (a
Lambda marketplace price) and five H200 units to one B300 (priced as a B200: an
estimate). Each test shows the old answer on the unfiltered catalog, so it can fail.
"""

from __future__ import annotations

import json
import re

import pytest

from gpuwatch.billing.aws_pricing import AWS_GPU_FAMILIES
from gpuwatch.billing.config import BillingConfig, StaticPrice
from gpuwatch.plan.buying import (
    AWS_OFFERS,
    UNBUYABLE,
    billing_overrides,
    buyable,
    price_kind,
    whole_nodes,
)
from gpuwatch.plan.make import fleet_price_overrides, plan_with_policy
from gpuwatch.plan.model import PlanOptions, WorkloadNeed
from gpuwatch.plan.render import PlanReport, plan_json, render_html, render_markdown, render_text
from gpuwatch.sizing import build_gpu_catalog

pytest.importorskip("highspy")

GB = 1e9
AWS = BillingConfig(region="us-east-1", pricing_api=True)
OPTIONS = PlanOptions(time_limit_seconds=10.0)


def unit(key: str, gpu: str, price: float, memory_gb: float, activity: float) -> WorkloadNeed:
    return WorkloadNeed(
        key=key,
        label=f"team-b/{key}",
        host="node-1",
        gpu_uuids=(f"uuid-{key}",),
        current_gpu_id=gpu,
        current_usd_per_hour=price,
        activity="busy",
        memory_bytes=memory_gb * GB,
        memory_basis="measured",
        activity_ratio=activity,
        kernel_busy_ratio=activity,  # kernel-busy as SM activity: the least it can be
        bandwidth_bytes_per_second=0.3e12,
        namespace="team-b",
        pods=(f"team-b/{key}",),
    )


def catalog_for(needs: list[WorkloadNeed], billing: BillingConfig = AWS):  # type: ignore[no-untyped-def]
    reference = build_gpu_catalog()
    return build_gpu_catalog(
        [*billing_overrides(billing, reference), *fleet_price_overrides(needs)]
    )


def kinds_used(needs: list[WorkloadNeed], billing: BillingConfig, named=None):  # type: ignore[no-untyped-def]
    buying = buyable(catalog_for(needs, billing), needs, billing, named)
    plan = plan_with_policy(needs, buying, OPTIONS)
    return (
        plan,
        buying,
        {p.gpu_id: price_kind(buying.catalog.get(p.gpu_id)) for p in plan.placements},
    )


H100_VLLM = [unit(f"vllm-{i}", "H100-SXM-80GB", 6.88, 25.5, 0.24) for i in range(3)]
H200_UNITS = [unit(f"h200-{i}", "H200-141GB", 7.912, 45.0, 0.12) for i in range(5)]


def test_old_answer_three_h100_units_went_to_marketplace_a100s() -> None:
    from gpuwatch.plan.solve import solve

    old = solve(H100_VLLM, catalog_for(H100_VLLM), OPTIONS)
    assert {p.gpu_id for p in old.placements} == {"A100-PCIe-40GB"}


def test_on_aws_three_h100_vllm_units_never_go_to_a100_pcie_40gb() -> None:
    plan, buying, used = kinds_used(H100_VLLM, AWS)
    assert buying.rule == "aws:us-east-1"
    assert "A100-PCIe-40GB" not in used
    assert set(used) <= set(AWS_GPU_FAMILIES.values())
    assert not set(used.values()) & UNBUYABLE
    assert plan.usd_per_hour < plan.current_usd_per_hour  # still a saving, a buyable one


def test_old_answer_five_h200_units_went_to_one_estimated_b300() -> None:
    from gpuwatch.plan.solve import solve

    old = solve(H200_UNITS, catalog_for(H200_UNITS), OPTIONS)
    assert [p.gpu_id for p in old.placements] == ["B300-288GB"]


@pytest.mark.parametrize("billing", [AWS, BillingConfig()], ids=["aws", "no-billing"])
def test_five_h200_units_never_go_to_an_estimated_b300(billing: BillingConfig) -> None:
    _plan, buying, used = kinds_used(H200_UNITS, billing)
    assert "B300-288GB" not in used
    assert not set(used.values()) & UNBUYABLE
    assert ("B300-288GB", "estimate") in buying.left_out


def test_a_named_estimate_is_used_and_labelled_in_every_format() -> None:
    named = ("H200-141GB", "B300-288GB")
    plan, buying, used = kinds_used(H200_UNITS, BillingConfig(), named)
    assert used == {"B300-288GB": "estimate"}
    report = PlanReport(plan, tuple(H200_UNITS), OPTIONS, 30.0, "local", "", None, buying)
    for text in (render_text(report), render_markdown(report), render_html(report)):
        assert "B300-288GB, time-sliced (estimated price)" in text
    data = plan_json(report)
    assert {p["price_kind"] for p in data["placements"]} == {"estimate"}
    assert data["placements"][0]["price_source"].startswith("estimate:")
    assert json.loads(json.dumps(data))["buying"]["rule"] == "allow_list"


def test_the_default_says_what_it_leaves_out() -> None:
    _, buying, _ = kinds_used(H200_UNITS, BillingConfig())
    assert buying.rule == "priced"
    sentence = buying.sentence()
    assert "with an estimated price" in sentence
    assert "with a marketplace price" in sentence


def test_every_offer_is_the_instance_the_catalogs_rent_comes_from() -> None:
    catalog = build_gpu_catalog()
    for gpu_id, (instance_type, gpus) in AWS_OFFERS.items():
        source = catalog.get(gpu_id).sources["rent_usd_per_hour"]
        assert instance_type in source, (gpu_id, source)
        assert price_kind(catalog.get(gpu_id)) == "list"
        family = instance_type.split(".")[0]
        assert AWS_GPU_FAMILIES[family] == gpu_id
        per_instance = re.search(r"/ (\d+) GPUs", source)
        assert gpus == (int(per_instance.group(1)) if per_instance else 1), source


def test_the_accounts_static_instance_price_prices_the_part() -> None:
    billing = BillingConfig(
        region="us-east-1", static=[StaticPrice(instance_type="p5en.48xlarge", usd_per_hour=40.0)]
    )
    needs = [unit("a", "H100-SXM-80GB", 6.88, 100.0, 0.5)]
    buying = buyable(catalog_for(needs, billing), needs, billing, None)
    h200 = buying.catalog.get("H200-141GB")
    assert h200.rent_usd_per_hour == pytest.approx(40.0 / 8)
    assert price_kind(h200) == "billing"
    assert buying.offers["H200-141GB"] == ("p5en.48xlarge", 8)


def test_a_part_sold_by_the_node_counts_its_spare_gpus() -> None:
    """Nine units move from a $9/h part to H200 at the account's $5/GPU-h, sold as the
    8-GPU p5en.48xlarge: 2 instances, 7 spare GPUs paid too (16 x $5 < 9 x $9)."""
    billing = BillingConfig(
        region="us-east-1", static=[StaticPrice(instance_type="p5en.48xlarge", usd_per_hour=40.0)]
    )
    needs = [unit(f"u{i}", "H100-SXM-80GB", 9.0, 100.0, 0.8) for i in range(9)]
    plan, buying, used = kinds_used(needs, billing)
    assert used == {"H200-141GB": "billing"}
    (spare,) = whole_nodes(plan, needs, buying)
    assert (spare.instance_type, spare.new_gpus, spare.spare_gpus) == ("p5en.48xlarge", 9, 7)
    assert plan.usd_per_hour == pytest.approx(16 * 5.0)
    assert any("sold by the node (p5en.48xlarge, 8 GPUs)" in note for note in plan.notes)


def test_a_node_whose_spare_gpus_eat_the_saving_is_not_bought() -> None:
    """One unit: a whole p5en.48xlarge ($40/h) for a $6.88/h unit is no saving."""
    billing = BillingConfig(
        region="us-east-1", static=[StaticPrice(instance_type="p5en.48xlarge", usd_per_hour=40.0)]
    )
    needs = [unit("a", "H100-SXM-80GB", 9.0, 100.0, 0.8)]
    plan, _, used = kinds_used(needs, billing)
    assert used == {"H100-SXM-80GB": "fleet"}
    assert plan.usd_per_hour == pytest.approx(9.0)
    assert any(note.startswith("H200-141GB not bought: sold by the node") for note in plan.notes)
