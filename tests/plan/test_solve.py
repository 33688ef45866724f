"""The plan's optimisation on small fleets whose optimum is worked out by hand (in each
test's docstring, from the catalog's figures) or by brute force (every partition of the
units into isolated GPUs and time-sliced classes, priced by an independent reading of
the rules: `tests/plan/oracle.py`).

The rules (gpuwatch.plan.solve): with headroom h, a unit fits a part when memory x (1+h)
<= the part's memory, activity x bf16(current) / bf16(part) <= capacity x (1-h), and
bandwidth x (1+h) <= the part's bandwidth; a whole GPU has capacity 1, a MIG instance
its SMs over the GPU's (A100 and H100 SXM, `LGIP_SMS`; else compute_slices/7) of the
compute and memory_slices/8 of the bandwidth; a time-sliced class (namespace, model,
replicas r, one per triple) holds q >= r units on ceil(q / r) GPUs when the r largest
shares of its units fit one GPU, per resource.
"""

from __future__ import annotations

import random
import sys
import time
from typing import cast

import pytest

from gpuwatch.core.install import installed_from
from gpuwatch.plan.mig import mig_table
from gpuwatch.plan.model import Activity, Plan, PlanOptions, WorkloadNeed
from gpuwatch.plan.solve import SolverMissingError, solve
from gpuwatch.sizing import GpuSpec, build_gpu_catalog
from gpuwatch.sizing.units import GB
from tests.plan.oracle import assert_feasible, brute_force

CATALOG = build_gpu_catalog()
H100 = CATALOG.get("H100-SXM-80GB")
L4 = CATALOG.get("L4-24GB")
L40S = CATALOG.get("L40S-48GB")
A100_40 = CATALOG.get("A100-PCIe-40GB")
HEADROOM = PlanOptions().headroom_ratio


def need(
    key: str,
    gpu: GpuSpec | None,
    memory_gb: float,
    activity: float | None,
    bandwidth_gb: float | None,
    *,
    namespace: str | None = "team-a",
    state: Activity = "underutilized",
    gpus: int = 1,
    kernel_busy: float | None = -1.0,
) -> WorkloadNeed:
    """A unit on `gpus` GPUs of `gpu`; memory and bandwidth per GPU in decimal GB(/s);
    kernel-busy time the SM activity unless given (the least it can be: a kernel that
    keeps every SM busy)."""
    uuids = tuple(f"GPU-{key}-{i}" for i in range(gpus))
    return WorkloadNeed(
        key=",".join(uuids),
        label=key,
        host="node-1",
        gpu_uuids=uuids,
        current_gpu_id=None if gpu is None else gpu.id,
        current_usd_per_hour=(6.0 if gpu is None else gpu.rent_usd_per_hour) * gpus,
        activity=state,
        memory_bytes=memory_gb * GB,
        memory_basis="measured",
        activity_ratio=activity,
        bandwidth_bytes_per_second=None if bandwidth_gb is None else bandwidth_gb * GB,
        namespace=namespace,
        kernel_busy_ratio=activity if kernel_busy == -1.0 else kernel_busy,
    )


def check_proof(plan: Plan, kept: float = 0.0) -> None:
    """The bound never exceeds the plan, the small fleets here are proved optimal, and
    the plan costs its GPUs plus what the `kept` (unplaced) units cost now."""
    assert plan.lower_bound_usd_per_hour <= plan.usd_per_hour + 1e-9
    assert plan.gap_ratio == 0.0
    gpus = sum(p.usd_per_hour for p in plan.placements)
    assert plan.usd_per_hour == pytest.approx(gpus + kept)


