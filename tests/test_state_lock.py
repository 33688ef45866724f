"""One agent per state directory: a second `gpuwatch run` on the same state_dir exits 2."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuwatch.cli.state_lock import LOCK_FILE, StateDirBusyError, StateDirLock
from tests.agent_process import start_agent
from tests.conftest import free_port


def test_second_lock_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    first = StateDirLock.acquire(tmp_path / "state")
    with pytest.raises(StateDirBusyError, match=r"in use by another gpuwatch agent \(pid \d+\)"):
        StateDirLock.acquire(tmp_path / "state")
    first.release()
    StateDirLock.acquire(tmp_path / "state").release()  # free again once released


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from gpuwatch.cli.state_lock import StateDirLock; "
            f"StateDirLock.acquire(Path({str(tmp_path)!r})); print('locked', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == b"locked"
    with pytest.raises(StateDirBusyError, match=f"pid {holder.pid}"):
        StateDirLock.acquire(tmp_path)
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=10)
    assert (tmp_path / LOCK_FILE).exists()
    StateDirLock.acquire(tmp_path).release()


def test_second_agent_on_the_same_state_dir_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [agent]
            state_dir = "{tmp_path / "state"}"
            [history]
            enabled = true
            """
        )
    )
    first = start_agent(["--simulate", "demo", "--config", str(config)], free_port())
    try:
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpuwatch",
                "run",
                "--simulate",
                "demo",
                "--config",
                str(config),
                "--listen",
                f"127.0.0.1:{free_port()}",
            ],
            capture_output=True,
            check=False,
            timeout=30,
        )
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=10)
    assert second.returncode == 2
    lines = second.stderr.decode().strip().splitlines()
    assert lines[-1].startswith("gpuwatch: agent.state_dir: ")
    assert f"pid {first.pid}" in lines[-1]
