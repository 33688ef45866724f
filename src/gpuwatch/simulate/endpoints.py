"""A scenario's simulated services running in another process: what the agent needs of them.

On a real node the kubelet and the inference servers are other processes; under
`--simulate` the agent starts their stand-ins in its own process by default
(`ScenarioServices`). `python -m gpuwatch.simulate.services SCENARIO --endpoints FILE`
runs them alone and writes FILE (JSON): the scenario, its clock, the `[kubernetes]`
section pointing at the simulated kubelet and the token sources of the simulated
servers. `gpuwatch run --simulate SCENARIO --services FILE` reads it here and runs the
agent on the same simulated time without starting any of them, so a benchmark measures
the agent's own memory, as on a node.

This module is what the agent imports: json and two config models, nothing of the
servers (grpc, the simulated vLLM server).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwatch.core.clock import ScaledClock
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.tokens import TokenSourceConfig

FORMAT = 1
"""The file's format version."""


class EndpointsError(Exception):
    """The endpoints file is missing, unreadable or for another scenario."""


@dataclass(frozen=True, slots=True)
class ExternalServices:
    """The scenario's services as another process serves them (`ScenarioServices`'s
    interface, less starting: `stop()` leaves them to their own process)."""

    scenario: str
    speed: float
    scenario_start: float
    """Simulated epoch seconds at scenario time 0 (the stand-in's `start_time`)."""
    anchor_real: float
    anchor_simulated: float
    """One instant on both clocks: real `time.time()` and the simulated time then."""
    kubernetes: KubernetesConfig | None
    sources: tuple[TokenSourceConfig, ...]

    def clock(self) -> ScaledClock:
        """A clock on the services' simulated time (the same speed, the same now)."""
        now = self.anchor_simulated + (time.time() - self.anchor_real) * self.speed
        return ScaledClock(self.speed, start=now)

    def kubernetes_config(self) -> KubernetesConfig | None:
        """`[kubernetes]` for the simulated node; None when the scenario has no pods."""
        return self.kubernetes

    def token_sources(self) -> tuple[TokenSourceConfig, ...]:
        """Token sources pointing at the other process's servers."""
        return self.sources

    def stop(self) -> None:
        """Nothing: the services stop with their own process."""


def endpoints_document(
    scenario: str,
    speed: float,
    *,
    scenario_start: float,
    simulated_now: float,
    kubernetes: KubernetesConfig | None,
    sources: tuple[TokenSourceConfig, ...],
) -> dict[str, Any]:
    """The JSON document `load_endpoints` reads; `simulated_now` is taken now."""
    return {
        "format": FORMAT,
        "scenario": scenario,
        "speed": speed,
        "scenario_start": scenario_start,
        "anchor": {"real": time.time(), "simulated": simulated_now},
        "kubernetes": None if kubernetes is None else kubernetes.model_dump(mode="json"),
        "token_sources": [source.model_dump(mode="json") for source in sources],
    }


def write_endpoints(path: Path, document: dict[str, Any]) -> None:
    """Write `document` to `path` whole (a reader never sees half a file)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)


def load_endpoints(path: Path, scenario: str) -> ExternalServices:
    """The services described in `path`, which must be for `scenario`."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EndpointsError(f"cannot read {path}: {exc}") from None
    try:
        if document["format"] != FORMAT:
            raise EndpointsError(f"{path}: format {document['format']!r}, expected {FORMAT}")
        if document["scenario"] != scenario:
            raise EndpointsError(
                f"{path} serves scenario {document['scenario']!r}, not {scenario!r}"
            )
        kube = document["kubernetes"]
        return ExternalServices(
            scenario=scenario,
            speed=float(document["speed"]),
            scenario_start=float(document["scenario_start"]),
            anchor_real=float(document["anchor"]["real"]),
            anchor_simulated=float(document["anchor"]["simulated"]),
            kubernetes=None if kube is None else KubernetesConfig.model_validate(kube),
            sources=tuple(
                TokenSourceConfig.model_validate(source) for source in document["token_sources"]
            ),
        )
    except EndpointsError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise EndpointsError(f"{path}: not an endpoints file ({exc!r})") from None