def test_two_small_units_share_one_h100_as_two_3g_40gb() -> None:
    """Two units on H100s, each 30 GB (33 GB with 10 % headroom), 30 % SM activity and
    500 GB/s (550 with headroom). A 3g.40gb holds one: 33 <= 40 GB, 0.30 <= 3/7 x 0.9 =
    0.386, 550 <= 3350 x 4/8 = 1675 GB/s; the smaller profiles do not (1g.20gb and
    2g.20gb have 20 GB). With H100 the only candidate, one H100 as 3g.40gb + 3g.40gb
    ($H100/h) beats two whole H100s (2 x $H100/h); time-slicing the pair costs the same,
    and MIG (isolated) wins the tie."""
    units = [need(k, H100, 30, 0.30, 500) for k in ("vllm-8b", "canary")]
    plan = solve(units, CATALOG, PlanOptions(candidate_gpu_ids=(H100.id,)))
    assert len(plan.placements) == 1
    (gpu,) = plan.placements
    assert (gpu.gpu_id, gpu.mode, gpu.mig_profiles) == (H100.id, "mig", ("3g.40gb", "3g.40gb"))
    assert set(gpu.units) == {u.key for u in units}
    assert plan.usd_per_hour == pytest.approx(H100.rent_usd_per_hour)
    assert plan.current_usd_per_hour == pytest.approx(2 * H100.rent_usd_per_hour)
    check_proof(plan)


def test_the_prices_decide_between_mig_and_two_smaller_gpus() -> None:
    """The same two units may also take an L40S each: 33 <= 48 GB, 0.30 x 989/362.05 =
    0.82 <= 0.9, 550 <= 864 GB/s; two on one L40S would need 1.64 of its compute. So the
    plan is min(H100 as 3g + 3g, 2 x L40S), whichever the catalog's prices make cheaper."""
    units = [need(k, H100, 30, 0.30, 500) for k in ("vllm-8b", "canary")]
    plan = solve(units, CATALOG, PlanOptions(candidate_gpu_ids=(H100.id, L40S.id)))
    two_l40s = 2 * L40S.rent_usd_per_hour
    assert plan.usd_per_hour == pytest.approx(min(H100.rent_usd_per_hour, two_l40s))
    if two_l40s < H100.rent_usd_per_hour:
        assert [(p.gpu_id, p.mode) for p in plan.placements] == [(L40S.id, "whole")] * 2
    else:
        assert [(p.gpu_id, p.mode) for p in plan.placements] == [(H100.id, "mig")]
    check_proof(plan)


def test_mig_placement_rules_not_memory_slot_counting() -> None:
    """On an A100 40GB, two units at 46 % SM activity (of an A100 40GB) and 10 GB each
    need a 4g.20gb: 0.46 > 3/7 x 0.9 = 0.386 (a 3g.20gb) but <= 4/7 x 0.9 = 0.514, and
    11 GB <= 20 GB. Their memory adds up to 22 of 40 GB and two 4g.20gb fill exactly
    the 8 memory slices, but two 4g.20gb are no valid configuration (4 + 4 compute
    slices; a 4g.20gb starts only at slice 0). Time-slicing them needs 0.92 > 0.9 of the
    compute. So they take two GPUs. A third unit at 30 % fits a 3g.20gb beside one of
    them (4g.20gb + 3g.20gb is valid): still two GPUs."""
    options = PlanOptions(candidate_gpu_ids=(A100_40.id,))
    pair = [need(k, A100_40, 10, 0.46, 100) for k in ("a", "b")]
    plan = solve(pair, CATALOG, options)
    assert plan.usd_per_hour == pytest.approx(2 * A100_40.rent_usd_per_hour)
    assert all(p.mode == "whole" for p in plan.placements)
    check_proof(plan)

    plan = solve([*pair, need("c", A100_40, 10, 0.30, 100)], CATALOG, options)
    assert plan.usd_per_hour == pytest.approx(2 * A100_40.rent_usd_per_hour)
    (split,) = [p for p in plan.placements if p.mode == "mig"]
    assert sorted(split.mig_profiles) == ["3g.20gb", "4g.20gb"]
    assert mig_table(A100_40.id) is not None
    check_proof(plan)


def test_low_activity_units_are_time_sliced() -> None:
    """Five units on L4s, each 5 GB, 20 % SM activity and 50 GB/s. An L4 (24 GB, 300
    GB/s, no MIG) holds four: 4 x 5.5 = 22 <= 24 GB, 4 x 0.2 = 0.8 <= 0.9, 4 x 55 = 220
    <= 300 GB/s; five need 1.0 > 0.9 of the compute. So two L4s instead of five."""
    units = [need(f"nb-{i}", L4, 5, 0.20, 50) for i in range(5)]
    plan = solve(units, CATALOG, PlanOptions(candidate_gpu_ids=(L4.id,)))
    assert plan.usd_per_hour == pytest.approx(2 * L4.rent_usd_per_hour)
    assert max(len(p.units) for p in plan.placements) in (3, 4)
    assert any(p.mode == "shared" for p in plan.placements)
    assert sorted(k for p in plan.placements for k in p.units) == sorted(u.key for u in units)
    check_proof(plan)


