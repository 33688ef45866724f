"""The [rent_vs_buy] section: defaults, validation, figures filled from the sizing catalog."""

from __future__ import annotations

import tomllib

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from gpuwatch.sizing import build_gpu_catalog
from gpuwatch.tco import (
    DEFAULT_COST_OF_CAPITAL,
    DEFAULT_OPS_USD_PER_YEAR,
    DEFAULT_PUE,
    RentVsBuyConfig,
    TcoInputs,
    breakeven_utilization,
    evaluate_tco,
    owned_usd_per_gpu_year,
)

A100 = build_gpu_catalog().get("A100-SXM-80GB")


class Embedding(BaseModel):
    """How the lead embeds the section in the agent config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rent_vs_buy: RentVsBuyConfig = RentVsBuyConfig()


def test_defaults() -> None:
    config = RentVsBuyConfig()
    assert config.purchase_usd is None
    assert config.rent_usd_per_hour is None
    assert config.power_watts is None
    assert config.life_years == 3.0
    assert config.usd_per_kwh == 0.12
    assert config.pue == DEFAULT_PUE == 1.58
    assert config.hosting_usd_per_kw_month is None, "the tier's colocation rate"
    assert config.host_share is True
    assert config.ops_usd_per_year_per_gpu == DEFAULT_OPS_USD_PER_YEAR == 462.5
    assert config.cost_of_capital == DEFAULT_COST_OF_CAPITAL == 0.08
    assert config.facility is None, "by tier"


def test_unset_figures_come_from_the_catalog_with_the_hosts_share() -> None:
    inputs = RentVsBuyConfig().inputs_for(A100, 0.7)
    # datacenter host share: server 0.32 + networking 0.10 of the $12,000 card, host
    # power 0.82 x its 400 W, in colocation at $150/kW-month (PUE not applied again)
    assert inputs == TcoInputs(
        purchase_usd=12_000,
        rent_usd_per_hour=A100.rent_usd_per_hour,
        utilization=0.7,
        years=3.0,
        power_watts=400,
        usd_per_kwh=0.12,
        pue=1.58,
        hosting_usd_per_kw_month=150.0,
        ops_usd_per_year=462.5,
        cost_of_capital=0.08,
        facility="colocation",
        host_capex_usd=inputs.host_capex_usd,
        host_power_watts=inputs.host_power_watts,
    )
    assert inputs.host_capex_usd == pytest.approx(12_000 * 0.42)
    assert inputs.host_power_watts == pytest.approx(400 * 0.82)
    assert inputs.capex_usd == pytest.approx(12_000 * 1.42)
    assert inputs.applied_pue == 1.0


def test_host_share_off_compares_bare_cards() -> None:
    """A bare card stands in the same facility: the card's own kW pay the colocation fee."""
    inputs = RentVsBuyConfig(host_share=False).inputs_for(A100, 0.7)
    assert (inputs.capex_usd, inputs.it_power_watts, inputs.hosting_usd_per_kw_month) == (
        12_000,
        400,
        150.0,
    )
    assert inputs.facility == "colocation"


def test_host_share_figures_are_overridable() -> None:
    config = RentVsBuyConfig(host_server_usd=4000, host_networking_usd=0, host_power_watts=200)
    inputs = config.inputs_for(A100, 0.7)
    assert (inputs.capex_usd, inputs.it_power_watts) == (16_000, 600)


def test_facility_decides_whether_pue_applies() -> None:
    """Colocation (the datacenter tier's default): the fee covers cooling, PUE 1; a room
    of your own: energy x PUE and no fee unless one is set."""
    colo, owned = RentVsBuyConfig(), RentVsBuyConfig(facility="owned")
    assert colo.facility_for(A100) == "colocation"
    kw = 0.4 * 1.82
    capital = colo.inputs_for(A100, 0.5)
    assert colo.owned_usd_per_gpu_year(A100) - owned.owned_usd_per_gpu_year(A100) == (
        pytest.approx(kw * 8760 * 0.12 + 150 * kw * 12 - kw * 1.58 * 8760 * 0.12)
    )
    assert owned.inputs_for(A100, 0.5).hosting_usd_per_kw_month == 0.0
    assert owned.inputs_for(A100, 0.5).applied_pue == 1.58
    assert capital.applied_pue == 1.0
    rtx = build_gpu_catalog().get("RTX-4090-24GB")
    in_colo = RentVsBuyConfig(facility="colocation").inputs_for(rtx, 0.5)
    assert (in_colo.hosting_usd_per_kw_month, in_colo.applied_pue) == (150.0, 1.0)


