"""The agent in its own PID namespace, as in the chart's pod without hostPID: NVML reports
host PIDs that its /proc does not have. `unshare --pid --fork --mount-proc` gives the
agent a /proc of its own; the demo's simulated kubelet (real gRPC on a unix socket) and
node run in another process (`python -m gpuwatch.simulate.services`).

With the host's /proc given (`kubernetes.proc_root`, the chart's /host/proc mount; here
the simulated node's), every busy pod's process joins its pod and no busy pod is
allocated-idle. Without it (`proc_root = "/proc"`, the agent's own), no process joins,
and no pod whose GPU is busy is reported allocated-idle: unknown, with its reason."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent_process import fetch, samples, start_agent
from tests.conftest import free_port, require_binary

UNSHARE = (
    *(() if os.geteuid() == 0 else ("--map-root-user",)),  # a new PID namespace needs root
    "--pid",
    "--fork",
    "--mount-proc",
    "--kill-child=SIGTERM",
)
BUSY_PODS = {"llama3-sft-0": 48213, "vllm-llama-8b-0": 51877}  # pod: its process on GPU 0, 3


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The demo's services in their own process; yields their endpoints file."""
    path = tmp_path_factory.mktemp("services") / "endpoints.json"
    argv = [sys.executable, "-m", "gpuwatch.simulate.services", "demo", "--speed", "10"]
    services = subprocess.Popen([*argv, "--endpoints", str(path)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not path.exists():
            assert services.poll() is None, services.communicate()[1].decode()
            assert time.monotonic() < deadline, "no endpoints file"
            time.sleep(0.1)
        yield path
    finally:
        services.send_signal(signal.SIGTERM)
        services.communicate(timeout=10)


def _in_own_pid_namespace(endpoints: Path, tmp_path: Path, proc_root: str | None) -> str:
    """/metrics of the agent run under `unshare` once it lists pods; `proc_root` None
    keeps the endpoints' (the simulated node's /proc)."""
    document = json.loads(endpoints.read_text(encoding="utf-8"))
    if proc_root is not None:
        document["kubernetes"]["proc_root"] = proc_root
    mine = tmp_path / "endpoints.json"
    mine.write_text(json.dumps(document), encoding="utf-8")
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[agent]\nstate_dir = "{tmp_path / "state"}"\nper_process_metrics = true\n',
        encoding="utf-8",
    )
    port = free_port()
    agent = start_agent(
        ["--simulate", "demo", "--services", str(mine), "--config", str(config)],
        port,
        prefix=(require_binary("unshare"), *UNSHARE),
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            text = fetch(f"http://127.0.0.1:{port}/metrics")
            if "gpuwatch_gpu_pod_info{" in text and "gpuwatch_process_memory_used_bytes{" in text:
                return text
            assert time.monotonic() < deadline, "the agent never attributed the demo's GPUs"
            time.sleep(0.2)
    finally:
        _stop(agent)


def _stop(unshare: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the agent: unshare ignores it and waits for its child."""
    children = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children")
    for pid in children.read_text(encoding="ascii").split():
        os.kill(int(pid), signal.SIGTERM)
    try:
        _, err = unshare.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        unshare.kill()  # --kill-child: the agent goes with it
        unshare.communicate()
        raise
    assert unshare.returncode == 0, err.decode()  # the agent's own exit status


def _by_pod(text: str, name: str) -> dict[str, float]:
    return {dict(labels)["pod"]: value for (n, labels), value in samples(text).items() if n == name}


def test_unshare_gives_the_agent_a_proc_without_the_gpu_pids() -> None:
    result = subprocess.run(
        [require_binary("unshare"), *UNSHARE, "ls", "/proc"],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    pids = {int(name) for name in result.stdout.split() if name.isdigit()}
    assert pids
    assert max(pids) < 100
    assert not set(BUSY_PODS.values()) & pids


def test_with_the_host_proc_every_busy_pod_joins(endpoints: Path, tmp_path: Path) -> None:
    text = _in_own_pid_namespace(endpoints, tmp_path, None)
    process_pods = {
        int(dict(labels)["pid"]): dict(labels)["pod"]
        for (name, labels), _ in samples(text).items()
        if name == "gpuwatch_process_memory_used_bytes"
    }
    assert {pid: process_pods.get(pid) for pid in BUSY_PODS.values()} == {
        pid: pod for pod, pid in BUSY_PODS.items()
    }
    idle = _by_pod(text, "gpuwatch_gpu_pod_allocated_idle")
    assert {pod: idle[pod] for pod in BUSY_PODS} == dict.fromkeys(BUSY_PODS, 0.0)
    assert idle["notebook-alice"] == 0.0  # its kernel runs (and holds memory) there
    assert _by_pod(text, "gpuwatch_gpu_pod_allocated_idle_unknown") == {}
    unmapped = [v for (n, _), v in samples(text).items() if n == "gpuwatch_gpu_unmapped_processes"]
    assert unmapped == [0.0] * 4


def test_without_the_host_proc_no_busy_pod_is_allocated_idle(
    endpoints: Path, tmp_path: Path
) -> None:
    text = _in_own_pid_namespace(endpoints, tmp_path, "/proc")
    assert all(
        dict(labels).get("pod", "") == ""
        for (name, labels), _ in samples(text).items()
        if name == "gpuwatch_process_memory_used_bytes"
    )
    idle = _by_pod(text, "gpuwatch_gpu_pod_allocated_idle")
    unknown = _by_pod(text, "gpuwatch_gpu_pod_allocated_idle_unknown")
    # the trainer holds GPU 0 alone while it works: not idle; the vLLM server shares
    # GPU 3 with the canary: whose process runs there is unknown for both
    assert idle == {"llama3-sft-0": 0.0, "batch-eval-7f9c": 1.0}
    assert set(unknown) == {"notebook-alice", "vllm-llama-8b-0", "vllm-llama-8b-canary"}
    reasons = {
        dict(labels)["reason"]
        for (name, labels), _ in samples(text).items()
        if name == "gpuwatch_gpu_pod_allocated_idle_unknown"
    }
    assert reasons == {"pid_unmapped"}
