"""`gpuwatch` writing into real pipes: tables at full width, and a reader that goes away
early ends the command quietly (exit 141, no traceback), whatever the command."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

from gpuwatch.cli.stdout import EXIT_BROKEN_PIPE

COMMANDS = [
    pytest.param(["size", "--params", "7B", "--json"], id="size-json"),
    pytest.param(["size", "--params", "7B"], id="size-table"),
    pytest.param(["tco", "--utilization", "0.5", "--gpu", "L4-24GB", "--json"], id="tco-json"),
    pytest.param(["tco", "--utilization", "0.5", "--gpu", "L4-24GB"], id="tco-table"),
    pytest.param(["status", "--simulate", "demo", "--json"], id="status-json"),
    pytest.param(["check-config", "config.example.toml", "--no-host-checks"], id="check-config"),
]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


@pytest.mark.parametrize("args", COMMANDS)
def test_a_reader_gone_before_the_first_write_ends_the_command_quietly(args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -0`: every write is EPIPE
    try:
        result = subprocess.run(
            [sys.executable, "-m", "gpuwatch", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
            env=_env(),
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored"
    assert result.returncode == EXIT_BROKEN_PIPE


def test_a_reader_that_reads_a_little_then_closes_gets_no_traceback() -> None:
    """`gpuwatch status --simulate dgx-h100-mig --json | head -c 100`. The document
    (67 KB) is only just more than a pipe holds (64 KB), so the write could finish after
    100 bytes are read and before the close: the pipe is shrunk to one page first
    (F_SETPIPE_SZ), so the write still has most of the document left when the reader
    closes."""
    with subprocess.Popen(
        [sys.executable, "-m", "gpuwatch", "status", "--simulate", "dgx-h100-mig", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    ) as proc:
        assert proc.stdout is not None
        fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
        assert proc.stdout is not None
        assert proc.stderr is not None
        assert proc.stdout.read(100).startswith(b"{")
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE
    assert err == ""


def test_tables_written_to_a_pipe_are_not_cut() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gpuwatch", "size", "--params", "7B"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=_env(),
    )
    assert "…" not in result.stdout  # at 80 columns: "token…", "10.3…"
    header = next(line for line in result.stdout.splitlines() if "┃ GPU" in line)
    assert "tokens/s" in header
    assert "$/1M rented" in header
    assert any("GH200-144GB" in line and "212.4" in line for line in result.stdout.splitlines())