def test_a_consumer_card_gets_a_workstation_host_and_no_colocation() -> None:
    rtx = build_gpu_catalog().get("RTX-4090-24GB")
    inputs = RentVsBuyConfig().inputs_for(rtx, 0.5)
    assert inputs.capex_usd == pytest.approx(1600 * 1.5)
    assert inputs.it_power_watts == pytest.approx(450 * 1.3)
    assert inputs.hosting_usd_per_kw_month == 0.0
    assert (inputs.facility, inputs.applied_pue) == ("owned", 1.58)


def test_set_figures_win() -> None:
    config = RentVsBuyConfig(
        purchase_usd=9000,
        rent_usd_per_hour=2.0,
        power_watts=300,
        life_years=5,
        usd_per_kwh=0.2,
        pue=1.2,
        hosting_usd_per_kw_month=150,
        ops_usd_per_year_per_gpu=400,
        cost_of_capital=0.05,
        facility="owned",
    )
    inputs = config.inputs_for(A100, 0.5, tokens_per_second=100.0)
    # the host share follows the card's price and power: 0.42 x 9000, 0.82 x 300
    assert inputs.capex_usd == pytest.approx(9000 + 3780)
    assert inputs.it_power_watts == pytest.approx(300 + 246)
    assert inputs.rent_usd_per_hour == 2.0
    assert (inputs.years, inputs.usd_per_kwh, inputs.pue) == (5, 0.2, 1.2)
    assert (inputs.hosting_usd_per_kw_month, inputs.ops_usd_per_year) == (150, 400)
    assert (inputs.cost_of_capital, inputs.facility) == (0.05, "owned")
    assert inputs.tokens_per_second == 100.0
    owned = owned_usd_per_gpu_year(
        9000 + 3780,
        5,
        300 + 246,
        usd_per_kwh=0.2,
        pue=1.2,
        hosting_usd_per_kw_month=150,
        ops_usd_per_year=400,
        cost_of_capital=0.05,
        facility="owned",
    )
    assert config.owned_usd_per_gpu_year(A100) == pytest.approx(owned)
    assert config.breakeven_utilization(A100) == pytest.approx(breakeven_utilization(owned, 2.0))
    assert evaluate_tco(inputs).owned_usd_per_gpu_year == pytest.approx(owned)


def test_live_figures_for_a_measured_utilization() -> None:
    config = RentVsBuyConfig()
    u_star = config.breakeven_utilization(A100)
    assert u_star == pytest.approx(evaluate_tco(config.inputs_for(A100, 0.5)).breakeven_utilization)
    assert config.monthly_delta_usd(A100, u_star) == pytest.approx(0.0, abs=1e-9)
    assert config.monthly_delta_usd(A100, min(1.0, u_star * 2)) > 0  # buying would be cheaper
    assert config.monthly_delta_usd(A100, 0.0) == pytest.approx(
        -config.owned_usd_per_gpu_year(A100) / 12
    )
    assert config.monthly_delta_usd(A100, 0.7) == pytest.approx(
        evaluate_tco(config.inputs_for(A100, 0.7)).monthly_delta_usd
    )


def test_section_from_toml() -> None:
    text = """
[rent_vs_buy]
life_years = 5
pue = 1.2
hosting_usd_per_kw_month = 175.0
"""
    config = Embedding.model_validate(tomllib.loads(text)).rent_vs_buy
    assert (config.life_years, config.pue, config.hosting_usd_per_kw_month) == (5, 1.2, 175.0)
    assert Embedding().rent_vs_buy == RentVsBuyConfig()


