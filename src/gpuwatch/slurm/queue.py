"""The one slurmctld query per list interval: `squeue --json -w <node>`.

Run with `SLURM_CONF` set to the slurm.conf the agent found, a timeout, and no shell.
Raises `SqueueError` with a short reason (`no_command`, `timeout`, `exit_<n>`, `parse`).
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path

from gpuwatch.slurm.evidence import SlurmJob, SlurmParseError, parse_squeue_json


class SqueueError(Exception):
    """squeue failed; `reason` is one word for the log and the metric."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def list_node_jobs(
    command: str,
    node: str,
    slurm_conf: Path,
    environ: Mapping[str, str],
    timeout_seconds: float,
) -> tuple[SlurmJob, ...]:
    """The jobs running on `node` (blocking: the scheduler's job, never the tick's)."""
    argv = [*shlex.split(command), "--json", "--states=RUNNING", "-w", node]
    env = {**environ, "SLURM_CONF": str(slurm_conf)}
    try:
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=timeout_seconds, check=False
        )
    except FileNotFoundError as exc:
        raise SqueueError("no_command", f"{argv[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise SqueueError("timeout", f"no answer in {timeout_seconds:g} s") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1][:200]
        raise SqueueError(f"exit_{done.returncode}", last)
    try:
        return parse_squeue_json(done.stdout)
    except SlurmParseError as exc:
        raise SqueueError("parse", str(exc)) from exc