def test_a_multi_gpu_job_stays_one_group_of_whole_gpus() -> None:
    """A 4-GPU job (60 GB, 50 % activity, 1,000 GB/s per GPU) takes four whole GPUs of
    the cheapest model that holds one of its GPUs' share, never shared with the small
    unit beside it; that model is found here by scanning the catalog's data-centre
    parts whose NVLink domain joins 4 GPUs, as the H100 SXM's does (issue 24: the job
    keeps its interconnect)."""
    job = need("train", H100, 60, 0.50, 1000, gpus=4)
    small = need("notebook", H100, 2, 0.01, 5)
    plan = solve([job, small], CATALOG)

    def holds(gpu: GpuSpec) -> bool:
        return (
            gpu.memory_bytes >= 60 * GB * (1 + HEADROOM)
            and 0.5 * H100.bf16_flops_per_second / gpu.bf16_flops_per_second <= 1 - HEADROOM
            and gpu.memory_bandwidth_bytes_per_second >= 1000 * GB * (1 + HEADROOM)
            and gpu.nvlink_domain_gpus >= 4
            and gpu.gpus_per_node >= 4
        )

    cheapest = min(
        (g for g in CATALOG if g.tier == "datacenter" and holds(g)),
        key=lambda g: g.rent_usd_per_hour,
    )
    group = [p for p in plan.placements if job.key in p.units]
    assert len(group) == 4
    assert {(p.gpu_id, p.mode, p.units, p.group) for p in group} == {
        (cheapest.id, "whole", (job.key,), 1)
    }
    assert all(p.group == 0 for p in plan.placements if p not in group)
    check_proof(plan)


def test_a_tensor_parallel_nvlink_job_is_not_moved_to_pcie_cards() -> None:
    """A TP=4 job on H100 SXM (one 8-GPU NVLink domain) that a PCIe H100 (NVLink bridge
    of 2) or an L40S (no NVLink) would hold per GPU stays on a part whose NVLink domain
    joins its 4 GPUs; the same job on four L40S (no NVLink now) may go to the cheaper
    PCIe card."""
    job = need("tp4", H100, 20, 0.10, 300, gpus=4)
    pcie = CATALOG.get("H100-PCIe-80GB")
    options = PlanOptions(candidate_gpu_ids=(H100.id, pcie.id, L40S.id))
    plan = solve([job], CATALOG, options)
    assert {p.gpu_id for p in plan.placements} == {H100.id}
    assert len(plan.placements) == 4
    loose = need("tp4-pcie", L40S, 20, 0.10, 300, gpus=4)
    plan = solve([loose], CATALOG, PlanOptions(candidate_gpu_ids=(H100.id, pcie.id)))
    assert {p.gpu_id for p in plan.placements} == {pcie.id}


def test_a_time_sliced_class_fits_whichever_units_land_together() -> None:
    """Four H100 units of one team, 50, 20, 50 and 20 GB (5 % activity). The old plan put
    50 + 20 GB (77 GB with headroom) on each of two time-sliced H100s; with 2 replicas per
    GPU the scheduler may put both 50 GB units on one (110 GB > 80 GB). A class of 2
    replicas must fit its 2 largest units together, so now: the two 20 GB units share one
    H100 (44 GB) and each 50 GB unit has one alone (3 GPUs, issue 24 item 2). Four 30 GB
    units: one class of 2 replicas on 2 H100s (any two: 66 GB)."""
    units = [need(f"u{n}", H100, gb, 0.05, 50) for n, gb in enumerate((50, 20, 50, 20))]
    options = PlanOptions(candidate_gpu_ids=(H100.id,), mig=False)
    plan = solve(units, CATALOG, options)
    by_mode = sorted((p.mode, p.units, p.replicas) for p in plan.placements)
    assert by_mode == [
        ("shared", (units[1].key, units[3].key), 2),
        ("whole", (units[0].key,), 0),
        ("whole", (units[2].key,), 0),
    ]
    assert plan.usd_per_hour == pytest.approx(3 * H100.rent_usd_per_hour)
    assert not any("overflow" in note for note in plan.notes)
    small = [need(f"s{n}", H100, gb, 0.05, 50) for n, gb in enumerate((30, 30, 30, 30))]
    plan = solve(small, CATALOG, options)
    assert [(p.mode, p.replicas, p.share_class) for p in plan.placements] == [
        ("shared", 2, 1),
        ("shared", 2, 1),
    ]
    assert plan.usd_per_hour == pytest.approx(2 * H100.rent_usd_per_hour)