@pytest.mark.parametrize(
    "fields",
    [
        {"life_years": 0},
        {"life_years": -3},
        {"pue": 0.9},
        {"usd_per_kwh": -0.1},
        {"purchase_usd": -1},
        {"rent_usd_per_hour": 0},
        {"power_watts": -5},
        {"hosting_usd_per_kw_month": float("inf")},
        {"ops_usd_per_year_per_gpu": float("nan")},
        {"cost_of_capital": 8},  # 8 %/year is 0.08
        {"cost_of_capital": -0.01},
        {"facility": "garage"},
        {"lifetime_years": 3},  # unknown key
    ],
)
def test_bad_values_are_rejected(fields: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        RentVsBuyConfig.model_validate(fields)


def test_frozen() -> None:
    config = RentVsBuyConfig()
    with pytest.raises(ValidationError):
        config.life_years = 5


def test_catalog_break_even_utilizations_quoted_in_the_docs() -> None:
    """docs/tco.md, with every default (3 years, 8 % cost of capital, ops $462.50,
    datacenter parts in colocation): with the host's share 19-44 % against AWS or Azure
    on-demand, 50-59 % at marketplace rents, 7-9 % for used V100s against AWS's p3 rent,
    73-87 % for consumer and workstation cards; bare cards (--bare-card) 13-30 %,
    35-41 %, 5-6 % and 52-68 %."""
    quoted = {  # (with the host's share, bare card)
        "T4-16GB": (0.295, 0.225),
        "B200-180GB": (0.195, 0.132),
        "A100-SXM-80GB": (0.298, 0.203),
        "H100-SXM-80GB": (0.334, 0.228),
        "L40S-48GB": (0.435, 0.297),
        "A100-PCIe-40GB": (0.534, 0.370),
        "L40-48GB": (0.589, 0.405),
        "V100-SXM2-16GB": (0.087, 0.058),
        "RTX-6000-Ada-48GB": (0.733, 0.522),
        "RTX-3090-24GB": (0.837, 0.678),
        "RTX-4090-24GB": (0.785, 0.608),
        "RTX-A6000-48GB": (0.870, 0.631),
    }
    catalog = build_gpu_catalog()
    hosted, bare = RentVsBuyConfig(), RentVsBuyConfig(host_share=False)
    for gpu_id, (with_host, without) in quoted.items():
        gpu = catalog.get(gpu_id)
        assert round(hosted.breakeven_utilization(gpu), 3) == with_host, gpu_id
        assert round(bare.breakeven_utilization(gpu), 3) == without, gpu_id
    aws = ("T4-16GB", "L4-24GB", "A10G-24GB", "A100-SXM-40GB", "A100-SXM-80GB", "H100-SXM-80GB")
    azure = ("A100-PCIe-80GB", "H100-NVL-94GB")
    groups = {  # ids: (bare range, hosted range)
        (*aws, *azure, "H200-141GB", "B200-180GB", "L40S-48GB"): ((0.13, 0.30), (0.19, 0.44)),
        ("A100-PCIe-40GB", "H100-PCIe-80GB", "L40-48GB"): ((0.35, 0.41), (0.50, 0.59)),
        ("V100-SXM2-16GB", "V100-SXM2-32GB"): ((0.05, 0.06), (0.07, 0.09)),
        # rents that stand in for a missing list price (gpus.toml says whose)
        ("H200-NVL-141GB", "GH200-96GB", "GH200-144GB", "B300-288GB"): (
            (0.16, 0.28),
            (0.24, 0.41),
        ),
        (
            "RTX-6000-Ada-48GB",
            "RTX-A6000-48GB",
            "RTX-4090-24GB",
            "RTX-3090-24GB",
            "RTX-PRO-6000-Blackwell-96GB",
        ): (
            (0.52, 0.68),
            (0.73, 0.87),
        ),
    }
    grouped = [gpu_id for ids in groups for gpu_id in ids]
    assert sorted(grouped) == sorted(catalog.ids)  # a new part needs its place in the docs
    for ids, ((low, high), (hosted_low, hosted_high)) in groups.items():
        for gpu_id in ids:
            gpu = catalog.get(gpu_id)
            assert low < bare.breakeven_utilization(gpu) < high, gpu_id
            assert hosted_low < hosted.breakeven_utilization(gpu) < hosted_high, gpu_id


def test_seed_000s_own_above_50_to_60_percent_is_an_h100_rented_at_3_83_to_4_59() -> None:
    """docs/tco.md: the rents at which an H100 with its host breaks even at 50 and 60 %."""
    h100 = build_gpu_catalog().get("H100-SXM-80GB")
    owned = RentVsBuyConfig().owned_usd_per_gpu_year(h100)
    assert owned == pytest.approx(20_114.08, abs=0.005)
    assert breakeven_utilization(owned, 4.59) == pytest.approx(0.5, abs=0.001)
    assert breakeven_utilization(owned, 3.83) == pytest.approx(0.6, abs=0.001)


def test_an_always_idle_gpu_is_never_a_buy() -> None:
    for gpu in build_gpu_catalog():
        assert RentVsBuyConfig().monthly_delta_usd(gpu, 0.0) < 0, gpu.id
