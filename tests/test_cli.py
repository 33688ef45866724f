"""The `gpuwatch` command as a user runs it: real subprocesses, real signals."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.agent_process import fetch, start_agent
from tests.conftest import free_port


def gpuwatch(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwatch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_run_without_nvidia_driver_exits_1_with_one_line() -> None:
    result = gpuwatch("run", "--listen", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "NVML was not found" in lines[0]
    assert "--simulate demo" in lines[0]
    assert "Traceback" not in result.stderr


def test_status_json_lists_every_simulated_gpu() -> None:
    result = gpuwatch("status", "--simulate", "demo", "--json")
    assert result.returncode == 0, result.stderr
    gpus = json.loads(result.stdout)["gpus"]
    assert [g["index"] for g in gpus] == [0, 1, 2, 3]
    for gpu in gpus:
        for key in (
            "uuid",
            "name",
            "memory_used_bytes",
            "memory_total_bytes",
            "utilization_ratio",
            "processes",
        ):
            assert key in gpu
        assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpus[1]["processes"] == []
    assert len(gpus[2]["processes"]) == 1


def test_status_table_names_the_gpus() -> None:
    result = gpuwatch("status", "--simulate", "demo")
    assert result.returncode == 0, result.stderr
    assert "H100" in result.stdout


def test_unknown_scenario_is_a_usage_error() -> None:
    result = gpuwatch("status", "--simulate", "no-such-scenario")
    assert result.returncode == 2
    assert "no-such-scenario" in result.stderr
    assert "Traceback" not in result.stderr


def test_speed_without_simulate_is_a_usage_error() -> None:
    result = gpuwatch("run", "--speed", "10")
    assert result.returncode == 2


def test_bad_listen_is_a_usage_error() -> None:
    result = gpuwatch("run", "--simulate", "demo", "--listen", "nonsense")
    assert result.returncode == 2
    assert "--listen" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_agent_cleanly(signum: signal.Signals) -> None:
    port = free_port()
    proc = start_agent(["--simulate", "demo", "--speed", "30"], port)
    assert "gpuwatch_gpu_up" in fetch(f"http://127.0.0.1:{port}/metrics")
    start = time.monotonic()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=10)
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, err.decode()
    assert elapsed < 5.0
    assert b"Traceback" not in err


def test_python_dash_m_and_console_script_agree() -> None:
    result = gpuwatch("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("gpuwatch ")


def test_unreadable_basic_auth_password_file_names_the_field(tmp_path: Path) -> None:
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        '[exporter]\nbasic_auth_username = "prometheus"\n'
        f'basic_auth_password_file = "{tmp_path / "missing"}"\n'
    )
    result = gpuwatch(
        "run", "--simulate", "demo", "--config", str(config), "--listen", f"127.0.0.1:{free_port()}"
    )
    assert result.returncode == 2
    assert "exporter.basic_auth_password_file" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_token_source_that_never_answers_does_not_delay_shutdown(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        config = tmp_path / "gpuwatch.toml"
        config.write_text(
            "[[token_sources]]\n"
            'name = "silent"\n'
            f'url = "http://127.0.0.1:{silent.getsockname()[1]}/metrics"\n'
            "gpus = [0]\n"
            "interval_seconds = 60.0\n"
            "timeout_seconds = 30.0\n"
        )
        port = free_port()
        proc = start_agent(["--simulate", "demo", "--config", str(config)], port)
        time.sleep(1.0)  # the scrape is now waiting on the silent server
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
        elapsed = time.monotonic() - start
    assert proc.returncode == 0, err.decode()
    assert elapsed < 5.0
    assert b"maximum number of running instances" not in err


@pytest.mark.parametrize(
    "command", [[], ["run"], ["status"], ["check-config"], ["size"], ["tco"], ["report"], ["alert"]]
)
def test_every_help_renders(command: list[str]) -> None:
    """argparse formats help text with %: a stray % in a help string breaks --help."""
    from gpuwatch.cli import main

    with pytest.raises(SystemExit) as stop:
        main([*command, "--help"])
    assert stop.value.code == 0
