"""[slurm]: where the agent finds the cluster, this node's name and how often to ask."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from gpuwatch.core.values import ConfigPath

_NODE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,253})?$")


class SlurmConfig(BaseModel):
    """Attribution of GPUs and processes to Slurm jobs (off unless `enabled`).

    `slurm_conf`: empty finds the cluster as Slurm's commands do (`SLURM_CONF`, else
    `/etc/slurm/slurm.conf`); `node_name`: empty is the host's short name, as slurmd's.
    `reclaim_mode`: what the agent does with a job that holds GPUs and runs nothing on
    them (docs/slurm.md, "Reclaim"): `off` (default) nothing, `dry-run` logs and counts
    what it would do, `enforce` warns the owner after `reclaim_warn_after_seconds` and
    cancels the job (`scancel`) after `reclaim_cancel_after_seconds` of allocated-idle.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    enabled: bool = False
    slurm_conf: str = ""
    node_name: str = ""
    proc_root: ConfigPath = Path("/proc")
    squeue_command: str = "squeue"
    list_interval_seconds: float = Field(default=30.0, ge=1.0, le=600.0)
    timeout_seconds: float = Field(default=10.0, gt=0.0, le=120.0)
    reclaim_mode: Literal["off", "dry-run", "enforce"] = "off"
    reclaim_warn_after_seconds: float = Field(default=3600.0, ge=60.0, le=30 * 86400.0)
    reclaim_cancel_after_seconds: float = Field(default=7200.0, ge=60.0, le=30 * 86400.0)
    scontrol_command: str = "scontrol"
    scancel_command: str = "scancel"

    @field_validator("node_name")
    @classmethod
    def _node_name(cls, name: str) -> str:
        if name and not _NODE.match(name):
            raise ValueError(f"{name!r} is not a Slurm node name")
        return name

    @field_validator("squeue_command", "scontrol_command", "scancel_command")
    @classmethod
    def _command(cls, command: str) -> str:
        if not command.strip():
            raise ValueError("must name the command")
        return command

    @field_validator("reclaim_cancel_after_seconds")
    @classmethod
    def _cancel_after_warn(cls, seconds: float, info: ValidationInfo) -> float:
        warn = info.data.get("reclaim_warn_after_seconds")
        if warn is not None and seconds <= warn:
            raise ValueError(
                f"must be longer than reclaim_warn_after_seconds ({warn:g} s): the owner "
                "is warned before the job is cancelled"
            )
        return seconds
