"""[kubernetes]: where the attribution collector finds the kubelet, /proc and pod logs."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuwatch.core.values import ConfigPath

_RESOURCE = re.compile(
    r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


class KubernetesConfig(BaseModel):
    """Attribution of GPUs and processes to pods (off unless `enabled`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    enabled: bool = False
    pod_resources_socket: ConfigPath = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    proc_root: ConfigPath = Path("/proc")
    pod_logs_dir: ConfigPath = Path("/var/log/pods")
    resource_names: list[str] = Field(default_factory=list)  # beyond nvidia.com/gpu, mig-*
    list_interval_seconds: float = Field(default=5.0, ge=1.0, le=300.0)
    timeout_seconds: float = Field(default=5.0, gt=0.0, le=60.0)

    @field_validator("resource_names")
    @classmethod
    def _resource_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _RESOURCE.match(name):
                raise ValueError(
                    f"{name!r} is not an extended resource name such as 'example.com/gpu'"
                )
        return names