def test_namespaces_do_not_share_a_gpu_unless_allowed() -> None:
    """Two notebooks of 5 GB at 10 % on L4s, one per team: each alone on an L4 (2 x
    $L4/h), or one L4 together when sharing across namespaces is allowed."""
    units = [
        need("a", L4, 5, 0.1, 20, namespace="team-a"),
        need("b", L4, 5, 0.1, 20, namespace="team-b"),
    ]
    options = PlanOptions(candidate_gpu_ids=(L4.id,))
    apart = solve(units, CATALOG, options)
    assert apart.usd_per_hour == pytest.approx(2 * L4.rent_usd_per_hour)
    assert all(len(p.units) == 1 for p in apart.placements)
    check_proof(apart)
    options = PlanOptions(candidate_gpu_ids=(L4.id,), share_across_namespaces=True)
    together = solve(units, CATALOG, options)
    assert together.usd_per_hour == pytest.approx(L4.rent_usd_per_hour)
    check_proof(together)


def test_units_without_a_namespace_share_only_among_themselves() -> None:
    units = [
        need("a", L4, 5, 0.1, 20, namespace=None),
        need("b", L4, 5, 0.1, 20, namespace=None),
        need("c", L4, 5, 0.1, 20, namespace="team-c"),
    ]
    plan = solve(units, CATALOG, PlanOptions(candidate_gpu_ids=(L4.id,)))
    assert sorted(len(p.units) for p in plan.placements) == [1, 2]
    (pair,) = [p for p in plan.placements if len(p.units) == 2]
    assert set(pair.units) == {units[0].key, units[1].key}


def test_idle_and_held_units_are_reclaimed() -> None:
    units = [
        need("idle", H100, 0, 0.0, 0, state="idle"),
        need("held", H100, 30, 0.0, 0, state="held"),
    ]
    plan = solve(units, CATALOG)
    assert plan.reclaimed == (units[0].key, units[1].key)
    assert plan.placements == ()
    assert (plan.usd_per_hour, plan.gap_ratio) == (0.0, None)
    assert plan.current_usd_per_hour == pytest.approx(2 * H100.rent_usd_per_hour)
    assert plan.savings_usd_per_hour == pytest.approx(2 * H100.rent_usd_per_hour)


def test_a_unit_no_candidate_holds_keeps_its_gpu() -> None:
    """70 GB fits no L4 (24 GB); a GPU the catalog lacks cannot be sized at all. Both
    stay where they are, at their current price, in the plan's cost and bound."""
    big = need("big", H100, 70, 0.5, 1000)
    unknown = need("mystery", None, 5, 0.1, 10)
    small = need("small", L4, 5, 0.1, 10)
    plan = solve([big, unknown, small], CATALOG, PlanOptions(candidate_gpu_ids=(L4.id,)))
    assert plan.unplaced == (big.key, unknown.key)
    fixed = big.current_usd_per_hour + unknown.current_usd_per_hour
    assert plan.usd_per_hour == pytest.approx(fixed + L4.rent_usd_per_hour)
    assert any("keep their current GPU" in note for note in plan.notes)
    check_proof(plan, kept=fixed)


