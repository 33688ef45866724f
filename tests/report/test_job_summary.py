"""`gpuwatch job`'s advice and p95 on literals (the real job end to end is in
tests/slurm/test_job_summary.py): the catalog and MIG tables are the shipped ones, and
every expectation is worked out here from them, not from the functions under test."""

from __future__ import annotations

from dataclasses import replace

from gpuwatch.plan.mig import mig_table
from gpuwatch.report.job_summary import JobAdvice, JobGpu, JobSummary, advise, p95_of
from gpuwatch.sizing import build_gpu_catalog

H100 = "NVIDIA H100 80GB HBM3"
CATALOG = build_gpu_catalog()


def _gpu(uuid: str, busy_seconds: float, model: str = H100) -> JobGpu:
    return JobGpu(
        uuid=uuid,
        model=model,
        host="node-1",
        gpu_index=0,
        held_seconds=3600.0,
        busy_seconds=busy_seconds,
        idle_seconds=3600.0 - busy_seconds,
        activity_mean_ratio=0.1,
        memory_peak_bytes=8e9,
        cost_usd=2.0,
        idle_cost_usd=1.0,
        idle_hours_cost_usd=0.0,
    )


def _job(*gpus: JobGpu, p95: float = 0.12, need: float | None = None) -> JobSummary:
    return JobSummary(
        job_id="7",
        user="u",
        account="a",
        partition="p",
        steps=(),
        start_seconds=0.0,
        end_seconds=3600.0,
        gpus=gpus,
        gpu_hours=len(gpus),
        idle_gpu_hours=0.0,
        cost_usd=0.0,
        idle_cost_usd=0.0,
        idle_hours_cost_usd=0.0,
        activity_mean_ratio=0.1,
        activity_p95_ratio=p95,
        memory_peak_bytes=8e9,
        need_bytes=need,
        advice=JobAdvice(len(gpus), None, None, None),
    )


def test_p95_is_the_lowest_bin_holding_95_percent_of_the_seconds() -> None:
    assert p95_of({10: 94.0, 50: 1.0, 90: 5.0}) == 0.5
    assert p95_of({10: 96.0, 90: 4.0}) == 0.1
    assert p95_of({}) is None


def test_a_gpu_idle_all_along_is_dropped_and_a_small_job_gets_a_cheaper_part_or_a_slice() -> None:
    job = _job(_gpu("A", 3600.0), _gpu("B", 0.0))
    advice = advise(job, CATALOG, dram_peak_ratio=0.05, headroom_ratio=0.1)
    h100 = CATALOG.match_nvml_name(H100)
    assert h100 is not None
    fitting = [
        g
        for g in CATALOG
        if g.tier == h100.tier
        and g.memory_bytes >= 8e9 * 1.1
        and g.memory_bandwidth_bytes_per_second
        >= 0.05 * h100.memory_bandwidth_bytes_per_second * 1.1
    ]
    cheapest = min(fitting, key=lambda g: (g.rent_usd_per_hour, g.memory_bytes, g.id))
    table = mig_table(h100.id)
    assert table is not None
    smallest = next(
        p.name for p in table.profiles if p.memory_bytes >= 8e9 * 1.1 and p.compute_fraction >= 0.12
    )
    assert advice == JobAdvice(1, cheapest.id, smallest, f"same_class:{h100.tier}")
    # a busier job needs more compute: a larger slice
    busier = advise(replace(job, activity_p95_ratio=0.2), CATALOG, dram_peak_ratio=0.05,
                    headroom_ratio=0.1)  # fmt: skip
    assert busier.mig_profile != smallest
    profile = table.profile(str(busier.mig_profile))
    assert profile.compute_fraction >= 0.2
    assert profile.memory_bytes >= 8e9 * 1.1


def test_no_part_without_bandwidth_or_on_mixed_models_and_the_declared_need_wins() -> None:
    job = _job(_gpu("A", 3600.0), _gpu("B", 3600.0))
    assert advise(job, CATALOG, dram_peak_ratio=None, headroom_ratio=0.1).gpu_model is None
    mixed = _job(_gpu("A", 3600.0), _gpu("B", 3600.0, model="NVIDIA A100-SXM4-80GB"))
    assert advise(mixed, CATALOG, dram_peak_ratio=0.05, headroom_ratio=0.1) == JobAdvice(
        2, None, None, None
    )
    # a declared workload needing 70 GB fits no slice smaller than the whole GPU
    big = _job(_gpu("A", 3600.0), need=70e9)
    assert advise(big, CATALOG, dram_peak_ratio=0.05, headroom_ratio=0.1).mig_profile is None
