"""Time of one pod-resources `List` call: the agent's h2 client against grpcio's.

Both clients call the simulated kubelet (a real `grpc.server` on a unix socket, in this
process) 100 times on one reused connection, for a small node (8 pods) and a large one
(3,000 pods, a 240 KiB reply); the CPU column is this process's, so it includes the
server's share. The agent makes this call once per `list_interval_seconds` (5 s).

    python bench/podresources_call.py
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from benchlib import format_table, machine_info
from gpuwatch.kube.grpc_unary import UnaryChannel
from gpuwatch.kube.podresources import (
    LIST_METHOD,
    MAX_RECEIVE_BYTES,
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
)
from gpuwatch.simulate.kubelet import SimulatedKubelet

CALLS = 100
UUID = "2fc0195c-3848-d59d-2cca-b96e3887fa21"


def _pods(count: int) -> list[PodAllocation]:
    devices = (ContainerDevices("nvidia.com/gpu", (f"GPU-{UUID}",)),)
    container = (ContainerAllocation("c", devices),)
    return [PodAllocation("ns", f"pod-{i:05d}", container) for i in range(count)]


def _identity(data: bytes) -> bytes:
    return data


def _time(call: Callable[[], bytes]) -> tuple[int, float, float]:
    """(reply bytes, wall ms per call, CPU ms per call) over `CALLS` calls."""
    size = len(call())  # opens the connection
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(CALLS):
        call()
    wall_ms = (time.perf_counter() - wall) * 1e3 / CALLS
    return size, wall_ms, (time.process_time() - cpu) * 1e3 / CALLS


def _measure(count: int) -> list[list[str]]:
    """One row per client for a kubelet listing `count` pods."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="gw-") as folder:
        path = Path(folder) / "kubelet.sock"
        kubelet = SimulatedKubelet(path, _pods(count))
        kubelet.start()
        unary = UnaryChannel(path, max_receive_bytes=MAX_RECEIVE_BYTES)
        channel = grpc.insecure_channel(
            f"unix:{path}", options=[("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
        )
        stub = channel.unary_unary(
            LIST_METHOD, request_serializer=_identity, response_deserializer=_identity
        )
        try:
            for name, call in (
                ("h2 (the agent's)", lambda: unary.call(LIST_METHOD, b"", 5.0)),
                ("grpcio", lambda: stub(b"", timeout=5.0)),
            ):
                size, wall, cpu = _time(call)
                rows.append([f"{count}", f"{size:,}", name, f"{wall:.2f}", f"{cpu:.2f}"])
        finally:
            unary.close()
            channel.close()
            kubelet.stop()
    return rows


def main() -> None:
    """Print one row per node size and client."""
    rows = [row for count in (8, 3000) for row in _measure(count)]
    print(", ".join(f"{key}: {value}" for key, value in machine_info().items()))
    headers = ["pods", "reply bytes", "client", "wall ms/call", "CPU ms/call"]
    print(format_table(headers, rows, left=3))


if __name__ == "__main__":
    main()
