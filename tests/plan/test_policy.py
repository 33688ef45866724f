"""Policy a team states in `[plan]` (issue 24, item 7): namespaces never time-sliced,
quotas on GPUs or MIG profiles per namespace, a minimum saving per move."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwatch.billing.config import BillingConfig
from gpuwatch.cli import _parser
from gpuwatch.cli.plan import run_plan
from gpuwatch.config import ConfigError, load_config
from gpuwatch.plan.buying import buyable
from gpuwatch.plan.make import plan_with_policy
from gpuwatch.plan.model import PlanOptions, WorkloadNeed
from gpuwatch.plan.policy import requests
from gpuwatch.sizing import build_gpu_catalog

pytest.importorskip("highspy")

GB = 1e9
H100 = "H100-SXM-80GB"


def unit(key: str, namespace: str, memory_gb: float = 8.0, activity: float = 0.05) -> WorkloadNeed:
    return WorkloadNeed(
        key=key,
        label=f"{namespace}/{key}",
        host="node-1",
        gpu_uuids=(f"uuid-{key}",),
        current_gpu_id=H100,
        current_usd_per_hour=6.88,
        activity="busy",
        memory_bytes=memory_gb * GB,
        memory_basis="measured",
        activity_ratio=activity,
        kernel_busy_ratio=activity,  # kernel-busy as SM activity: the least it can be
        bandwidth_bytes_per_second=0.1e12,
        namespace=namespace,
        pods=(f"{namespace}/{key}",),
    )


def plan_for(needs: list[WorkloadNeed], **policy: object):  # type: ignore[no-untyped-def]
    options = PlanOptions(candidate_gpu_ids=(H100,), time_limit_seconds=10.0, **policy)  # type: ignore[arg-type]
    buying = buyable(build_gpu_catalog(), needs, BillingConfig(), options.candidate_gpu_ids)
    return plan_with_policy(needs, buying, options)


def test_a_namespace_without_time_slicing_gets_none() -> None:
    needs = [unit(f"s{i}", "serving") for i in range(3)]
    free = plan_for(needs, mig=False)
    assert [p.mode for p in free.placements] == ["shared"]  # can fail: it time-slices today
    strict = plan_for(needs, mig=False, no_time_slicing_namespaces=frozenset({"serving"}))
    assert {p.mode for p in strict.placements} == {"whole"}
    with_mig = plan_for(needs, no_time_slicing_namespaces=frozenset({"serving"}))
    assert "shared" not in {p.mode for p in with_mig.placements}


def test_no_time_slicing_holds_across_namespaces_too() -> None:
    needs = [unit("a", "serving"), unit("b", "batch"), unit("c", "batch")]
    plan = plan_for(
        needs,
        mig=False,
        share_across_namespaces=True,
        no_time_slicing_namespaces=frozenset({"serving"}),
    )
    shared = [p for p in plan.placements if p.mode == "shared"]
    assert shared
    assert all("a" not in p.units for p in shared)


def test_a_mig_profile_quota_is_kept() -> None:
    needs = [unit(f"m{i}", "team-a") for i in range(4)]
    free = plan_for(needs, time_slicing=False)
    used = requests(free, needs)
    assert used[("team-a", "nvidia.com/mig-1g.10gb")] == 4  # can fail: MIG 1g for all today
    quota = (("team-a", "nvidia.com/mig-1g.10gb", 2),)
    kept = plan_for(needs, time_slicing=False, quotas=quota)
    used = requests(kept, needs)
    assert used[("team-a", "nvidia.com/mig-1g.10gb")] <= 2
    assert not any(note.startswith("quota exceeded") for note in kept.notes)


def test_a_gpu_quota_forces_units_onto_mig() -> None:
    needs = [unit(f"g{i}", "team-a") for i in range(3)]
    plan = plan_for(needs, mig=True, time_slicing=False, quotas=(("team-a", "nvidia.com/gpu", 0),))
    assert requests(plan, needs)[("team-a", "nvidia.com/gpu")] == 0


def test_a_quota_no_plan_meets_is_said() -> None:
    needs = [unit("big", "team-a", memory_gb=70.0, activity=0.9)]
    plan = plan_for(needs, quotas=(("team-a", "nvidia.com/gpu", 0),))
    assert any(note.startswith("quota exceeded: namespace team-a") for note in plan.notes)


def test_a_move_saving_less_than_the_minimum_does_not_move() -> None:
    needs = [unit("a", "team-a", memory_gb=30.0, activity=0.3)]
    options = {"candidate_gpu_ids": None}
    buying_needs = needs
    moved = plan_with_policy(
        buying_needs,
        buyable(build_gpu_catalog(), needs, BillingConfig(), None),
        PlanOptions(time_limit_seconds=10.0, **options),  # type: ignore[arg-type]
    )
    saving = (moved.current_usd_per_hour - moved.usd_per_hour) * 730
    assert saving > 0
    assert moved.placements[0].gpu_id != H100
    kept = plan_with_policy(
        needs,
        buyable(build_gpu_catalog(), needs, BillingConfig(), None),
        PlanOptions(time_limit_seconds=10.0, min_saving_usd_per_month=saving + 1.0),
    )
    assert [p.gpu_id for p in kept.placements] == [H100]
    assert kept.usd_per_hour == pytest.approx(6.88)
    assert any("min_saving_usd_per_month" in note for note in kept.notes)


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ('no_time_slicing_namespaces = ["Bad_NS"]', "plan.no_time_slicing_namespaces"),
        ("min_saving_usd_per_month = -1", "plan.min_saving_usd_per_month"),
        ("min_saving_usd_per_month = nan", "plan.min_saving_usd_per_month"),
        ("context_switch_ratio = 1.0", "plan.context_switch_ratio"),
        ("context_switch_ratio = -0.01", "plan.context_switch_ratio"),
        (
            '[[plan.quotas]]\nnamespace = "a"\nresource = "nvidia.com/gpu"\nlimit = -1',
            "plan.quotas.0.limit",
        ),
        (
            '[[plan.quotas]]\nnamespace = "a"\nresource = "amd.com/gpu"\nlimit = 1',
            "plan.quotas.0.resource",
        ),
        (
            '[[plan.quotas]]\nnamespace = "A B"\nresource = "nvidia.com/gpu"\nlimit = 1',
            "plan.quotas.0.namespace",
        ),
        ("typo = 1", "plan.typo"),
    ],
)
def test_a_bad_plan_section_names_the_field_and_exits_2(
    toml: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gpuwatch.toml"
    body = toml if toml.startswith("[[") else f"[plan]\n{toml}"
    path.write_text(body + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert any(line.startswith(f"{field}: ") for line in info.value.errors), info.value.errors
    from gpuwatch.cli import main

    assert main(["plan", "--config", str(path)]) == 2
    assert field in capsys.readouterr().err


def test_the_cli_passes_the_policy_to_the_plan(tmp_path: Path) -> None:
    path = tmp_path / "gpuwatch.toml"
    path.write_text(
        '[plan]\nno_time_slicing_namespaces = ["serving"]\nmin_saving_usd_per_month = 50.0\n'
        "context_switch_ratio = 0.02\n"
        '[[plan.quotas]]\nnamespace = "team-a"\nresource = "nvidia.com/mig-1g.10gb"\nlimit = 4\n'
    )
    config = load_config(path, environ={})
    from gpuwatch.cli.plan import plan_options

    options = plan_options(_parser().parse_args(["plan"]), config)
    assert options.no_time_slicing_namespaces == frozenset({"serving"})
    assert options.quotas == (("team-a", "nvidia.com/mig-1g.10gb", 4),)
    assert options.min_saving_usd_per_month == 50.0
    assert options.context_switch_ratio == 0.02
    assert run_plan is not None
    assert io is not None


# --- against the brute-force-checked solver --------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_no_time_slicing_equals_planning_that_namespace_without_it(seed: int) -> None:
    """The brute-force fleets of test_solve (two namespaces): forbidding time-slicing in
    team-a costs exactly team-a planned with time-slicing off plus team-b planned as
    before, and no GPU of team-a is time-sliced."""
    from gpuwatch.plan.solve import solve
    from tests.plan.oracle import assert_feasible
    from tests.plan.test_solve import CATALOG, MODELS, random_fleet

    units = random_fleet(seed)
    ids = tuple(g.id for g in MODELS)
    options = PlanOptions(candidate_gpu_ids=ids)
    plan = solve(units, CATALOG, replace(options, no_time_slicing_namespaces=frozenset({"team-a"})))
    team_a = [u for u in units if u.namespace == "team-a"]
    team_b = [u for u in units if u.namespace != "team-a"]
    alone = solve(team_a, CATALOG, replace(options, time_slicing=False)).usd_per_hour
    rest = solve(team_b, CATALOG, options).usd_per_hour
    assert plan.usd_per_hour == pytest.approx(alone + rest, abs=1e-9)
    assert_feasible(plan, units)
    namespace = {u.key: u.namespace for u in units}
    assert all(namespace[p.units[0]] != "team-a" for p in plan.placements if p.mode == "shared")


@pytest.mark.parametrize("seed", range(20))
def test_quotas_the_optimum_meets_cost_nothing(seed: int) -> None:
    """On the brute-force fleets: quotas set to what the unconstrained optimum requests
    (every resource of team-a at its count, 0 for each MIG profile it does not use) keep
    the optimum's cost, and the plan meets every one of them."""
    from gpuwatch.plan.mig import mig_table
    from gpuwatch.plan.solve import solve
    from tests.plan.oracle import assert_feasible, brute_force
    from tests.plan.test_solve import CATALOG, MODELS, random_fleet

    units = random_fleet(seed)
    options = PlanOptions(candidate_gpu_ids=tuple(g.id for g in MODELS))
    free = solve(units, CATALOG, options)
    used = requests(free, units)
    profiles = {p.name for g in MODELS if (t := mig_table(g.id)) is not None for p in t.profiles}
    resources = ["nvidia.com/gpu", *(f"nvidia.com/mig-{name}" for name in sorted(profiles))]
    quotas = tuple(("team-a", r, used[("team-a", r)]) for r in resources)
    plan = solve(units, CATALOG, replace(options, quotas=quotas))
    assert plan.usd_per_hour == pytest.approx(brute_force(units, MODELS), abs=1e-9)
    assert_feasible(plan, units)
    after = requests(plan, units)
    assert all(after[(ns, r)] <= limit for ns, r, limit in quotas), (quotas, after)


def test_units_without_kernel_busy_time_are_not_time_sliced_and_noted() -> None:
    """Three small units that time-slice onto one H100 with kernel-busy time known; without
    it (a history written before schema 9) each counts as all of its GPU's time: none
    shares, and a note says how many units lacked it."""
    known = [unit(f"s{i}", "batch") for i in range(3)]
    assert [p.mode for p in plan_for(known, mig=False).placements] == ["shared"]
    assert not any("kernel-busy" in note for note in plan_for(known, mig=False).notes)
    blind = [replace(n, kernel_busy_ratio=None) for n in known]
    plan = plan_for(blind, mig=False)
    assert {p.mode for p in plan.placements} == {"whole"}
    assert "3 units without kernel-busy time" in " ".join(plan.notes)
