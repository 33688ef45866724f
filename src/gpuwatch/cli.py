"""The `gpuwatch` command line: run, status, check-config, size, tco, alert test, report, plan.

Exit codes: 0 ok, 1 runtime failure, 2 bad usage or bad config. Errors a user can fix
are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import gpuwatch.alerts as alerting
from gpuwatch import __version__
from gpuwatch.alerts import WebhookSecretError
from gpuwatch.config import Config, ConfigError, config_warnings, load_config, render_config
from gpuwatch.core.clock import Clock, ScaledClock, SystemClock
from gpuwatch.core.values import parse_listen_address
from gpuwatch.heap import trim_heap
from gpuwatch.host_checks import check_config, state_dir_users
from gpuwatch.logsetup import configure_logging
from gpuwatch.state_lock import StateDirBusyError, StateDirLock
from gpuwatch.stdout import EXIT_BROKEN_PIPE, reader_gone, silence
from gpuwatch.workloads import WorkloadDeclaration

if TYPE_CHECKING:
    from gpuwatch.agent import Agent
    from gpuwatch.simulate import Scenario
    from gpuwatch.tokens import TokenSourceConfig
    from gpuwatch.tokens.collector import Fetch

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

NVML_NOT_FOUND = (
    "gpuwatch: NVML was not found ({reason}): is the NVIDIA driver installed? "
    "To try gpuwatch without a GPU, run: gpuwatch run --simulate demo"
)


class UsageError(Exception):
    """A mistake in the command line or config: one line, exit 2."""


def _parser(*, daemon_only: bool = False) -> argparse.ArgumentParser:
    """The command line; with `daemon_only`, for `gpuwatch run` alone: the other
    commands' modules (report, sizing, tco, alert) are then not even imported."""
    parser = argparse.ArgumentParser(prog="gpuwatch", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"gpuwatch {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the agent daemon")
    run.add_argument("--config", type=Path, help="TOML config file")
    run.add_argument("--simulate", metavar="SCENARIO", help="run on a simulated fleet")
    run.add_argument("--speed", type=float, help="simulated seconds per real second")
    run.add_argument("--listen", metavar="ADDR:PORT", help="override exporter.listen")
    run.add_argument(
        "--services",
        type=Path,
        metavar="FILE",
        help="with --simulate: use the scenario's simulated kubelet and inference servers "
        "that `python -m gpuwatch.simulate.services` runs in another process and described "
        "in FILE, instead of starting them in this one",
    )

    status = commands.add_parser(
        "status", help="what the agent on this host says about its GPUs (states, costs)"
    )
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

    check = commands.add_parser(
        "check-config",
        help="validate a config file and check it against this host, as `run` would",
    )
    check.add_argument("file", type=Path)
    check.add_argument(
        "--no-host-checks",
        action="store_true",
        help="check the file alone: not its files, state directory and listen address",
    )

    if daemon_only:
        return parser
    from gpuwatch.alerts.command import add_alert_parser  # noqa: PLC0415 - keep run light
    from gpuwatch.commands.size import add_size_parser  # noqa: PLC0415
    from gpuwatch.commands.tco import add_tco_parser  # noqa: PLC0415
    from gpuwatch.plan.command import add_plan_parser  # noqa: PLC0415
    from gpuwatch.report.command import add_report_parser  # noqa: PLC0415

    add_size_parser(commands)
    add_tco_parser(commands)
    add_alert_parser(commands)
    add_report_parser(commands)
    add_plan_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `gpuwatch` command. When standard output's reader goes away
    (`gpuwatch size --json | head`), the command ends quietly with EXIT_BROKEN_PIPE."""
    try:
        code = _main(sys.argv[1:] if argv is None else list(argv))
        sys.stdout.flush()  # here, not at exit: a broken pipe raises in the try
    except BrokenPipeError:
        if not reader_gone():
            raise  # a socket's, not standard output's
        silence()
        return EXIT_BROKEN_PIPE
    return code


def _main(argv: list[str]) -> int:
    args = _parser(daemon_only=argv[:1] == ["run"]).parse_args(argv)
    try:
        if args.command == "check-config":
            return _check_config(args.file, on_host=not args.no_host_checks)
        if args.command == "run":
            return _run(args)
        if args.command == "status":
            return _status(args)
        if args.command == "size":
            from gpuwatch.commands.size import run_size  # noqa: PLC0415

            config = load_config(args.config)
            return run_size(
                args,
                gpu_overrides=config.sizing.gpus,
                extra_models=config.sizing.models,
                rent_vs_buy=config.rent_vs_buy,
            )
        if args.command == "tco":
            from gpuwatch.commands.tco import run_tco  # noqa: PLC0415

            config = load_config(args.config)
            return run_tco(args, gpu_overrides=config.sizing.gpus, rent_vs_buy=config.rent_vs_buy)
        if args.command == "alert":
            from gpuwatch.alerts.command import run_alert  # noqa: PLC0415

            config = load_config(args.config)
            hostname = config.agent.hostname or socket.gethostname()
            return run_alert(args, slack=config.alerts.slack, hostname=hostname, environ=os.environ)
        if args.command == "report":
            from gpuwatch.report.command import run_report  # noqa: PLC0415

            return run_report(args, load_config(args.config))
        if args.command == "plan":
            from gpuwatch.plan.command import run_plan  # noqa: PLC0415

            return run_plan(args, load_config(args.config))
    except ConfigError as exc:
        for line in exc.errors:
            print(f"gpuwatch: {line}", file=sys.stderr)
        return EXIT_USAGE
    # (alerting.OutboxError is looked up only when something is raised: no sqlite3 before)
    except (UsageError, WebhookSecretError, alerting.OutboxError) as exc:
        print(f"gpuwatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    raise AssertionError(args.command)  # argparse only lets known commands through


def _check_config(path: Path, *, on_host: bool) -> int:
    config = check_config(path, on_host=on_host, default_history=True)
    print(render_config(config), end="")
    for warning in config_warnings(config):
        print(f"gpuwatch: warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _nvml(
    simulate: str | None, speed: float | None, external: Any = None
) -> tuple[Any, Clock, tuple[WorkloadDeclaration, ...]]:
    """The pynvml module (real, or the stand-in), its clock, the scenario's workloads;
    `external` (`ExternalServices`): on their simulated time."""
    if simulate is None:
        if speed is not None:
            raise UsageError("--speed needs --simulate")
        from gpuwatch.nvml import load_nvml  # noqa: PLC0415 - keep startup light

        return load_nvml(), SystemClock(), ()
    if speed is not None and speed <= 0:
        raise UsageError("--speed must be positive")
    from gpuwatch.simulate import SimulatedNvml, load_scenario  # noqa: PLC0415
    from gpuwatch.simulate.scenario import ScenarioError  # noqa: PLC0415

    try:
        scenario = load_scenario(simulate)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None
    if external is None:
        clock = ScaledClock(speed or 1.0)
        nv = SimulatedNvml(scenario, clock=clock)
        return nv, clock, scenario.workloads
    if speed is not None and speed != external.speed:
        raise UsageError(f"--speed {speed:g}: the --services run at --speed {external.speed:g}")
    clock = external.clock()
    nv = SimulatedNvml(scenario, clock=clock, start_time=external.scenario_start)
    return nv, clock, scenario.workloads


def _with_listen(config: Config, listen: str | None) -> Config:
    if listen is None:
        return config
    try:
        parse_listen_address(listen)
    except ValueError as exc:
        raise UsageError(f"--listen: {exc}") from None
    exporter = config.exporter.model_copy(update={"listen": listen})
    return config.model_copy(update={"exporter": exporter})


def _run(args: argparse.Namespace) -> int:
    config = check_config(args.config, listen=args.listen)
    configure_logging(config.logging.level, config.logging.format)
    try:
        lock = _lock_state_dir(config, simulated=bool(args.simulate))
    except StateDirBusyError as exc:
        print(f"gpuwatch: agent.state_dir: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        external = _external_services(args.simulate, args.services)
        nv, clock, workloads = _nvml(args.simulate, args.speed, external)
        if external is not None:
            services = external
        else:
            services = _scenario_services(nv, clock) if args.simulate else None
        try:
            return _serve(config, nv, clock, args, workloads=workloads, services=services)
        finally:
            if services is not None:
                services.stop()
    finally:
        if lock is not None:
            lock.release()


def _external_services(simulate: str | None, path: Path | None) -> Any:
    """The `--services` FILE's services (`ExternalServices`); None without one."""
    if path is None:
        return None
    if simulate is None:
        raise UsageError("--services needs --simulate")
    from gpuwatch.simulate.endpoints import EndpointsError, load_endpoints  # noqa: PLC0415

    try:
        return load_endpoints(path, simulate)
    except EndpointsError as exc:
        raise UsageError(f"--services: {exc}") from None


