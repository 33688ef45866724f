"""Units the plan places, from each GPU's use (gpuwatch.plan.usage): pure, hand-derived."""

from __future__ import annotations

import pytest

from gpuwatch.plan.usage import GpuUsage, activity_of, basis_of, percentile, workload_needs
from gpuwatch.sizing import build_gpu_catalog

H100 = "NVIDIA H100 80GB HBM3"
GIB = 1024**3


def usage(uuid: str, **changes: object) -> GpuUsage:
    base: dict[str, object] = {
        "host": "node-1",
        "uuid": uuid,
        "name": H100,
        "gpu_index": int(uuid[-1]),
        "observed_seconds": 86400.0,
        "state_seconds": {"busy": 86400.0},
        "activity_ratio": 0.5,
        "dram_ratio": 0.25,
        "need_bytes": None,
        "need_basis": None,
        "observed_peak_bytes": 40 * GIB,
        "price_usd_per_hour": None,
    }
    base.update(changes)
    return GpuUsage(**base)  # type: ignore[arg-type]


def test_percentile_interpolates_as_promql_quantile_over_time() -> None:
    """quantile_over_time(0.95, ...) over 1..21: rank 0.95 x 20 = 19 -> the 20th value, 20;
    over 1..4: rank 2.85 -> 3 + 0.85 x (4 - 3) = 3.85."""
    assert percentile(range(1, 22), 0.95) == 20
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.95) == pytest.approx(3.85)
    assert percentile([], 0.95) is None


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        ({"busy": 1.0, "idle": 1e6}, "busy"),
        ({"underutilized": 1.0, "held": 1e6}, "underutilized"),
        ({"held": 5.0, "idle": 1e6}, "held"),
        ({"idle": 5.0, "pending": 1e6}, "idle"),
        ({"pending": 5.0}, "unknown"),
        ({}, "unknown"),
    ],
)
def test_activity_is_what_the_gpu_did_at_all(seconds: dict[str, float], expected: str) -> None:
    assert activity_of(seconds) == expected


def test_basis_prefers_declared_then_measured_then_observed() -> None:
    assert basis_of(["observed", "measured"]) == "measured"
    assert basis_of(["measured", "declared", None]) == "declared"
    assert basis_of([None]) is None


def test_one_unit_per_gpu_without_pods_priced_from_the_catalog() -> None:
    catalog = build_gpu_catalog()
    needs = workload_needs([usage("u0"), usage("u1")], catalog)
    assert [n.key for n in needs] == ["u0", "u1"]
    h100 = catalog.match_nvml_name(H100)
    assert h100 is not None
    assert needs[0].current_gpu_id == h100.id
    assert needs[0].current_usd_per_hour == h100.rent_usd_per_hour
    assert needs[0].memory_basis == "observed"
    assert needs[0].memory_bytes == 40 * GIB
    assert needs[0].bandwidth_bytes_per_second == 0.25 * h100.memory_bandwidth_bytes_per_second
    assert needs[0].label == "node-1 GPU 0"


def test_a_pod_holding_two_gpus_is_one_unit_and_a_measured_need_wins() -> None:
    pods = ("team-a/train-0",)
    needs = workload_needs(
        [
            usage("u0", pods=pods, need_bytes=30 * GIB, need_basis="measured"),
            usage(
                "u1", pods=pods, need_bytes=32 * GIB, need_basis="measured", price_usd_per_hour=5.0
            ),
            usage("u2", pods=("team-b/nb",), state_seconds={"held": 100.0}),
        ],
        build_gpu_catalog(),
    )
    assert len(needs) == 2
    job = next(n for n in needs if n.gpu_count == 2)
    assert job.key == "u0,u1"
    assert job.memory_bytes == 32 * GIB  # the larger GPU's need, per GPU
    assert job.memory_basis == "measured"
    h100 = build_gpu_catalog().match_nvml_name(H100)
    assert h100 is not None
    # u1's stored price, u0 at the catalog's reference rent (it stored none)
    assert job.current_usd_per_hour == 5.0 + h100.rent_usd_per_hour
    assert job.namespace == "team-a"
    held = next(n for n in needs if n.gpu_count == 1)
    assert held.activity == "held"
    assert held.reclaimable
    assert held.held_memory_bytes == 40 * GIB
    assert held.label == "team-b/nb"
