"""`/status.json` on the agent: the newest snapshot, never an NVML call, names kept local."""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.export.server import MetricsServer
from gpuwatch.export.status_json import FORMAT
from tests.conftest import scenario_agent, simulated
from tests.support.counting import CountingNvml


def counting_agent(*, per_process_metrics: bool = False) -> tuple[Agent, ManualClock, CountingNvml]:
    nv, clock = simulated("demo")
    counting = CountingNvml(nv)
    config = Config(
        agent=AgentConfig(hostname="test-host", per_process_metrics=per_process_metrics)
    )
    return scenario_agent(config, counting, clock), clock, counting


def sampling_calls(counting: CountingNvml) -> int:
    """NVML calls so far but the XID listener's: its own thread waits on the event set
    (`nvmlEventSetWait`) whenever it likes, whatever the HTTP server does."""
    return sum(n for name, n in counting.calls.items() if name != "nvmlEventSetWait")


@contextlib.contextmanager
def serving(agent: Agent, host: str = "127.0.0.1") -> Iterator[MetricsServer]:
    """The agent's HTTP server without its scheduler: nothing samples while it serves."""
    server = MetricsServer(host, 0, agent.registry, agent.readiness, status=agent.status_body)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def get(url: str) -> tuple[int, str, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=5) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["Content-Type"], error.read()


def test_status_json_serves_the_newest_snapshot_without_calling_nvml() -> None:
    agent, clock, counting = counting_agent()
    try:
        with serving(agent) as server:
            url = f"http://127.0.0.1:{server.port}/status.json"
            assert get(url)[0] == 503  # no sample yet
            for _ in range(5):
                clock.advance(1.0)
                agent.tick()
            before = sampling_calls(counting)
            replies = [get(url) for _ in range(3)]
            assert sampling_calls(counting) == before
            root = get(f"http://127.0.0.1:{server.port}/")[2]
    finally:
        agent.stop()
    for status, content_type, body in replies:
        assert (status, content_type) == (200, "application/json")
        document = json.loads(body)
        assert document["format"] == FORMAT
        assert document["source"] == "agent"
        assert document["timestamp_seconds"] == clock.time()
        held = document["gpus"][2]
        assert held["processes"][0]["name"].startswith("/opt/conda/bin/python")  # loopback
    assert b"/status.json" in root


def test_process_names_stay_on_this_host_unless_already_exported() -> None:
    for per_process, expected in ((False, None), (True, "python3 train.py")):
        agent, clock, _ = counting_agent(per_process_metrics=per_process)
        try:
            clock.advance(1.0)
            agent.tick()
            remote = agent.status_body(False)
            local = agent.status_body(True)
        finally:
            agent.stop()
        assert remote is not None
        assert local is not None
        remote_name = json.loads(remote)["gpus"][0]["processes"][0]["name"]
        local_name = json.loads(local)["gpus"][0]["processes"][0]["name"]
        assert local_name.startswith("python3 train.py")
        assert remote_name == (None if expected is None else local_name)


def own_address() -> str | None:
    """A non-loopback address of this machine, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_a_client_on_the_interface_the_agent_listens_on_is_this_host() -> None:
    address = own_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    agent, clock, _ = counting_agent()
    try:
        clock.advance(1.0)
        agent.tick()
        with serving(agent, address) as server:
            status, _, body = get(f"http://{address}:{server.port}/status.json")
    finally:
        agent.stop()
    assert status == 200
    document: Any = json.loads(body)
    assert document["gpus"][0]["processes"][0]["name"].startswith("python3 train.py")