def _scenario_services(nv: Any, clock: Clock) -> Any:
    from gpuwatch.simulate.services import ScenarioServices  # noqa: PLC0415

    services = ScenarioServices(nv, clock)
    services.start()
    return services


def _lock_state_dir(config: Config, *, simulated: bool) -> StateDirLock | None:
    """Lock `agent.state_dir` when this run keeps anything there (the outbox, the price
    cache, the history); None when it keeps nothing or the directory is unusable (the
    host checks and the history say why, each in its own line)."""
    from gpuwatch.history import history_wanted  # noqa: PLC0415

    keeps_files = bool(state_dir_users(config, os.environ))
    if not keeps_files and history_wanted(config, simulated=simulated) is not None:
        return None
    try:
        return StateDirLock.acquire(config.agent.state_dir)
    except OSError:  # not StateDirBusyError: that one goes up
        return None


def _serve(
    config: Config,
    nv: Any,
    clock: Clock,
    args: argparse.Namespace,
    *,
    workloads: tuple[WorkloadDeclaration, ...],
    services: Any,
) -> int:
    from gpuwatch.agent import Agent  # noqa: PLC0415
    from gpuwatch.nvml import NvmlNotFoundError  # noqa: PLC0415

    agent = Agent(
        config,
        nv,
        clock,
        speed=args.speed or 1.0,
        extra_workloads=workloads,
        extra_token_sources=() if services is None else services.token_sources(),
        extra_static_prices=nv.scenario.prices if services is not None else (),
        kubernetes=None if services is None else services.kubernetes_config(),
    )
    try:
        agent.open()
    except NvmlNotFoundError as exc:
        print(NVML_NOT_FOUND.format(reason=exc), file=sys.stderr)
        return EXIT_FAILURE
    agent.open_history(simulated=services is not None)
    stop = threading.Event()

    def _on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        agent.start()
    except OSError as exc:
        print(
            f"gpuwatch: cannot listen on {config.exporter.listen}: {exc.strerror}", file=sys.stderr
        )
        agent.stop()
        return EXIT_FAILURE
    trim_heap()  # start-up's freed memory back to the system (gpuwatch.heap)
    while not stop.wait(0.5):
        fatal = agent.fatal_reason
        if fatal is not None:  # e.g. a driver upgraded under us: a restart recovers
            agent.stop()
            print(f"gpuwatch: {fatal}", file=sys.stderr)
            return EXIT_FAILURE
    agent.stop()
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    """Ask the agent; without one, one local sample. `--simulate` replays a scenario here."""
    from gpuwatch.status import fetch_status  # noqa: PLC0415 - keep startup light

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
    nv: Any,
    clock: Clock,
    scenario: Scenario | None = None,
    *,
    token_sources: tuple[TokenSourceConfig, ...] = (),
    token_fetch: Fetch | None = None,
) -> Agent:
    """An agent for one command: no Slack dispatcher (it would share a daemon's outbox)."""
    from gpuwatch.agent import Agent  # noqa: PLC0415

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
        extra_workloads=scenario.workloads,
        extra_token_sources=token_sources,
        extra_static_prices=scenario.prices,
        token_fetch=token_fetch,
    )


