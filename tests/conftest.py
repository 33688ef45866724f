"""Shared fixtures: simulated fleets on a manual clock, free ports, the real Prometheus."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import pytest
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

from gpuwatch.agent import Agent, AgentOptions
from gpuwatch.config import AgentConfig, Config, ExporterConfig
from gpuwatch.core.clock import ManualClock
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.simulate import SimulatedNvml, load_scenario
from gpuwatch.simulate.services import ScenarioServices
from gpuwatch.tokens import TokenSourceConfig

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's GPUWATCH_* variables."""
    for name in list(os.environ):
        if name.startswith("GPUWATCH_"):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Each test starts with the loggers `configure_logging` sets as it found them: an
    in-process `main([...])` points them at that test's captured stderr (closed after it)
    and stops their propagation, which would change what a later test's caplog sees."""
    loggers = [logging.getLogger(name) for name in ("gpuwatch", "apscheduler")]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    for lg, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate


def simulated(scenario: str, clock: ManualClock | None = None) -> tuple[Any, ManualClock]:
    """A fresh stand-in for `scenario` on a manual clock."""
    clock = clock or ManualClock()
    # slow-call faults and event-wait polls sleep for real, but at most 10 ms
    nv = SimulatedNvml(
        load_scenario(scenario), clock=clock, sleep=lambda s: time.sleep(min(s, 0.01))
    )
    return nv, clock


class ScenarioAgent(Agent):
    """An agent that also stops the scenario services it was given (`make_agent`)."""

    services: ScenarioServices | None = None

    def stop(self) -> None:
        super().stop()
        if self.services is not None:
            self.services.stop()
            self.services = None


def scenario_agent(
    config: Config,
    nv: Any,
    clock: ManualClock,
    *,
    environ: Mapping[str, str] | None = None,
    token_sources: tuple[TokenSourceConfig, ...] = (),
    kubernetes: KubernetesConfig | None = None,
    services: ScenarioServices | None = None,
) -> Agent:
    """An opened agent on the stand-in `nv` with its scenario's workloads and prices (as
    `gpuwatch run --simulate` adds them), no environment unless given; not yet sampled.
    With `services` (started), its token sources are the scenario's inference servers,
    read in process (`ScenarioServices.fetch`), and `stop()` stops them too."""
    agent = ScenarioAgent(
        config,
        nv,
        clock,
        AgentOptions(
            extra_workloads=nv.scenario.workloads,
            extra_token_sources=token_sources if services is None else services.token_sources(),
            extra_static_prices=nv.scenario.prices,
            environ={} if environ is None else environ,
            kubernetes=kubernetes,
            token_fetch=None if services is None else services.fetch,
        ),
    )
    agent.services = services
    agent.open()
    return agent


def make_agent(
    scenario: str = "demo",
    *,
    dcgm_compat: bool = False,
    dcgm_naming: Literal["classic", "4.9"] = "classic",
    per_process_metrics: bool = False,
    clock: ManualClock | None = None,
    servers: bool = False,
) -> tuple[Agent, ManualClock]:
    """An opened agent on a simulated fleet, not yet sampled. `servers`: with the
    scenario's simulated inference servers as token sources, read in process (no
    kubelet); call `agent.tokens.scrape_due(inline=True)` before a tick to read them as
    a running agent would."""
    nv, clock = simulated(scenario, clock)
    config = Config(
        agent=AgentConfig(hostname="test-host", per_process_metrics=per_process_metrics),
        exporter=ExporterConfig(dcgm_compat=dcgm_compat, dcgm_naming=dcgm_naming),
    )
    services = None
    if servers:
        services = ScenarioServices(nv, clock, cluster=False)
        services.start()
    return scenario_agent(config, nv, clock, services=services), clock


@pytest.fixture
def demo_agent() -> Iterator[tuple[Agent, ManualClock]]:
    agent, clock = make_agent("demo", dcgm_compat=True, per_process_metrics=True)
    yield agent, clock
    agent.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require_binary(name: str, *, installs: str = "Debian's prometheus") -> str:
    """Path of a binary the suite needs; fails (never skips) when it is missing."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if path is None:
        pytest.fail(f"{name} is not installed: run `make test` (installs {installs})")
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist (`make test` runs `-n 2`), one worker runs each test folder
    (and each top-level file) whole, so a folder's session fixtures (a Prometheus, a
    backfilled month, a rendered chart, the Slurm cluster) start once and no two Slurm
    clusters run at once."""
    return FolderScheduling(config, log)


class FolderScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's scope scheduling with a test folder (else a top-level file) as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        folder, _, rest = path.removeprefix("tests/").partition("/")
        return folder if rest else path