def test_a_unit_that_fits_nothing_with_headroom_stays_on_its_model() -> None:
    """95 % SM activity of an H100 fits no H100 or H200 (the same 989 dense BF16
    TFLOPS) with 10 % headroom, not even its own; it runs there today, so it stays alone
    on an H100 (and a note says so)."""
    busy = need("busy", H100, 70, 0.95, 3000, state="busy")
    plan = solve([busy], CATALOG, PlanOptions(candidate_gpu_ids=(H100.id, "H200-141GB")))
    assert [(p.gpu_id, p.mode) for p in plan.placements] == [(H100.id, "whole")]
    assert plan.unplaced == ()
    assert any("headroom" in note for note in plan.notes)


def test_headroom_is_respected_at_the_boundary() -> None:
    """A 3g.40gb holds 40 GB: a need of 40/1.1 GB is exactly 40 GB with 10 % headroom and
    fits, so two such units share one H100 (as 3g + 3g); 1 % more does not fit a
    3g.40gb, nor do two fit one H100 time-sliced (2 x 40.4 > 80 GB): two H100s. With
    no headroom, the larger units fit again."""
    options = PlanOptions(candidate_gpu_ids=(H100.id,))
    exact = [need(k, H100, 40 / 1.1, 0.1, 100) for k in "ab"]
    assert solve(exact, CATALOG, options).usd_per_hour == pytest.approx(H100.rent_usd_per_hour)
    over = [need(k, H100, 40 / 1.1 * 1.01, 0.1, 100) for k in "ab"]
    plan = solve(over, CATALOG, options)
    assert plan.usd_per_hour == pytest.approx(2 * H100.rent_usd_per_hour)
    check_proof(plan)
    bare = PlanOptions(candidate_gpu_ids=(H100.id,), headroom_ratio=0.0)
    assert solve(over, CATALOG, bare).usd_per_hour == pytest.approx(H100.rent_usd_per_hour)


def test_equal_price_keeps_the_current_model() -> None:
    """Two H100 units at 42 % (SM activity and kernel-busy) and 30 GB time-slice onto one
    GPU at a 2 % context-switch allowance ((0.42 + 0.02) x 2 = 0.88 <= 0.9 of the compute;
    at the default 5 %, 0.94 does not fit); neither fits a 3g.40gb: 60 of 132 SMs x 0.9 =
    0.409 < 0.42. GH200 96GB costs the same as an H100 in the catalog and is at least as
    large: the plan keeps the H100 they run on."""
    assert CATALOG.get("GH200-96GB").rent_usd_per_hour == H100.rent_usd_per_hour
    units = [need(k, H100, 30, 0.42, 1000) for k in "ab"]
    plan = solve(units, CATALOG, PlanOptions(context_switch_ratio=0.02))
    assert [(p.gpu_id, p.mode) for p in plan.placements] == [(H100.id, "shared")]


def test_kernel_busy_not_sm_activity_adds_up_on_a_time_sliced_gpu() -> None:
    """Three L4 units of 5 GB at 10 % SM activity. At 10 % kernel-busy time they share one
    L4: 3 x (0.10 + 0.05) = 0.45 <= 0.9. At 40 % kernel-busy (small kernels that keep few
    SMs busy but hold the GPU's time) they cannot all: 3 x (0.40 + 0.05) = 1.35 > 0.9 and
    2 x 0.45 = 0.9 fits, so two L4s; before issue 24 item 3 (SM activity added up) one."""
    light = [need(f"nb-{i}", L4, 5, 0.10, 10) for i in range(3)]
    heavy = [need(f"nb-{i}", L4, 5, 0.10, 10, kernel_busy=0.40) for i in range(3)]
    options = PlanOptions(candidate_gpu_ids=(L4.id,))
    assert solve(light, CATALOG, options).usd_per_hour == pytest.approx(L4.rent_usd_per_hour)
    plan = solve(heavy, CATALOG, options)
    assert plan.usd_per_hour == pytest.approx(2 * L4.rent_usd_per_hour)
    assert max(len(p.units) for p in plan.placements) == 2
    assert_feasible(plan, heavy)


def test_unknown_kernel_busy_counts_as_the_whole_current_gpu() -> None:
    """A unit without kernel-busy time (a history written before schema 9) is not
    time-sliced on a GPU like its own: its share is all of its GPU's time."""
    units = [need(f"nb-{i}", L4, 5, 0.10, 10, kernel_busy=None) for i in range(2)]
    plan = solve(units, CATALOG, PlanOptions(candidate_gpu_ids=(L4.id,)))
    assert plan.usd_per_hour == pytest.approx(2 * L4.rent_usd_per_hour)