def _local_status(config: Config) -> dict[str, Any] | None:
    """One local sample of raw telemetry as a status document; None after an error line."""
    from gpuwatch.export.status_json import status_document  # noqa: PLC0415
    from gpuwatch.nvml import NvmlNotFoundError  # noqa: PLC0415
    from gpuwatch.status.local import sample_once  # noqa: PLC0415

    configure_logging("error", config.logging.format)
    nv, clock, _ = _nvml(None, None)
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
    from gpuwatch.core.clock import ManualClock  # noqa: PLC0415
    from gpuwatch.export.status_json import status_document  # noqa: PLC0415
    from gpuwatch.simulate import ScenarioError, SimulatedNvml, load_scenario  # noqa: PLC0415
    from gpuwatch.simulate.services import ScenarioServices  # noqa: PLC0415
    from gpuwatch.status.local import MAX_REPLAY_SECONDS, ProgressLine, replay  # noqa: PLC0415

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
    from gpuwatch.console import stdout_console  # noqa: PLC0415
    from gpuwatch.export.status_json import encode  # noqa: PLC0415
    from gpuwatch.status import render_table  # noqa: PLC0415

    if as_json:
        print(encode(document, indent=2).decode())
    else:
        render_table(document, stdout_console())
    return EXIT_OK
