"""The export registry: each family group declares what it emits (`describe()`), so a
family or series name two groups would both emit fails at start-up, not on a scrape."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import CollectorRegistry, DuplicateTimeseries

from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.export.collector import (
    FamilyGroup,
    SnapshotCollector,
    check_groups,
    snapshot_groups,
)
from gpuwatch.export.families import ExportOptions
from gpuwatch.store import SnapshotStore
from tests.conftest import make_agent
from tests.test_metric_reference import (
    attribution_metric_names,
    reclaim_metric_names,
    slurm_metric_names,
    snapshots,
)


def _nothing(_snapshot: FleetSnapshot | None, _published: tuple[Metric, ...]) -> Iterable[Metric]:
    return ()


def test_two_groups_declaring_one_family_fail_to_register() -> None:
    first = FamilyGroup("first", (("gpuwatch_gpu_up", "gauge"),), _nothing)
    second = FamilyGroup("second", (("gpuwatch_gpu_up", "gauge"),), _nothing)
    with pytest.raises(DuplicateTimeseries, match="gpuwatch_gpu_up"):
        check_groups((first, second))


def test_a_counter_and_a_gauge_of_its_series_name_fail_to_register() -> None:
    counter = FamilyGroup("counter", (("gpuwatch_gpu_cost_usd", "counter"),), _nothing)
    gauge = FamilyGroup("gauge", (("gpuwatch_gpu_cost_usd_total", "gauge"),), _nothing)
    with pytest.raises(DuplicateTimeseries, match="gpuwatch_gpu_cost_usd_total"):
        check_groups((counter, gauge))


@pytest.mark.parametrize("naming", ["classic", "4.9"])
def test_the_agents_groups_register_without_duplicates(naming: str) -> None:
    groups = snapshot_groups(
        ExportOptions(per_process_metrics=True),
        dcgm_compat=True,
        dcgm_naming="classic" if naming == "classic" else "4.9",
    )
    check_groups(groups)
    assert [g.name for g in groups] == [
        "gpuwatch",
        "analysis",
        "cost",
        "attribution",
        "slurm",
        "published",
        "dcgm",
    ]


def test_the_agents_published_families_clash_with_no_declared_one() -> None:
    agent, clock = make_agent("demo", dcgm_compat=True, per_process_metrics=True)
    try:
        for _ in range(3):
            clock.advance(1.0)
            agent.tick()
        _, published = agent.store.published()
        assert published, "the tick publishes the parts' own families"

        class Published:
            def describe(self) -> Iterator[Metric]:
                return iter(published)

            def collect(self) -> Iterator[Metric]:
                return iter(published)

        registry = CollectorRegistry(auto_describe=False)
        registry.register(agent.collector)
        registry.register(Published())
    finally:
        agent.stop()


def _declared(groups: Iterable[FamilyGroup]) -> set[tuple[str, str]]:
    return {family for group in groups for family in group.declared}


def test_every_family_a_group_renders_is_declared_with_its_type() -> None:
    for snapshot in snapshots(("demo",))[::50]:
        for naming in ("classic", "4.9"):
            groups = snapshot_groups(
                ExportOptions(per_process_metrics=True),
                dcgm_compat=True,
                dcgm_naming="classic" if naming == "classic" else "4.9",
            )
            for group in groups:
                rendered = {(f.name, f.type) for f in group.render(snapshot, ())}
                assert rendered <= set(group.declared), (group.name, rendered - set(group.declared))


def test_attribution_and_pod_cost_families_are_declared() -> None:
    groups = snapshot_groups(ExportOptions())
    suffixes = {"counter": "_total", "info": "_info"}
    declared = {name + suffixes.get(kind, "") for name, kind in _declared(groups)}
    health = {"gpuwatch_attribution_up", "gpuwatch_attribution_reason_info"}  # published
    assert attribution_metric_names() - health <= declared


def test_slurm_families_are_declared_with_their_types() -> None:
    (group,) = [g for g in snapshot_groups(ExportOptions()) if g.name == "slurm"]
    suffixes = {"counter": "_total", "info": "_info"}
    declared = {name + suffixes.get(kind, "") for name, kind in group.declared}
    # reclaim's counters are the Slurm collector's own (published live, not rendered
    # from the snapshot), so the snapshot group does not declare them
    assert slurm_metric_names() - reclaim_metric_names() == declared


def test_describe_reads_declarations_and_never_the_store() -> None:
    class NoReads(SnapshotStore):
        def published(self) -> tuple[FleetSnapshot | None, tuple[Metric, ...]]:
            raise AssertionError("describe() must not render")

    collector = SnapshotCollector(NoReads(), ExportOptions(), dcgm_compat=True)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    assert {m.name for m in collector.describe()} >= {"gpuwatch_gpu_up", "DCGM_FI_DEV_GPU_UTIL"}
