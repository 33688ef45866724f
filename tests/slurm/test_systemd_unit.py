"""deploy/systemd/gpuwatch.service: `systemd-analyze verify` clean (and not vacuously),
and its capability set exactly what reading another user's /proc/<pid>/environ needs,
shown with the kernel's own checks (`setpriv`, as root)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, require_binary

UNIT = REPO_ROOT / "deploy" / "systemd" / "gpuwatch.service"
NOBODY = 65534


def settings() -> dict[str, str]:
    """`Key=value` lines of the unit (each key once in this unit)."""
    out = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            assert key not in out, key
            out[key] = value
    return out


def verify(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze verify` on the unit text, its ExecStart pointed at this venv's
    gpuwatch (verify checks that the program exists)."""
    gpuwatch = Path(sys.executable).parent / "gpuwatch"
    unit = tmp_path / "gpuwatch.service"
    unit.write_text(text.replace("/usr/local/bin/gpuwatch", str(gpuwatch)))
    return subprocess.run(
        [require_binary("systemd-analyze"), "verify", str(unit)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_systemd_analyze_verify_is_clean(tmp_path: Path) -> None:
    done = verify(tmp_path, UNIT.read_text())
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_verify_reports_a_wrong_key(tmp_path: Path) -> None:
    text = UNIT.read_text().replace(
        "NoNewPrivileges=yes", "NoNewPrivileges=yes\nNoNewPrivilege=yes"
    )
    done = verify(tmp_path, text)
    assert "Unknown key 'NoNewPrivilege'" in done.stderr


def test_the_unit_runs_the_agent_as_slurm_sites_need() -> None:
    unit = settings()
    assert unit["User"] == "root"
    assert unit["ExecStart"] == "/usr/local/bin/gpuwatch run --config /etc/gpuwatch/gpuwatch.toml"
    assert unit["Restart"] == "on-failure"
    assert unit["RestartPreventExitStatus"] == "2"  # a bad config exits 2
    # what would hide the jobs' processes, /dev/nvidia* or void the capabilities
    for key in ("ProtectProc", "ProcSubset", "PrivateDevices", "DevicePolicy", "PrivateUsers"):
        assert key not in unit, key


def read_environ(pid: int, capabilities: list[str]) -> int:
    """Read `/proc/<pid>/environ` as root with only `capabilities` (setpriv's bounding set:
    what uid 0 keeps across exec); 0 when it worked, else the exit status."""
    caps = ",".join(["-all", *(f"+{c.removeprefix('CAP_').lower()}" for c in capabilities)])
    code = f"open('/proc/{pid}/environ', 'rb').read()"
    return subprocess.run(
        [require_binary("setpriv"), f"--bounding-set={caps}", "--", sys.executable, "-c", code],
        capture_output=True,
        check=False,
        timeout=30,
    ).returncode


def test_its_capabilities_are_exactly_what_reading_a_jobs_environ_needs() -> None:
    if os.geteuid() != 0:
        pytest.fail("runs as root, as the Slurm tests do")
    capabilities = settings()["CapabilityBoundingSet"].split()
    assert sorted(capabilities) == ["CAP_DAC_READ_SEARCH", "CAP_SYS_PTRACE"]
    other_user = subprocess.Popen(
        [
            require_binary("setpriv"),
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "sleep",
            "60",
        ],
        cwd="/",
    )
    try:
        pid = other_user.pid
        deadline = time.monotonic() + 5
        while f"\t{NOBODY}\t" not in Path(f"/proc/{pid}/status").read_text():
            assert time.monotonic() < deadline, "setpriv did not become nobody"
            time.sleep(0.05)
        assert read_environ(pid, capabilities) == 0
        for dropped in capabilities:
            assert read_environ(pid, [c for c in capabilities if c != dropped]) != 0, dropped
    finally:
        other_user.kill()
        other_user.wait(timeout=10)
