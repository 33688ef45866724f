"""What the commands share: exit codes, the usage error, lines they print, the fleet.

Light on purpose: `gpuwatch run` imports it (the Slack summary the report and the plan
send is `summary`, which loads the outbox).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gpuwatch.billing import StaticPrice
from gpuwatch.core.clock import Clock
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.nvml import NvmlApi
from gpuwatch.slack.secret import ENV_WEBHOOK_URL
from gpuwatch.tokens import TokenSourceConfig
from gpuwatch.workloads import WorkloadDeclaration

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

NVML_NOT_FOUND = (
    "gpuwatch: NVML was not found ({reason}): is the NVIDIA driver installed? "
    "To try gpuwatch without a GPU, run: gpuwatch run --simulate demo"
)


NO_WEBHOOK = (
    f"no Slack webhook configured: set {ENV_WEBHOOK_URL} or point "
    "[alerts.slack] webhook_url_file at a file holding the URL"
)


class UsageError(Exception):
    """A mistake in the command line or config: one line, exit 2."""


class FleetServices(Protocol):
    """A simulated fleet's servers (`ScenarioServices` in the agent's process, or
    `ExternalServices` started by `--services`): the config they stand for, and stop."""

    def kubernetes_config(self) -> KubernetesConfig | None:
        """`[kubernetes]` pointing at the simulated kubelet (None: no pods)."""

    def token_sources(self) -> tuple[TokenSourceConfig, ...]:
        """The token sources of the simulated inference servers."""

    def stop(self) -> None:
        """Stop the servers (idempotent)."""


@dataclass(frozen=True, slots=True)
class Fleet:
    """What the agent samples: pynvml (real, or the stand-in), its clock, the scenario's
    workloads, its simulated services (`ScenarioServices` or `ExternalServices`,
    stopped when the run ends; None on a real host) and the scenario's static prices."""

    nv: NvmlApi
    clock: Clock
    workloads: tuple[WorkloadDeclaration, ...] = ()
    services: FleetServices | None = None
    prices: tuple[StaticPrice, ...] = ()
    slurm: bool = False  # a simulated Slurm node: the agent's [slurm] on
