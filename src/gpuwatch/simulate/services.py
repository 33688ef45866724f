"""Loopback services a simulated scenario brings with it (its inference servers' /metrics).

`ScenarioServices` starts one `SimulatedVllmServer` per `[[token_servers]]` entry of the
scenario, on 127.0.0.1, on the stand-in's simulated time, and tells the agent which token
sources to scrape — so the demo's cost per token is read over real HTTP, exactly as a
real server's would be. A scenario with `[[pods]]` also gets a `SimulatedCluster` (the
kubelet's pod-resources socket, cgroup files, pod-log folders), and the agent's
`[kubernetes]` section points at it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwatch.clock import Clock
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.simulate.stand_in import SimulatedNvml
from gpuwatch.simulate.vllm_server import SimulatedVllmServer, activity_rate
from gpuwatch.tokens import TokenSourceConfig

if TYPE_CHECKING:
    from gpuwatch.simulate.cluster import SimulatedCluster


class ScenarioServices:
    """The scenario's simulated servers; `start()` before the agent, `stop()` after."""

    def __init__(self, nv: SimulatedNvml, clock: Clock) -> None:
        start_time = clock.time() - nv.scenario_time()
        self._entries = nv.scenario.token_servers
        self._servers = [
            SimulatedVllmServer(
                clock,
                start_time,
                activity_rate(
                    nv,
                    entry.gpu_index,
                    entry.prompt_tokens_per_second,
                    entry.generation_tokens_per_second,
                ),
                model_name=entry.model_name,
                prefix_cache_hit_ratio=entry.prefix_cache_hit_ratio,
            )
            for entry in self._entries
        ]
        self.cluster: SimulatedCluster | None = None
        if nv.scenario.pods:  # grpc and protobuf only for a scenario with a kubelet
            from gpuwatch.simulate.cluster import SimulatedCluster  # noqa: PLC0415

            self.cluster = SimulatedCluster(nv)

    def start(self) -> None:
        """Start every server on a free loopback port, and the simulated kubelet."""
        for server in self._servers:
            server.start()
        if self.cluster is not None:
            self.cluster.start()

    def kubernetes_config(self) -> KubernetesConfig | None:
        """`[kubernetes]` for the simulated node; None when the scenario has no pods."""
        return None if self.cluster is None else self.cluster.kubernetes_config()

    def token_sources(self) -> tuple[TokenSourceConfig, ...]:
        """Token sources pointing at the started servers."""
        return tuple(
            TokenSourceConfig(
                name=f"simulated-{entry.kind}-gpu{entry.gpu_index}",
                url=server.url,
                kind=entry.kind,
                gpus=[entry.gpu_index],
                interval_seconds=entry.interval_seconds,
            )
            for entry, server in zip(self._entries, self._servers, strict=True)
        )

    def stop(self) -> None:
        """Stop every server."""
        for server in self._servers:
            server.stop()
        if self.cluster is not None:
            self.cluster.stop()
