"""The agent's data sources in one table: name, class, on by default, what turns it on.

The wiring (`gpuwatch.agent.wiring`) asks `sources_on()` which sources this agent runs
and builds those; a new source is one `Source` entry here plus its stage in
`gpuwatch.agent.pipeline`. Each name is the `collector` label of its
`gpuwatch_collector_success` series, or, for sources with several independent
endpoints, the prefix of their own health families. Classes are named by path, not
imported: the attribution source loads the kubelet client (h2), which the plain agent
never does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Switches:
    """What, in a config (and a simulated scenario), turns the optional sources on."""

    kubernetes_enabled: bool
    token_sources: int
    slurm_enabled: bool = False


@dataclass(frozen=True)
class Source:
    """One data source of the agent."""

    name: str
    cls: str  # "module:Class", imported by the wiring only when the source is on
    on_by_default: bool
    on: Callable[[Switches], bool]
    schedule: str


def _always(_: Switches) -> bool:
    return True


SOURCES: tuple[Source, ...] = (
    Source(
        "nvml",
        "gpuwatch.collectors.nvml:NvmlCollector",
        True,
        _always,
        "in every tick (agent.interval_seconds)",
    ),
    Source(
        "nvml_slow",
        "gpuwatch.collectors.nvml:NvmlCollector",
        True,
        _always,
        "its own job (agent.slow_interval_seconds)",
    ),
    Source("xid", "gpuwatch.nvml:NvmlSampler", True, _always, "event-driven (a thread)"),
    Source(
        "attribution",
        "gpuwatch.collectors.attribution:AttributionCollector",
        False,
        lambda s: s.kubernetes_enabled,
        "in every tick; pods listed on their own job (kubernetes.list_interval_seconds)",
    ),
    Source(
        "slurm",
        "gpuwatch.collectors.slurm:SlurmCollector",
        False,
        lambda s: s.slurm_enabled,
        "in every tick; jobs listed on their own job (slurm.list_interval_seconds)",
    ),
    Source(
        "tokens",
        "gpuwatch.tokens.collector:TokenCollector",
        False,
        lambda s: s.token_sources > 0,
        "a 1 s thread, each source when due (own health: gpuwatch_token_source_up)",
    ),
    Source(
        "billing",
        "gpuwatch.billing.collector:BillingCollector",
        True,
        _always,
        "a 60 s thread, per-tier TTLs; AWS tiers opt-in (own health: gpuwatch_billing_up)",
    ),
)
"""Every data source, in the order the tick meets them."""


def sources_on(switches: Switches) -> frozenset[str]:
    """The names of the sources these switches turn on."""
    return frozenset(source.name for source in SOURCES if source.on(switches))
