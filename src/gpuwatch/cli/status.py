"""`gpuwatch status`: what the agent on this host says about its GPUs (states, costs).

Asks the running agent (`gpuwatch.status.fetch_status`); without one, one local NVML
sample with no states and no costs; with `--simulate`, a scenario replayed here up to
`--at` seconds. Prints a table, or `--json`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from gpuwatch.agent import Agent, AgentOptions
from gpuwatch.cli.common import EXIT_FAILURE, EXIT_OK, NVML_NOT_FOUND, UsageError
from gpuwatch.cli.console import stdout_console
from gpuwatch.cli.logsetup import configure_logging
from gpuwatch.config import Config, load_config
from gpuwatch.core.clock import Clock, ManualClock, SystemClock
from gpuwatch.core.values import parse_listen_address
from gpuwatch.export.status_json import encode, status_document
from gpuwatch.nvml import NvmlApi, NvmlNotFoundError, load_nvml
from gpuwatch.simulate import Scenario, ScenarioError, SimulatedNvml, load_scenario
from gpuwatch.simulate.services import ScenarioServices
from gpuwatch.status import fetch_status, render_table
from gpuwatch.status.local import MAX_REPLAY_SECONDS, ProgressLine, replay, sample_once
from gpuwatch.tokens import TokenSourceConfig
from gpuwatch.tokens.fetch import Fetch


def add_arguments(status: argparse.ArgumentParser) -> None:
    """`gpuwatch status`'s flags."""
    status.add_argument("--config", type=Path, help="TOML config file")
    status.add_argument(
        "--listen", metavar="ADDR:PORT", help="the agent's address (default: exporter.listen)"
    )
    status.add_argument(
        "--simulate",
        metavar="SCENARIO",
        help="replay a simulated fleet here instead of asking an agent",
    )
    status.add_argument(
        "--at",
        type=float,
        metavar="SECONDS",
        help="simulated time into the scenario (with --simulate; default 0)",
    )
    status.add_argument("--json", action="store_true", help="print JSON (full names)")


def run(args: argparse.Namespace) -> int:
    """Ask the agent; without one, one local sample. `--simulate` replays a scenario here."""
    config = load_config(args.config)
    if args.at is not None and args.simulate is None:
        raise UsageError("--at needs --simulate")
    if args.simulate is not None:
        if args.listen is not None:
            raise UsageError("--listen asks a running agent; --simulate asks none")
        return _print_status(_replayed_status(config, args.simulate, args.at or 0.0), args.json)
    if args.listen is not None:
        _with_listen(config, args.listen)  # validates it
    answer = fetch_status(config.exporter, listen=args.listen)
    if answer.document is not None:
        return _print_status(answer.document, args.json)
    print(
        f"gpuwatch: no status from an agent at {answer.url} ({answer.error}); "
        "showing one local sample: no states, no costs",
        file=sys.stderr,
    )
    document = _local_status(config)
    if document is None:
        return EXIT_FAILURE
    document["agent"] = {"url": answer.url, "error": answer.error}
    return _print_status(document, args.json)


def _quiet_agent(
    config: Config,
    nv: NvmlApi,
    clock: Clock,
    scenario: Scenario | None = None,
    *,
    token_sources: tuple[TokenSourceConfig, ...] = (),
    token_fetch: Fetch | None = None,
) -> Agent:
    """An agent for one command: no Slack dispatcher (it would share a daemon's outbox)."""

    quiet = config.alerts.model_copy(
        update={"slack": config.alerts.slack.model_copy(update={"enabled": False})}
    )
    config = config.model_copy(update={"alerts": quiet})
    if scenario is None:
        return Agent(config, nv, clock)
    return Agent(
        config,
        nv,
        clock,
        AgentOptions(
            extra_workloads=scenario.workloads,
            extra_token_sources=token_sources,
            extra_static_prices=scenario.prices,
            token_fetch=token_fetch,
        ),
    )


def _local_status(config: Config) -> dict[str, Any] | None:
    """One local sample of raw telemetry as a status document; None after an error line."""

    configure_logging("error", config.logging.format)
    nv, clock = load_nvml(), SystemClock()
    agent = _quiet_agent(config, nv, clock)
    try:
        agent.open()
    except NvmlNotFoundError as exc:
        print(
            NVML_NOT_FOUND.format(reason=exc).replace("run --simulate", "status --simulate"),
            file=sys.stderr,
        )
        return None
    try:
        snapshot = sample_once(agent)
    finally:
        agent.stop()
    if not snapshot.collectors[0].success:
        print(f"gpuwatch: NVML failed: {agent.sampler.last_error}", file=sys.stderr)
        return None
    return status_document(snapshot, source="local", analysis=False)


def _replayed_status(config: Config, scenario_name: str, at: float) -> dict[str, Any]:
    """The scenario replayed here from its start to `at` seconds, as an agent sees it."""

    if not 0 <= at < float("inf"):
        raise UsageError("--at must be a number of seconds, 0 or more")
    if at > MAX_REPLAY_SECONDS:
        raise UsageError(
            f"--at {at:g} is beyond the longest replay, {MAX_REPLAY_SECONDS:.0f} s "
            f"({MAX_REPLAY_SECONDS / 86400:g} days)"
        )
    try:
        scenario = load_scenario(scenario_name)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None
    configure_logging("error", config.logging.format)
    clock = ManualClock()
    # slow-call faults and the XID event wait sleep for real, but at most 10 ms
    nv = SimulatedNvml(scenario, clock=clock, sleep=lambda s: time.sleep(min(s, 0.01)))
    # the scenario's inference servers, scraped as a running agent would (no kubelet), their
    # pages read in process: a replay ticks up to 44,640 times
    services = ScenarioServices(nv, clock, cluster=False)
    services.start()
    try:
        sources = services.token_sources()
        agent = _quiet_agent(
            config, nv, clock, scenario, token_sources=sources, token_fetch=services.fetch
        )
        agent.open()
        progress = ProgressLine(sys.stderr) if sys.stderr.isatty() else None
        try:
            snapshot = replay(agent, clock, at, progress=progress)
        finally:
            if progress is not None:
                progress.close()
            agent.stop()
    finally:
        services.stop()
    return status_document(snapshot, source="simulation")


def _print_status(document: dict[str, Any], as_json: bool) -> int:

    if as_json:
        print(encode(document, indent=2).decode())
    else:
        render_table(document, stdout_console())
    return EXIT_OK


def _with_listen(config: Config, listen: str | None) -> Config:
    if listen is None:
        return config
    try:
        parse_listen_address(listen)
    except ValueError as exc:
        raise UsageError(f"--listen: {exc}") from None
    exporter = config.exporter.model_copy(update={"listen": listen})
    return config.model_copy(update={"exporter": exporter})
