"""What the commands share: exit codes, the usage error, lines they print, the fleet.

Light on purpose: `gpuwatch run` imports it (the Slack summary the report and the plan
send is `summary`, which loads the outbox).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwatch.core.clock import Clock
from gpuwatch.slack.secret import ENV_WEBHOOK_URL
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


@dataclass(frozen=True, slots=True)
class Fleet:
    """What the agent samples: pynvml (real, or the stand-in), its clock, the scenario's
    workloads and its simulated services (`ScenarioServices` or `ExternalServices`,
    stopped when the run ends; None on a real host)."""

    nv: Any
    clock: Clock
    workloads: tuple[WorkloadDeclaration, ...] = ()
    services: Any = None
