"""The scenario's services in another process (`python -m gpuwatch.simulate.services`)
and the agent pointed at them (`gpuwatch run --simulate demo --services FILE`): pods
and token costs as with the in-process services, and no server of theirs in the agent."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuwatch.cli import main
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.simulate.endpoints import (
    EndpointsError,
    endpoints_document,
    load_endpoints,
    write_endpoints,
)
from gpuwatch.tokens import TokenSourceConfig
from tests.agent_process import fetch, start_agent
from tests.conftest import free_port


def test_endpoints_round_trip(tmp_path: Path) -> None:
    kube = KubernetesConfig(enabled=True, pod_resources_socket=tmp_path / "kubelet.sock")
    source = TokenSourceConfig(name="s", url="http://127.0.0.1:1/metrics", gpus=[3])
    document = endpoints_document(
        "demo", 60.0, scenario_start=1000.0, simulated_now=1600.0, kubernetes=kube,
        sources=(source,),
    )  # fmt: skip
    path = tmp_path / "endpoints.json"
    write_endpoints(path, document)
    external = load_endpoints(path, "demo")
    assert external.kubernetes_config() == kube
    assert external.token_sources() == (source,)
    assert external.speed == 60.0
    assert external.scenario_start == 1000.0
    # the clock is on the services' simulated time: 600 s past the start, and on
    assert external.clock().time() - 1000.0 >= 600.0
    with pytest.raises(EndpointsError, match="not 'dgx-h100'"):
        load_endpoints(path, "dgx-h100")
    path.write_text(json.dumps({"format": 1}), encoding="utf-8")
    with pytest.raises(EndpointsError, match="not an endpoints file"):
        load_endpoints(path, "demo")


def test_services_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.json"
    assert main(["run", "--services", str(missing)]) == 2
    assert "--services needs --simulate" in capsys.readouterr().err
    assert main(["run", "--simulate", "demo", "--services", str(missing)]) == 2
    assert "--services: cannot read" in capsys.readouterr().err


def test_agent_on_external_services(tmp_path: Path) -> None:
    endpoints = tmp_path / "endpoints.json"
    argv = [sys.executable, "-m", "gpuwatch.simulate.services", "demo", "--speed", "60"]
    services = subprocess.Popen([*argv, "--endpoints", str(endpoints)], stderr=subprocess.PIPE)
    agent = None
    try:
        deadline = time.monotonic() + 30
        while not endpoints.exists():
            assert services.poll() is None, services.communicate()[1].decode()
            assert time.monotonic() < deadline, "no endpoints file"
            time.sleep(0.1)
        config = tmp_path / "gpuwatch.toml"
        config.write_text(f'[agent]\nstate_dir = "{tmp_path / "state"}"\n', encoding="utf-8")
        port = free_port()
        agent = start_agent(
            ["--simulate", "demo", "--services", str(endpoints), "--config", str(config)], port
        )
        deadline = time.monotonic() + 30
        while True:  # token costs need two scrapes of the server (15 simulated s apart)
            text = fetch(f"http://127.0.0.1:{port}/metrics")
            if 'source="simulated-vllm-gpu3"' in text and "gpuwatch_pod_cost_usd_total{" in text:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
        assert 'namespace="team-b",pod="vllm-llama-8b-0"' in text
        status = json.loads(fetch(f"http://127.0.0.1:{port}/status.json"))
        assert status["gpus"]
    finally:
        if agent is not None:
            agent.send_signal(signal.SIGTERM)
            agent.communicate(timeout=20)
        services.send_signal(signal.SIGTERM)
        _, err = services.communicate(timeout=20)
    assert services.returncode == 0, err.decode()
    assert not endpoints.exists()  # removed on the way out
