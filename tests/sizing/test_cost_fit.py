"""Cost per token, fit, ranking and the cheapest-fitting helper, on literals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwatch.sizing import (
    GpuCatalog,
    GpuCatalogEntry,
    MemoryAssumptions,
    Mode,
    Precision,
    Workload,
    build_gpu_catalog,
    build_model_catalog,
    cheapest_fitting,
    fits,
    gpus_needed,
    memory_requirement,
)
from gpuwatch.sizing.units import HOURS_PER_YEAR
from gpuwatch.tco import (
    Ownership,
    owned_usd_per_hour,
    rank_gpus,
    usd_per_million_tokens_owned,
    usd_per_million_tokens_rented,
)

B = 10**9
GB = 10**9


@pytest.fixture(scope="module")
def catalog() -> GpuCatalog:
    return build_gpu_catalog()


# --- cost -------------------------------------------------------------------------------


def test_rented_cost_per_million_tokens() -> None:
    # $3.60/h at 1 token/s = $3.60 per 3600 tokens = $1000 per 1M tokens
    assert usd_per_million_tokens_rented(3.6, 1.0) == pytest.approx(1000.0)
    assert usd_per_million_tokens_rented(6.88, 167.5) == pytest.approx(6.88 / (167.5 * 3600) * 1e6)


@pytest.mark.parametrize(
    ("purchase", "tokens_per_second", "tdp", "usd"),
    [
        (700, 65, 350, 0.4190),
        (1600, 70, 450, 0.6513),
        (8000, 114, 400, 1.2267),
        (30000, 239, 700, 2.0349),
    ],
)
def test_seed_001_owned_cost_scenarios(
    purchase: float, tokens_per_second: float, tdp: float, usd: float
) -> None:
    """Seed 001's cost_per_1m_tokens inputs: 70 % utilization, 3 years, $0.12/kWh, board
    power only (PUE 1: `gpuwatch size --pue 1`)."""
    got = usd_per_million_tokens_owned(purchase, tdp, tokens_per_second, Ownership(pue=1.0))
    assert got == pytest.approx(usd, abs=1e-4)
    with_pue = usd_per_million_tokens_owned(purchase, tdp, tokens_per_second)
    assert with_pue > got  # the default PUE, 1.58, adds the facility's share of the power


def test_owned_cost_is_amortization_plus_power_over_busy_tokens() -> None:
    hourly = 30000 / (3 * 8760) + 0.7 * 1.58 * 0.12  # TDP kW x PUE x $/kWh
    assert owned_usd_per_hour(30000, 700) == pytest.approx(hourly)
    assert usd_per_million_tokens_owned(30000, 700, 239) == pytest.approx(
        hourly / (239 * 0.7 * 3600) * 1e6
    )
    half_busy = Ownership(utilization=0.35)
    assert usd_per_million_tokens_owned(30000, 700, 239, half_busy) == pytest.approx(
        2 * usd_per_million_tokens_owned(30000, 700, 239)
    )


def test_seed_001_break_even_example() -> None:
    """A100 80GB: $12,000 vs $5.12/GPU-h; 3 years at 70 % = 18,396 GPU-hours = $94,187."""
    busy_hours = 3 * HOURS_PER_YEAR * 0.7
    assert busy_hours == pytest.approx(18_396)
    rented = busy_hours * 5.12
    assert rented == pytest.approx(94_187.52)
    owned = owned_usd_per_hour(12_000, 400, Ownership(pue=1.0)) * 3 * HOURS_PER_YEAR
    assert owned == pytest.approx(12_000 + 0.4 * 0.12 * 26_280)
    assert rented / owned == pytest.approx(7.1, abs=0.01)  # "buying an A100 is 7x cheaper"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"life_years": 0},
        {"usd_per_kwh": -1},
        {"utilization": 0},
        {"utilization": 1.2},
        {"pue": 0.9},
        {"pue": float("nan")},
    ],
)
def test_ownership_is_validated(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        Ownership(**kwargs)


def test_zero_throughput_has_no_price() -> None:
    with pytest.raises(ValueError, match="tokens_per_second"):
        usd_per_million_tokens_rented(1.0, 0.0)


# --- fit --------------------------------------------------------------------------------


def test_fits_needs_headroom(catalog: GpuCatalog) -> None:
    l40s = catalog.get("L40S-48GB")
    seed = MemoryAssumptions(engine="none", inference_overhead_ratio=0.2)
    workload = Workload(20 * B, precision=Precision.FP16, context_tokens=1)
    breakdown = memory_requirement(workload, seed)
    breakdown = replace(breakdown, kv_cache_bytes=0)  # 40 GB weights + 8 GB overhead
    assert breakdown.total_bytes == 48 * GB
    assert fits(l40s, breakdown, headroom=0.0)
    assert not fits(l40s, breakdown)
    with pytest.raises(ValueError, match="headroom"):
        fits(l40s, breakdown, headroom=-0.1)


def test_gpus_needed_is_a_ceiling(catalog: GpuCatalog) -> None:
    a100 = catalog.get("A100-SXM-80GB")
    assert gpus_needed(1, a100) == 1
    assert gpus_needed(80 * GB, a100, headroom=0.0) == 1
    assert gpus_needed(80 * GB + 1, a100, headroom=0.0) == 2
    assert gpus_needed(80 * GB, a100) == 2


# --- ranking ----------------------------------------------------------------------------


def test_rank_lists_every_gpu_by_its_shapes_cost(catalog: GpuCatalog) -> None:
    """Issue 23 part 7: GPUs rank by what their cheapest shape costs, one GPU or many;
    before, every single-GPU fit ranked above every multi-GPU one."""
    llama = build_model_catalog().get("llama-2-13b")
    ranked = rank_gpus(catalog, Workload(llama))
    assert {row.name for row in ranked} == set(catalog.ids)
    fitting = [row for row in ranked if row.fits]
    deployed = [row.deployment for row in ranked]
    assert all(d is not None for d in deployed)  # every part holds a 13B in some shape
    costs = [d.usd_per_million_tokens_rented for d in deployed if d is not None]
    assert costs == sorted(costs)
    assert ranked[: len(fitting)] != tuple(fitting)  # a 2-GPU shape beats single fits
    for row in fitting:
        assert row.deployment is not None
        assert row.deployment.shape.gpus == 1
    assert {row.name for row in fitting} == {
        "H100-SXM-80GB",
        "H100-PCIe-80GB",
        "H100-NVL-94GB",
        "H200-141GB",
        "H200-NVL-141GB",
        "GH200-96GB",
        "GH200-144GB",
        "B200-180GB",
        "B300-288GB",
        "A100-SXM-80GB",
        "A100-PCIe-80GB",
        "A100-SXM-40GB",
        "A100-PCIe-40GB",
        "L40S-48GB",
        "L40-48GB",
        "RTX-PRO-6000-Blackwell-96GB",
        "RTX-6000-Ada-48GB",
        "RTX-A6000-48GB",
    }
    assert all(row.gpus_needed == 1 for row in fitting)
    needed = {row.name: row.gpus_needed for row in ranked if not row.fits}
    assert needed == {
        "RTX-4090-24GB": 2,
        "RTX-3090-24GB": 2,
        "A10G-24GB": 2,
        "L4-24GB": 2,
        "T4-16GB": 3,
        "V100-SXM2-16GB": 3,
        "V100-SXM2-32GB": 2,
    }


def test_rank_figures_follow_the_formulas(catalog: GpuCatalog) -> None:
    ranked = rank_gpus(catalog, Workload(7 * B, context_tokens=1), efficiency=1.0)
    h100 = next(row for row in ranked if row.name == "H100-SXM-80GB")
    assert h100.memory_bytes == 80 * GB
    # bandwidth over the weights and a one-token KV cache (0.5 MB, the derived LLaMA-7B shape)
    assert h100.tokens_per_second == pytest.approx(3.35e12 / (14e9 + 2 * 32 * 32 * 128 * 2))
    assert h100.usd_per_million_tokens_rented == pytest.approx(
        6.88 / (h100.tokens_per_second * 3600) * 1e6
    )
    assert h100.usd_per_million_tokens_owned == pytest.approx(
        usd_per_million_tokens_owned(30000, 700, h100.tokens_per_second)
    )


def test_a_price_override_changes_the_ranking() -> None:
    workload = Workload(7 * B)
    default = rank_gpus(build_gpu_catalog(), workload)
    assert default[0].name == "RTX-3090-24GB"
    cheap_l4 = build_gpu_catalog([GpuCatalogEntry(id="L4-24GB", rent_usd_per_hour=0.01)])
    overridden = rank_gpus(cheap_l4, workload)
    assert overridden[0].name == "L4-24GB"
    assert overridden[0].gpu.sources["rent_usd_per_hour"] == "agent config"


def test_training_ranking_uses_training_throughput(catalog: GpuCatalog) -> None:
    ranked = rank_gpus(catalog, Workload(7 * B, Mode.TRAIN))
    # 126 GB + 20.4 GB of activations at 4096 tokens: only the B200 and B300 hold it
    assert [row.name for row in ranked if row.fits] == ["B200-180GB", "B300-288GB"]
    h200 = next(row for row in ranked if row.name == "H200-141GB")
    assert h200.gpus_needed == 2
    assert h200.tokens_per_second == pytest.approx(989e12 * 0.4 / (6 * 7e9))


# --- cheapest fitting -------------------------------------------------------------------


def test_cheapest_fitting_picks_the_lowest_rent_meeting_both_needs(catalog: GpuCatalog) -> None:
    # a 7B fp16 server: ~17 GB, ~150 GB/s of bandwidth
    best = cheapest_fitting(catalog, 17 * GB, 150 * GB)
    assert best is not None
    assert best.id == "RTX-3090-24GB"
    assert cheapest_fitting(catalog, 17 * GB, 900 * GB).id == "RTX-4090-24GB"  # type: ignore[union-attr]
    datacenter = GpuCatalog(gpu for gpu in catalog if gpu.tier == "datacenter")
    assert cheapest_fitting(datacenter, 12 * GB, 150 * GB).id == "T4-16GB"  # type: ignore[union-attr]
    assert cheapest_fitting(datacenter, 17 * GB, 150 * GB).id == "L4-24GB"  # type: ignore[union-attr]
    assert cheapest_fitting(datacenter, 20 * GB, 150 * GB).id == "L4-24GB"  # type: ignore[union-attr]


def test_cheapest_fitting_applies_headroom_to_both_needs(catalog: GpuCatalog) -> None:
    datacenter = GpuCatalog(gpu for gpu in catalog if gpu.tier == "datacenter")
    assert cheapest_fitting(datacenter, 22 * GB, 100 * GB, headroom=0.0).id == "L4-24GB"  # type: ignore[union-attr]
    assert cheapest_fitting(datacenter, 22 * GB, 100 * GB).id == "L40-48GB"  # type: ignore[union-attr]
    assert cheapest_fitting(datacenter, 20 * GB, 290 * GB).id == "A10G-24GB"  # type: ignore[union-attr]


def test_cheapest_fitting_none_when_nothing_is_big_enough(catalog: GpuCatalog) -> None:
    assert cheapest_fitting(catalog, 270 * GB, 1 * GB) is None  # the B300's 288 GB less headroom
    assert cheapest_fitting(catalog, 200 * GB, 1 * GB).id == "B300-288GB"  # type: ignore[union-attr]
    assert cheapest_fitting(catalog, 1 * GB, 8000 * GB) is None  # the B200's 8 TB/s less headroom
    assert cheapest_fitting(catalog, 1 * GB, 5000 * GB).id == "B200-180GB"  # type: ignore[union-attr]