def test_unknown_activity_counts_as_the_whole_current_gpu() -> None:
    unit = need("quiet", L4, 5, None, None)
    plan = solve(
        [unit, need("other", L4, 5, 0.1, 10)], CATALOG, PlanOptions(candidate_gpu_ids=(L4.id,))
    )
    assert plan.usd_per_hour == pytest.approx(2 * L4.rent_usd_per_hour)  # nothing shares
    assert any("without SM activity" in note for note in plan.notes)


def test_input_errors() -> None:
    unit = need("a", L4, 5, 0.1, 10)
    with pytest.raises(ValueError, match="same key"):
        solve([unit, unit], CATALOG)
    with pytest.raises(ValueError, match="headroom"):
        solve([unit], CATALOG, PlanOptions(headroom_ratio=1.0))


def test_without_highspy_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "highspy", None)
    with pytest.raises(SolverMissingError) as caught:
        solve([], CATALOG)
    assert f"-m pip install '{installed_from()}[plan]'" in str(caught.value)
    assert "gpuwatch[" not in str(caught.value)  # PyPI's `gpuwatch` is another project


# --- brute force ---------------------------------------------------------------------

MODELS = (H100, A100_40, L4)
"""Few models, so that brute force stays small: two with MIG, one without."""
TIED = (H100, CATALOG.get("GH200-96GB"), CATALOG.get("H100-PCIe-80GB"), L4)
"""With a model as cheap as the H100 and at least as large (GH200 96GB), which the
solver drops from its MILP and may move GPUs back from."""


def random_fleet(seed: int, models: tuple[GpuSpec, ...] = MODELS) -> list[WorkloadNeed]:
    """3-6 units on `models` in two namespaces, a tenth without activity or bandwidth."""
    rng = random.Random(seed)
    units = []
    for n in range(rng.randint(3, 6)):
        gpu = rng.choice(models)
        unknown = rng.random() < 0.1
        bandwidth = gpu.memory_bandwidth_bytes_per_second / GB * rng.random() * 0.5
        units.append(
            need(
                f"u{n}",
                gpu,
                gpu.memory_bytes / GB * rng.choice((0.05, 0.1, 0.2, 0.3, 0.45, 0.6)),
                None if unknown else rng.choice((0.02, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6)),
                None if unknown else bandwidth,
                namespace=rng.choice(("team-a", "team-b")),
            )
        )
    return units


@pytest.mark.parametrize(
    ("models", "seed"),
    [*((MODELS, seed) for seed in range(40)), *((TIED, seed) for seed in range(20))],
    ids=[*(f"models-{s}" for s in range(40)), *(f"tied-{s}" for s in range(20))],
)
def test_solver_matches_brute_force(models: tuple[GpuSpec, ...], seed: int) -> None:
    units = random_fleet(seed, models)
    options = PlanOptions(candidate_gpu_ids=tuple(g.id for g in models))
    plan = solve(units, CATALOG, options)
    assert plan.usd_per_hour == pytest.approx(brute_force(units, models), abs=1e-9)
    check_proof(plan)
    assert_feasible(plan, units)
    placed = sorted(k for p in plan.placements for k in p.units)
    assert placed == sorted(u.key for u in units)


def test_the_random_fleets_exercise_every_mode() -> None:
    """The brute-force fleets are not all trivial: their plans time-slice and use MIG."""
    options = PlanOptions(candidate_gpu_ids=tuple(g.id for g in MODELS))
    modes = {
        p.mode for seed in range(40) for p in solve(random_fleet(seed), CATALOG, options).placements
    }
    assert modes == {"whole", "shared", "mig"}


