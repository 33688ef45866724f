"""What a Slurm node says about its jobs, parsed: pure functions, no I/O.

- A job's process: `SLURM_JOB_ID`, `SLURM_STEP_ID` and the GPUs it was given by global
  GRES index, `SLURM_STEP_GPUS` (an `srun` step) else `SLURM_JOB_GPUS` (the batch step),
  from `/proc/<pid>/environ`; else the job from `/proc/<pid>/cgroup` (`.../job_<id>/
  step_<s>/...` under `proctrack/cgroup`). `CUDA_VISIBLE_DEVICES` is never used: under
  device cgroups (`ConstrainDevices=yes`) it is renumbered from 0 inside each job.
- The jobs running on this node: `squeue --json -w <node>` (one query per list
  interval), with `gres_detail` = `gpu:2(IDX:0-1)` per node, user, account, partition.
- GRES index -> GPU: the index is the position in `gres.conf`'s `File=` list for
  `Name=gpu` (`/dev/nvidia[0-3]` gives index i = `/dev/nvidia<i>`), so it names the GPU
  by its device minor number, not by NVML's index.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_SLURM_CONF = Path("/etc/slurm/slurm.conf")
"""Debian's (and Slurm's default `--sysconfdir`) slurm.conf."""

_GRES_DETAIL = re.compile(r"^gpu(?::[^:(]+)?(?::\d+)?\(IDX:([0-9,\-]*)\)")
_JOB_CGROUP = re.compile(r"/job_(\d+)(?:/step_([A-Za-z0-9_.]+))?")
_DEVICE = re.compile(r"^/dev/nvidia(\d+)$")
_BRACKET = re.compile(r"^(.*?)\[([0-9,\-]+)\](.*)$")


class SlurmParseError(ValueError):
    """`squeue --json` answered something that is not its document."""


@dataclass(frozen=True, slots=True)
class JobProcess:
    """A process's job: its ID, its step (None: unknown), and its GPUs by global GRES
    index (None: its environment names none)."""

    job_id: str
    step: str | None
    gpus: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """A job running on this node, as slurmctld lists it."""

    job_id: str
    user: str
    account: str
    partition: str
    gpus: tuple[int, ...]  # global GRES indexes on this node
    end_time_seconds: float | None = None  # start + time limit (Unix s); None: not given


def parse_index_list(text: str) -> tuple[int, ...]:
    """`0-1,3` -> (0, 1, 3); empty -> (); raises ValueError on anything else."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if first < 0 or last < first or last - first > 1023:
            raise ValueError(f"bad index range {part!r}")
        out.extend(range(first, last + 1))
    return tuple(sorted(set(out)))


def parse_environ(raw: bytes) -> JobProcess | None:
    """A process's job from its NUL-separated environment; None outside any job."""
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key.startswith(b"SLURM_"):
            env[key.decode("ascii", "replace")] = value.decode("utf-8", "replace")
    job_id = env.get("SLURM_JOB_ID", "")
    if not job_id.isdigit():
        return None
    step = env.get("SLURM_STEP_ID")
    named = env.get("SLURM_STEP_GPUS")
    if named is None:
        named = env.get("SLURM_JOB_GPUS")
        step = step if step is not None else "batch"
    try:
        gpus = None if named is None else parse_index_list(named)
    except ValueError:
        gpus = None
    return JobProcess(job_id, step, gpus)


def parse_job_cgroup(text: str) -> JobProcess | None:
    """A process's job from `/proc/<pid>/cgroup` (`.../job_<id>/step_<s>`), GPUs unknown."""
    for line in text.splitlines():
        match = _JOB_CGROUP.search(line)
        if match is not None:
            return JobProcess(match.group(1), match.group(2), None)
    return None


def parse_gres_detail(details: list[Any] | None) -> tuple[int, ...]:
    """GPU indexes from squeue's `gres_detail` (one entry per node: `gpu:2(IDX:0-1)`,
    `gpu:h100:2(IDX:0,2)`, other GRES ignored)."""
    out: set[int] = set()
    for entry in details or ():
        for part in re.split(r",(?=[A-Za-z])", str(entry)):
            match = _GRES_DETAIL.match(part)
            if match is not None:
                out.update(parse_index_list(match.group(1)))
    return tuple(sorted(out))


def parse_squeue_json(text: str) -> tuple[SlurmJob, ...]:
    """The running jobs of `squeue --json -w <node>`; raises SlurmParseError."""
    try:
        document = json.loads(text)
        jobs = document["jobs"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SlurmParseError(f"not squeue's JSON: {exc}") from exc
    if not isinstance(jobs, list):
        raise SlurmParseError("not squeue's JSON: jobs is not a list")
    out = []
    for job in jobs:
        if not isinstance(job, dict) or _state(job.get("job_state")) != "RUNNING":
            continue
        out.append(
            SlurmJob(
                str(job.get("job_id", "")),
                str(job.get("user_name") or job.get("user_id") or ""),
                str(job.get("account") or ""),
                str(job.get("partition") or ""),
                parse_gres_detail(job.get("gres_detail")),
                _number(job.get("end_time")),
            )
        )
    return tuple(out)


def _number(value: object) -> float | None:
    """22.05 gives `1795908153`, 23.02+ `{"set": true, "number": 1795908153}`; 0 or unset
    is None."""
    if isinstance(value, dict):
        value = value.get("number") if value.get("set", True) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def _state(value: object) -> str:
    """22.05 gives `"RUNNING"`, 23.02+ a list of flags (`["RUNNING"]`)."""
    if isinstance(value, list):
        return "RUNNING" if "RUNNING" in value else ""
    return str(value or "")


def slurm_conf_path(configured: str, environ: Mapping[str, str]) -> Path:
    """slurm.conf as Slurm's commands find it: the configured path, else `SLURM_CONF`,
    else the default."""
    return Path(configured or environ.get("SLURM_CONF") or DEFAULT_SLURM_CONF)


def expand_hostlist(text: str) -> tuple[str, ...]:
    """`/dev/nvidia[0-1,3]` -> the three names (one bracket, as gres.conf writes them)."""
    match = _BRACKET.match(text.strip())
    if match is None:
        return (text.strip(),)
    head, ranges, tail = match.groups()
    width = len(ranges.split(",")[0].split("-")[0])
    return tuple(f"{head}{i:0{width}d}{tail}" for i in parse_index_list(ranges))


def parse_gres_conf(text: str, node: str) -> tuple[int, ...] | None:
    """Device minor numbers in GRES index order from `gres.conf`'s `Name=gpu File=` lines
    for this node (lines without `NodeName=`, or naming it); None when no line gives
    files (`AutoDetect=nvml`: then the index follows the minor numbers)."""
    minors: list[int] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        fields = {k.lower(): v for k, _, v in (f.partition("=") for f in line.split()) if v}
        if fields.get("name") != "gpu" or "file" not in fields:
            continue
        nodes = fields.get("nodename")
        if nodes is not None and node not in expand_hostlist(nodes):
            continue
        for path in expand_hostlist(fields["file"]):
            match = _DEVICE.match(path)
            if match is not None:
                minors.append(int(match.group(1)))
    return tuple(minors) or None
