"""`gpuwatch status` as a user runs it, against a real agent on a simulated fleet."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len

from gpuwatch.export.status_json import FORMAT
from tests.agent_process import start_agent
from tests.conftest import free_port
from tests.status.conftest import HOSTILE_NAME, write_hostile

PASSWORD = "s3cret-status-hunter2"


def gpuwatch(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m gpuwatch ARGS` on an 80-column terminal."""
    return subprocess.run(
        [sys.executable, "-m", "gpuwatch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "COLUMNS": "80", "LINES": "50"},
    )


def table_rows(stdout: str) -> dict[str, list[str]]:
    """GPU index -> the words of its row in the GPU table."""
    rows: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        words = line.split()
        if words and words[0].isdigit() and "GiB" in line and len(words) >= 6:
            rows.setdefault(words[0], words)
    return rows


@pytest.fixture(scope="module")
def demo_agent() -> Iterator[int]:
    """`gpuwatch run --simulate demo --speed 120` on a free port."""
    port = free_port()
    proc = start_agent(["--simulate", "demo", "--speed", "120"], port)
    try:
        yield port
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_status_asks_the_running_agent(demo_agent: int) -> None:
    time.sleep(1.0)  # a few simulated minutes: costs accrue
    result = gpuwatch("status", "--listen", f"127.0.0.1:{demo_agent}")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert "(from the agent)" in lines[0]
    assert all(cell_len(line) <= 80 for line in lines), result.stdout
    rows = table_rows(result.stdout)
    assert sorted(rows) == ["0", "1", "2", "3"]
    for words in rows.values():
        assert words[1:4] == ["H100", "80GB", "HBM3"]
        assert words[4] not in ("unknown", "no", "down")  # the agent's own verdict
        assert "$6.88" in words
    assert any(line.split()[2:3] == ["train.py"] for line in lines)


def test_status_json_is_the_agents_document(demo_agent: int) -> None:
    result = gpuwatch("status", "--listen", f"127.0.0.1:{demo_agent}", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["format"] == FORMAT
    assert document["source"] == "agent"
    assert [g["index"] for g in document["gpus"]] == [0, 1, 2, 3]
    train = document["gpus"][0]
    assert train["processes"][0]["name"] == "python3 train.py --config configs/llama3-8b-sft.yaml"
    assert isinstance(train["verdict"]["state"], str)
    assert train["cost"]["price"]["usd_per_hour"] == pytest.approx(6.88, abs=0.01)


def test_no_agent_is_one_line_then_a_local_sample() -> None:
    port = free_port()
    result = gpuwatch("status", "--listen", f"127.0.0.1:{port}")
    lines = result.stderr.strip().splitlines()
    assert lines[0] == (
        f"gpuwatch: no status from an agent at http://127.0.0.1:{port}/status.json "
        "(nothing listens there); "
        "showing one local sample: no states, no costs"
    )
    assert "Traceback" not in result.stderr
    if result.returncode == 1:  # this machine has no NVIDIA driver: said in one more line
        assert len(lines) == 2
        assert "NVML was not found" in lines[1]
    else:
        assert result.returncode == 0
        assert "no agent" in result.stdout


def test_simulate_replays_the_scenario_to_at() -> None:
    result = gpuwatch("status", "--simulate", "demo", "--at", "2000", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["source"] == "simulation"
    states = [g["verdict"]["state"] for g in document["gpus"]]
    assert states[1:3] == ["idle", "held"]
    assert document["gpus"][3]["verdict"]["recommendation"] is not None
    assert (
        document["timestamp_seconds"] - document["gpus"][0]["verdict"]["state_since_seconds"]
        <= 2000
    )
    table = gpuwatch("status", "--simulate", "demo", "--at", "2000")
    assert table.returncode == 0, table.stderr
    assert "(simulated here)" in table.stdout.splitlines()[0]
    assert table_rows(table.stdout)["1"][4] == "idle"


def test_simulate_json_keeps_full_names_escaped(tmp_path: Path) -> None:
    scenario = write_hostile(tmp_path)
    result = gpuwatch("status", "--simulate", str(scenario), "--at", "30", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.isascii()
    assert "\x1b" not in result.stdout
    names = [p["name"] for p in json.loads(result.stdout)["gpus"][0]["processes"]]
    assert HOSTILE_NAME in names
    table = gpuwatch("status", "--simulate", str(scenario), "--at", "30")
    assert table.returncode == 0, table.stderr
    assert "\x1b" not in table.stdout
    assert all(cell_len(line) <= 80 for line in table.stdout.splitlines()), table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--at", "10"), "--at needs --simulate"),
        (("--simulate", "demo", "--at", "-1"), "--at must be"),
        (("--simulate", "demo", "--at", "nan"), "--at must be"),
        (("--simulate", "demo", "--at", "1e9"), "beyond the longest replay, 2678400 s (31 days)"),
        (("--simulate", "demo", "--listen", "127.0.0.1:1"), "--listen"),
        (("--listen", "nonsense"), "--listen"),
        (("--simulate", "no-such-scenario"), "no-such-scenario"),
    ],
)
def test_status_usage_errors(args: Sequence[str], message: str) -> None:
    result = gpuwatch("status", *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


# --- TLS and basic auth ------------------------------------------------------------------


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "1",
            "-subj", "/CN=gpu-node-7.example",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def write_config(path: Path, cert: Path, key: Path, password_file: Path) -> Path:
    path.write_text(
        "[exporter]\n"
        f'tls_cert_file = "{cert}"\n'
        f'tls_key_file = "{key}"\n'
        'basic_auth_username = "ops"\n'
        f'basic_auth_password_file = "{password_file}"\n'
    )
    return path


@pytest.fixture(scope="module")
def secured_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An agent behind TLS (a certificate for another name) and basic auth."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    directory = tmp_path_factory.mktemp("secured")
    cert, key = self_signed(directory, "agent")
    password = directory / "password"
    password.write_text(PASSWORD + "\n")
    config = write_config(directory / "gpuwatch.toml", cert, key, password)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuwatch", "run", "--simulate", "demo", "--speed", "60",
         "--config", str(config), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{port}/readyz", timeout=1, context=context
            ) as reply:
                if reply.status == 200:
                    break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail(f"the agent did not become ready: {proc.communicate()[1].decode()}")
    try:
        yield {"port": port, "config": config, "cert": cert, "key": key, "dir": directory}
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_status_honours_tls_and_basic_auth(secured_agent: dict[str, Any]) -> None:
    port, config = secured_agent["port"], secured_agent["config"]
    result = gpuwatch("status", "--config", str(config), "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 0, result.stderr
    assert "(from the agent)" in result.stdout.splitlines()[0]
    assert sorted(table_rows(result.stdout)) == ["0", "1", "2", "3"]
    assert PASSWORD not in result.stdout + result.stderr


def test_wrong_password_or_certificate_is_one_line_without_the_secret(
    secured_agent: dict[str, Any],
) -> None:
    port, directory = secured_agent["port"], secured_agent["dir"]
    wrong = directory / "wrong-password"
    wrong.write_text("not-" + PASSWORD + "\n")
    other_cert, other_key = self_signed(directory, "other")
    cert, key, password = secured_agent["cert"], secured_agent["key"], directory / "password"
    cases = {
        write_config(
            directory / "wrong-password.toml", cert, key, wrong
        ): "refused the credentials",
        write_config(directory / "other-cert.toml", other_cert, other_key, password): "TLS",
    }
    for config, reason in cases.items():
        result = gpuwatch("status", "--config", str(config), "--listen", f"127.0.0.1:{port}")
        first = result.stderr.splitlines()[0]
        assert first.startswith(
            f"gpuwatch: no status from an agent at https://127.0.0.1:{port}/status.json "
        )
        assert reason in first
        assert PASSWORD not in result.stdout + result.stderr
        assert "Traceback" not in result.stderr