def test_a_large_pool_is_one_model_within_the_cap() -> None:
    """80 small notebooks in one namespace: with (leader, member) columns this was over
    6,000 pairs and was cut into parts; the time-sliced classes count units instead, so it
    is one MILP, stopped by the 6 s cap. The plan holds every unit in enforceable classes
    (at most `MAX_REPLICAS` = 16 replicas each), and the bound stays below the plan and
    above the cheapest share of memory alone: their memory with headroom at the cheapest
    candidate's $ per byte."""
    rng = random.Random(7)
    units = [
        need(f"nb-{i}", L4, rng.uniform(0.5, 2), rng.uniform(0.005, 0.03), rng.uniform(1, 10))
        for i in range(80)
    ]
    plan = solve(units, CATALOG, PlanOptions(time_limit_seconds=6.0))
    assert plan.solve_seconds < 12
    assert all(p.replicas <= 16 for p in plan.placements)
    assert sorted(k for p in plan.placements for k in p.units) == sorted(u.key for u in units)
    assert_feasible(plan, units)
    memory = sum(cast(float, u.memory_bytes) for u in units) * (1 + HEADROOM)
    per_byte = min(g.rent_usd_per_hour / g.memory_bytes for g in CATALOG if g.tier == "datacenter")
    assert memory * per_byte <= plan.lower_bound_usd_per_hour * (1 + 1e-9)
    assert plan.lower_bound_usd_per_hour <= plan.usd_per_hour < plan.current_usd_per_hour


def test_the_time_limit_bounds_the_whole_solve() -> None:
    """1,000 units in 50 namespaces at a 1 s limit: the solve took 13.6 s on the shared
    2-core machine (HiGHS got at least 0.05 s per pool, and every pool's bound, model
    and greedy start were built after the limit had passed). Python's own work now
    stops at the limit too: a pool reached past it keeps each unit alone on its
    cheapest candidate, and the plan is still whole and feasible."""
    rng = random.Random(3)
    units = []
    for n in range(1000):
        gpu = rng.choice((H100, L4, L40S, A100_40))
        units.append(
            need(
                f"u{n}",
                gpu,
                gpu.memory_bytes / GB * rng.uniform(0.05, 0.6),
                rng.uniform(0.02, 0.6),
                gpu.memory_bandwidth_bytes_per_second / GB * rng.uniform(0.02, 0.5),
                namespace=f"team-{n % 50}",
            )
        )
    started = time.perf_counter()
    plan = solve(units, CATALOG, PlanOptions(time_limit_seconds=1.0))
    assert time.perf_counter() - started < 1.0 + 2.0
    assert any("wall-clock cap of 1 s was reached" in note for note in plan.notes)
    assert sorted(k for p in plan.placements for k in p.units) == sorted(u.key for u in units)
    assert_feasible(plan, units)
    assert plan.lower_bound_usd_per_hour <= plan.usd_per_hour <= plan.current_usd_per_hour


def class_fleet(seed: int) -> list[WorkloadNeed]:
    """5-6 units of one team on L4s, 25-50 % of the memory each and little compute or
    bandwidth: time-sliced classes of two or more GPUs are worth it here."""
    rng = random.Random(seed)
    return [
        need(f"c{n}", L4, L4.memory_bytes / GB * rng.uniform(0.25, 0.5), 0.05, 10.0)
        for n in range(rng.randint(5, 6))
    ]


@pytest.mark.parametrize("seed", range(8))
def test_solver_matches_brute_force_on_multi_gpu_classes(seed: int) -> None:
    """The random fleets above never need a class of two GPUs; these do (a class of 2
    replicas over 2-3 L4s): the solver equals brute force, and some plans have one."""
    units = class_fleet(seed)
    models = (L4, A100_40)
    options = PlanOptions(candidate_gpu_ids=tuple(g.id for g in models), mig=False)
    plan = solve(units, CATALOG, options)
    assert plan.usd_per_hour == pytest.approx(brute_force(units, models), abs=1e-9)
    assert_feasible(plan, units)


def test_the_class_fleets_have_multi_gpu_classes() -> None:
    options = PlanOptions(candidate_gpu_ids=(L4.id, A100_40.id), mig=False)
    sizes: list[int] = []
    for seed in range(8):
        plan = solve(class_fleet(seed), CATALOG, options)
        classes = [p.share_class for p in plan.placements if p.mode == "shared"]
        sizes.extend(classes.count(c) for c in set(classes))
    assert max(sizes) >= 2
