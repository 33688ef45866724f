"""The plan prices a GPU model the fleet runs at what the fleet pays for it.

A fleet that pays $2.00/h for its H100s (a reserved or negotiated rate) must not be told
that keeping them costs the catalog's on-demand $6.88, nor be moved to a catalog part
that costs more than what it pays now.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwatch.plan.buying import FLEET_PRICE_SOURCE
from gpuwatch.plan.make import fleet_price_overrides
from gpuwatch.plan.model import PlanOptions, WorkloadNeed
from gpuwatch.sizing import build_gpu_catalog

pytest.importorskip("highspy")

H100 = "H100-SXM-80GB"
GIB = 1024**3


def trainer(key: str, price: float, gpus: int = 1) -> WorkloadNeed:
    return WorkloadNeed(
        key=key,
        label=f"team/{key}",
        host="node-1",
        gpu_uuids=tuple(f"{key}-{i}" for i in range(gpus)),
        current_gpu_id=H100,
        current_usd_per_hour=price * gpus,
        activity="busy",
        memory_bytes=60 * GIB,
        memory_basis="observed",
        activity_ratio=0.9,
        kernel_busy_ratio=0.9,  # kernel-busy as SM activity: the least it can be
        bandwidth_bytes_per_second=2e12,
        namespace="team",
        pods=(f"team/{key}",),
    )


def test_the_median_price_per_gpu_of_each_model() -> None:
    """Prices per GPU: 2.00, 3.00 (a 2-GPU unit at $6.00/h counts twice) and 3.00: the
    median of (2, 3, 3, 3) is 3.00."""
    needs = [trainer("a", 2.0), trainer("b", 3.0, gpus=2), trainer("c", 3.0)]
    (override,) = fleet_price_overrides(needs)
    assert override.id == H100
    assert override.rent_usd_per_hour == 3.0
    assert override.sources == {"rent_usd_per_hour": FLEET_PRICE_SOURCE}


def test_a_kept_gpu_costs_what_the_fleet_pays() -> None:
    from gpuwatch.plan.solve import solve

    needs = [trainer("a", 2.0), trainer("b", 2.0)]
    catalog = build_gpu_catalog(fleet_price_overrides(needs))
    assert build_gpu_catalog().get(H100).rent_usd_per_hour > 2.0  # the catalog's on-demand
    plan = solve(needs, catalog, PlanOptions(time_limit_seconds=5.0))
    assert plan.current_usd_per_hour == pytest.approx(4.0)
    assert plan.usd_per_hour <= plan.current_usd_per_hour + 1e-9
    assert all(p.usd_per_hour <= 2.0 + 1e-9 for p in plan.placements)


def test_a_gpu_the_config_adds_is_priced_at_the_fleets_rate() -> None:
    """A part from `[[sizing.gpus]]` (not built in) gets the fleet's price like any other."""
    from gpuwatch.sizing import GpuCatalogEntry

    custom = GpuCatalogEntry(
        id="Acme-X1", tier="datacenter", nvml_names=("Acme X1",), memory_gb=96,
        memory_bandwidth_gb_per_second=3000, bf16_tflops=900, tdp_watts=700,
        purchase_usd=25000, rent_usd_per_hour=9.0,
    )  # fmt: skip
    need = replace(trainer("a", 4.0), current_gpu_id="Acme-X1")
    overrides = fleet_price_overrides([need])
    catalog = build_gpu_catalog([custom, *overrides])
    assert catalog.get("Acme-X1").rent_usd_per_hour == 4.0
    assert catalog.get("Acme-X1").memory_bytes == 96 * 10**9
