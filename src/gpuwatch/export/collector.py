"""The prometheus-client collector: renders the latest snapshot, never calls NVML.

Registered on the agent's own `CollectorRegistry` (no global registry, no global
gauges). Each scrape yields fresh families from whatever snapshot is newest, and the
families its tick published with it (the sources that report their own health): one
tick, nothing live.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gpuwatch.export.analysis_families import analysis_families
from gpuwatch.export.attribution_families import attribution_families
from gpuwatch.export.cost_families import cost_families
from gpuwatch.export.dcgm import DcgmNaming, dcgm_families
from gpuwatch.export.families import ExportOptions, gpuwatch_families
from gpuwatch.store import SnapshotStore


class SnapshotCollector(Collector):
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
        """`dcgm_naming`: which of dcgm-exporter's naming sets the DCGM families use."""
        self._store = store
        self._options = options
        self._dcgm_compat = dcgm_compat
        self._dcgm_naming: DcgmNaming = dcgm_naming
        self._hostname = hostname

    def collect(self) -> Iterator[Metric]:
        snapshot, published = self._store.published()
        yield from gpuwatch_families(snapshot, self._options)
        if snapshot is not None:
            yield from analysis_families(snapshot)
            yield from cost_families(snapshot)
            yield from attribution_families(snapshot)
        yield from published
        if self._dcgm_compat:
            yield from dcgm_families(snapshot, self._hostname, self._dcgm_naming)


def build_registry(collector: SnapshotCollector) -> CollectorRegistry:
    """A fresh registry holding only the snapshot collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
