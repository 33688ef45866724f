"""A simulated Kubernetes node for the attribution tests: the stand-in's scenario served by
a real kubelet pod-resources socket (`SimulatedCluster`) and an opened agent listing it.

Kept out of `tests.conftest`, which the plain-import checks load: the simulated kubelet
imports grpc.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gpuwatch.agent import Agent, AgentOptions
from gpuwatch.config import Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.simulate.cluster import SimulatedCluster
from tests.conftest import scenario_agent


@contextmanager
def kube_node(
    config: Config, nv: Any, clock: ManualClock, *, scenario_extras: bool = True
) -> Iterator[tuple[Agent, SimulatedCluster]]:
    """The started cluster serving `nv`'s pods and an opened agent whose kubelet it is;
    both stopped on exit (the agent first). `scenario_extras`: the agent gets the
    scenario's workloads and prices as `gpuwatch run --simulate` adds them
    (`tests.conftest.scenario_agent`); else it is built from `config` alone."""
    cluster = SimulatedCluster(nv)
    cluster.start()
    try:
        if scenario_extras:
            agent = scenario_agent(config, nv, clock, kubernetes=cluster.kubernetes_config())
        else:
            agent = Agent(
                config,
                nv,
                clock,
                AgentOptions(environ={}, kubernetes=cluster.kubernetes_config()),
            )
            agent.open()
        try:
            yield agent, cluster
        finally:
            agent.stop()
    finally:
        cluster.stop()


def listed_tick(agent: Agent, clock: ManualClock) -> FleetSnapshot:
    """List the kubelet, advance the clock 1 s, tick: one sample with a fresh listing."""
    agent.refresh_attribution()
    clock.advance(1.0)
    return agent.tick()
