"""Loopback services a simulated scenario brings with it (its inference servers' /metrics).

`ScenarioServices` starts one `SimulatedVllmServer` per `[[token_servers]]` entry of the
scenario, on 127.0.0.1, on the stand-in's simulated time, and tells the agent which token
sources to scrape — so the demo's cost per token is read over real HTTP, exactly as a
real server's would be. A scenario with `[[pods]]` also gets a `SimulatedCluster` (the
kubelet's pod-resources socket, cgroup files, pod-log folders), and the agent's
`[kubernetes]` section points at it.

They run in the agent's process by default. On a node they are other processes, so
`python -m gpuwatch.simulate.services SCENARIO --speed S --endpoints FILE` runs them
alone, until SIGTERM or SIGINT, and writes where they listen to FILE
(`gpuwatch.simulate.endpoints`) for `gpuwatch run --simulate SCENARIO --services FILE`:
the benchmarks measure the agent's memory that way, without the servers'.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from gpuwatch.analysis.measured import served_model
from gpuwatch.core.clock import Clock, ScaledClock
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.simulate.endpoints import endpoints_document, write_endpoints
from gpuwatch.simulate.scenario import ScenarioError, SimulatedTokenServer, load_scenario
from gpuwatch.simulate.stand_in import SimulatedNvml
from gpuwatch.simulate.vllm_server import SimulatedVllmServer, activity_rate, vllm_num_gpu_blocks
from gpuwatch.sizing import build_model_catalog, match_served_model
from gpuwatch.tokens import TokenSourceConfig

if TYPE_CHECKING:
    from gpuwatch.simulate.cluster import SimulatedCluster


class ScenarioServices:
    """The scenario's simulated servers; `start()` before the agent, `stop()` after."""

    def __init__(self, nv: SimulatedNvml, clock: Clock, *, cluster: bool = True) -> None:
        """`cluster` false leaves the simulated kubelet out (a replay without pods)."""
        start_time = clock.time() - nv.scenario_time()
        self.scenario_start = start_time
        self._entries = nv.scenario.token_servers
        self._servers: list[SimulatedVllmServer] = []
        if self._entries:
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
                    num_gpu_blocks=kv_cache_blocks(nv, entry),
                    block_size=entry.block_size,
                    gpu_memory_utilization=entry.gpu_memory_utilization,
                )
                for entry in self._entries
            ]
        self.cluster: SimulatedCluster | None = None
        if cluster and nv.scenario.pods:
            # lazy: grpc and protobuf only for a scenario with a kubelet
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

    def fetch(self, url: str, timeout: float) -> bytes:
        """A token collector's fetch that reads a started server's page in process, without
        HTTP and without the families no token source reads (`gpuwatch status --simulate`
        replays thousands of ticks); raises ConnectionRefusedError for a URL no server
        here serves."""
        del timeout
        for server in self._servers:
            if server.url == url:
                return server.render_read()
        raise ConnectionRefusedError(f"no simulated server at {url}")

    def stop(self) -> None:
        """Stop every server."""
        for server in self._servers:
            server.stop()
        if self.cluster is not None:
            self.cluster.stop()


def kv_cache_blocks(nv: SimulatedNvml, entry: SimulatedTokenServer) -> int | None:
    """The KV cache blocks a vLLM server for `entry` would get on its GPU
    (`vllm_num_gpu_blocks`): the GPU's memory as CUDA sees it, the weights and KV bytes
    per token of the model its name matches in the sizing catalog (bf16 unless the name
    says a layout); None when the catalog does not know the model."""
    match = match_served_model(entry.model_name, build_model_catalog())
    if match.model is None:
        return None
    model = served_model(match.model, match.layout, "auto")
    if model is None:
        return None
    device = nv.scenario.gpus[entry.gpu_index].device
    total = (device.memory_mib - device.reserved_mib) * 2**20
    return vllm_num_gpu_blocks(
        total,
        model.weights_bytes,
        model.kv_bytes_per_token,
        gpu_memory_utilization=entry.gpu_memory_utilization,
        block_size=entry.block_size,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m gpuwatch.simulate.services`: serve a scenario's services alone."""
    parser = argparse.ArgumentParser(
        prog="python -m gpuwatch.simulate.services",
        description="Run a scenario's simulated kubelet and inference servers in this "
        "process, for `gpuwatch run --simulate SCENARIO --services FILE`.",
    )
    parser.add_argument("scenario", help="the scenario the agent simulates")
    parser.add_argument("--speed", type=float, default=1.0, help="as the agent's --speed")
    parser.add_argument(
        "--endpoints", type=Path, required=True, help="write where they listen here (JSON)"
    )
    args = parser.parse_args(argv)
    if not args.speed > 0:
        parser.error("--speed must be positive")
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"gpuwatch: {exc}", file=sys.stderr)
        return 2
    clock = ScaledClock(args.speed)
    services = ScenarioServices(SimulatedNvml(scenario, clock=clock), clock)
    stop = threading.Event()

    def _on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    services.start()
    try:
        document = endpoints_document(
            args.scenario,
            args.speed,
            scenario_start=services.scenario_start,
            simulated_now=clock.time(),
            kubernetes=services.kubernetes_config(),
            sources=services.token_sources(),
        )
        write_endpoints(args.endpoints, document)
        stop.wait()
    finally:
        args.endpoints.unlink(missing_ok=True)
        services.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
