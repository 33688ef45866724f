"""[slurm]: where the agent finds the cluster, this node's name and how often to ask."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuwatch.core.values import ConfigPath

_NODE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,253})?$")


class SlurmConfig(BaseModel):
    """Attribution of GPUs and processes to Slurm jobs (off unless `enabled`).

    `slurm_conf`: empty finds the cluster as Slurm's commands do (`SLURM_CONF`, else
    `/etc/slurm/slurm.conf`); `node_name`: empty is the host's short name, as slurmd's.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    enabled: bool = False
    slurm_conf: str = ""
    node_name: str = ""
    proc_root: ConfigPath = Path("/proc")
    squeue_command: str = "squeue"
    list_interval_seconds: float = Field(default=30.0, ge=1.0, le=600.0)
    timeout_seconds: float = Field(default=10.0, gt=0.0, le=120.0)

    @field_validator("node_name")
    @classmethod
    def _node_name(cls, name: str) -> str:
        if name and not _NODE.match(name):
            raise ValueError(f"{name!r} is not a Slurm node name")
        return name

    @field_validator("squeue_command")
    @classmethod
    def _command(cls, command: str) -> str:
        if not command.strip():
            raise ValueError("must name the squeue command (default 'squeue')")
        return command
