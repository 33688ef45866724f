"""Helpers shared by the benchmarks: percentiles, /proc readings, HTTP, tables, machine info.

Everything here is standard library only, so that the baseline process and the load
generator stay as light as possible.
"""

from __future__ import annotations

import http.client
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
SCENARIO = "dgx-h100"
CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` in seconds (its threads included, its children excluded)."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    fields = text[text.rindex(")") + 2 :].split()
    # after "pid (comm) ": state=0 ppid=1 ... utime=11 stime=12 (fields 14 and 15 of stat)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid: int) -> int:
    """VmRSS of `pid` in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get(
    port: int,
    path: str = "/metrics",
    timeout: float = 10.0,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    """One GET on 127.0.0.1:`port` on a fresh connection: (status, body as sent)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def wait_until_serving(port: int, path: str = "/metrics", timeout: float = 30.0) -> None:
    """Poll until GET `path` answers 200, or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status, _ = http_get(port, path, timeout=2.0)
        except OSError:
            status = 0
        if status == 200:
            return
        time.sleep(0.1)
    raise TimeoutError(f"nothing answered 200 on 127.0.0.1:{port}{path} in {timeout:.0f} s")


def series_lines(text: str) -> list[str]:
    """The sample lines of a text exposition (no comments, no blank lines)."""
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def series_keys(text: str) -> list[str]:
    """`name{labels}` of every sample line, sorted: two expositions of the same series match."""
    return sorted(line.rsplit(" ", 1)[0] for line in series_lines(text))


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A plain-text table: the first `left` columns left-aligned, the others right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(width) if i < left else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def verdict(ok: bool) -> str:
    """The pass/fail cell of a table."""
    return "ok" if ok else "MISSED"


def machine_info() -> dict[str, object]:
    """CPU model, core count, memory, Python, kernel and the date of this run."""
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_total = 0
    for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
        if line.startswith("MemTotal:"):
            mem_total = int(line.split()[1]) * 1024
            break
    now = datetime.now(UTC)
    return {
        **git_state(),
        "cpu_model": model,
        "cpu_cores": os.cpu_count(),
        "memory_total_bytes": mem_total,
        "memory_total_gib": round(mem_total / 1024**3, 1),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "date": now.date().isoformat(),
        "timestamp_utc": now.isoformat(timespec="seconds"),
    }


def git_state() -> dict[str, object]:
    """The commit the benchmark ran on, and whether src/ had uncommitted changes."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "HEAD")
    return {
        "git_commit": commit or None,
        "git_src_dirty": bool(git("status", "--porcelain", "src")) if commit else None,
    }
