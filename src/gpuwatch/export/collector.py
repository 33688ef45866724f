"""The prometheus-client collector: renders the latest snapshot, never calls NVML.

Registered on the agent's own `CollectorRegistry` (no global registry, no global
gauges). Each scrape yields fresh families from whatever snapshot is newest, and the
families its tick published with it (the sources that report their own health): one
tick, nothing live.

The families come in groups, one per module (`families`, `analysis_families`,
`cost_families`, `attribution_families`, `slurm_families`, `dcgm`), each a `FamilyGroup`
that declares the names and types it may yield (`describe()`, as client_python's registry reads it).
The collector registers its groups on a registry of their own when it is built, so two
groups that would emit one family (or one series name) fail at start-up with
prometheus-client's `DuplicateTimeseries`, not on a scrape; the agent's registry sees
the union, and a scrape reads the store once for every group, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import CollectorRegistry

from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.export.analysis_families import ANALYSIS_FAMILIES, analysis_families
from gpuwatch.export.attribution_families import ATTRIBUTION_FAMILIES, attribution_families
from gpuwatch.export.cost_families import COST_FAMILIES, cost_families
from gpuwatch.export.dcgm import DcgmNaming, dcgm_declared, dcgm_families
from gpuwatch.export.families import GPUWATCH_FAMILIES, ExportOptions, gpuwatch_families
from gpuwatch.export.slurm_families import SLURM_FAMILIES, slurm_families
from gpuwatch.store import SnapshotStore

Render = Callable[[FleetSnapshot | None, tuple[Metric, ...]], Iterable[Metric]]
"""A group's families for one published tick: (snapshot, the families published with it)."""


@dataclass(frozen=True, slots=True)
class FamilyGroup:
    """One module's families: `render` draws them from a tick, `declared` names every
    family (name, type; a counter without `_total`) `render` may yield.

    A collector in client_python's sense for the start-up check: `describe()` gives the
    declared families, `collect()` the same (no samples), so registering it never renders.
    """

    name: str
    declared: tuple[tuple[str, str], ...]
    render: Render

    def describe(self) -> Iterator[Metric]:
        """The declared families, without samples (what a registry checks names with)."""
        for name, kind in self.declared:
            yield Metric(name, f"declared by the {self.name} family group", kind)

    def collect(self) -> Iterator[Metric]:
        """The declaration again: a `FamilyGroup` is rendered by `SnapshotCollector`."""
        return self.describe()


def _published(_snapshot: FleetSnapshot | None, published: tuple[Metric, ...]) -> Iterable[Metric]:
    return published


def snapshot_groups(
    options: ExportOptions,
    *,
    dcgm_compat: bool = False,
    dcgm_naming: DcgmNaming = "classic",
    hostname: str = "",
) -> tuple[FamilyGroup, ...]:
    """The agent's family groups, in exposition order. The families the tick published
    (tokens, needs, billing, alerts, history, attribution health) are the parts' own and
    declare nothing here."""

    def gpuwatch(snapshot: FleetSnapshot | None, _: tuple[Metric, ...]) -> Iterable[Metric]:
        return gpuwatch_families(snapshot, options)

    def derived(render: Callable[[FleetSnapshot], Iterable[Metric]]) -> Render:
        def rendered(snapshot: FleetSnapshot | None, _: tuple[Metric, ...]) -> Iterable[Metric]:
            return () if snapshot is None else render(snapshot)

        return rendered

    def dcgm(snapshot: FleetSnapshot | None, _: tuple[Metric, ...]) -> Iterable[Metric]:
        return dcgm_families(snapshot, hostname, dcgm_naming)

    groups = [
        FamilyGroup("gpuwatch", GPUWATCH_FAMILIES, gpuwatch),
        FamilyGroup("analysis", ANALYSIS_FAMILIES, derived(analysis_families)),
        FamilyGroup("cost", COST_FAMILIES, derived(cost_families)),
        FamilyGroup("attribution", ATTRIBUTION_FAMILIES, derived(attribution_families)),
        FamilyGroup("slurm", SLURM_FAMILIES, derived(slurm_families)),
        FamilyGroup("published", (), _published),
    ]
    if dcgm_compat:
        groups.append(FamilyGroup("dcgm", dcgm_declared(dcgm_naming), dcgm))
    return tuple(groups)


def check_groups(groups: Sequence[FamilyGroup]) -> None:
    """Register every group on a registry of their own; raises prometheus-client's
    `DuplicateTimeseries` (a ValueError) when two groups declare one family or series."""
    registry = CollectorRegistry(auto_describe=False)
    for group in groups:
        registry.register(group)


class SnapshotCollector:
    """Yields the gpuwatch (and optionally DCGM-compatible) families of the latest snapshot."""

    def __init__(
        self,
        store: SnapshotStore,
        options: ExportOptions,
        *,
        dcgm_compat: bool = False,
        dcgm_naming: DcgmNaming = "classic",
        hostname: str = "",
    ) -> None:
        """`dcgm_naming`: which of dcgm-exporter's naming sets the DCGM families use.
        Raises `DuplicateTimeseries` when two of its groups declare one family."""
        self._store = store
        self.groups = snapshot_groups(
            options, dcgm_compat=dcgm_compat, dcgm_naming=dcgm_naming, hostname=hostname
        )
        check_groups(self.groups)

    def describe(self) -> Iterator[Metric]:
        """Every group's declared families (read once, when a registry registers this)."""
        for group in self.groups:
            yield from group.describe()

    def collect(self) -> Iterator[Metric]:
        snapshot, published = self._store.published()
        for group in self.groups:
            yield from group.render(snapshot, published)


def build_registry(collector: SnapshotCollector) -> CollectorRegistry:
    """A fresh registry holding only the snapshot collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
