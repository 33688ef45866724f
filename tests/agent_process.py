"""Start `gpuwatch run` as a real subprocess and wait until it serves."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""Exposition samples by (name, labels without uuid)."""


def start_agent(
    args: Sequence[str], port: int, *, timeout: float = 20.0, prefix: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """`python -m gpuwatch run ARGS --listen 127.0.0.1:PORT`, ready when /readyz answers 200;
    `prefix`: a command that runs it (e.g. `unshare ...`)."""
    proc = subprocess.Popen(
        [
            *prefix,
            sys.executable,
            "-m",
            "gpuwatch",
            "run",
            *args,
            "--listen",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"agent exited {proc.returncode}: {err.decode()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as resp:
                if resp.status == 200:
                    return proc
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("agent did not become ready")


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        body: bytes = resp.read()
        return body.decode()


def samples(text: str) -> Samples:
    """Every sample of an exposition, keyed by name and labels (uuid left out)."""
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = frozenset((k, v) for k, v in sample.labels.items() if k != "uuid")
            values[(sample.name, labels)] = sample.value
    return values
