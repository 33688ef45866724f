"""`gpuwatch run`: the agent daemon, and its process lifecycle.

Loads and checks the config as `check-config` does, locks `agent.state_dir`, opens NVML
(or a simulated fleet, with its kubelet and inference servers), starts the agent, then
waits: SIGTERM or SIGINT stop it (exit 0), a fatal agent error ends it (exit 1, one
line). The simulated fleet's modules (`gpuwatch.simulate`) are imported only with
`--simulate`: a real host's agent never loads the stand-in.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from gpuwatch.agent import Agent, AgentOptions
from gpuwatch.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    NVML_NOT_FOUND,
    Fleet,
    UsageError,
)
from gpuwatch.cli.heap import trim_heap
from gpuwatch.cli.host_checks import check_config, state_dir_users
from gpuwatch.cli.logsetup import configure_logging
from gpuwatch.cli.state_lock import StateDirBusyError, StateDirLock
from gpuwatch.config import Config
from gpuwatch.core.clock import SystemClock
from gpuwatch.history import history_wanted
from gpuwatch.nvml import NvmlNotFoundError, load_nvml


def add_arguments(run: argparse.ArgumentParser) -> None:
    """`gpuwatch run`'s flags."""
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


def run(args: argparse.Namespace) -> int:
    """Run the agent until a signal or a fatal error."""
    config = check_config(args.config, listen=args.listen)
    configure_logging(config.logging.level, config.logging.format)
    try:
        lock = _lock_state_dir(config, simulated=bool(args.simulate))
    except StateDirBusyError as exc:
        print(f"gpuwatch: agent.state_dir: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.simulate is None:
            if args.services is not None:
                raise UsageError("--services needs --simulate")
            if args.speed is not None:
                raise UsageError("--speed needs --simulate")
            fleet = Fleet(load_nvml(), SystemClock())
        else:
            # the stand-in, only for a simulated fleet: a real host's agent never loads it
            from gpuwatch.cli.simulated import simulated_fleet  # noqa: PLC0415

            fleet = simulated_fleet(args.simulate, args.speed, args.services)
        try:
            return _serve(config, fleet, args)
        finally:
            if fleet.services is not None:
                fleet.services.stop()
    finally:
        if lock is not None:
            lock.release()


def _lock_state_dir(config: Config, *, simulated: bool) -> StateDirLock | None:
    """Lock `agent.state_dir` when this run keeps anything there (the outbox, the price
    cache, the history); None when it keeps nothing or the directory is unusable (the
    host checks and the history say why, each in its own line)."""
    keeps_files = bool(state_dir_users(config, os.environ))
    if not keeps_files and history_wanted(config, simulated=simulated) is not None:
        return None
    try:
        return StateDirLock.acquire(config.agent.state_dir)
    except OSError:  # not StateDirBusyError: that one goes up
        return None


def _serve(config: Config, fleet: Fleet, args: argparse.Namespace) -> int:
    nv, clock, services = fleet.nv, fleet.clock, fleet.services
    agent = Agent(
        config,
        nv,
        clock,
        AgentOptions(
            speed=args.speed or 1.0,
            extra_workloads=fleet.workloads,
            extra_token_sources=() if services is None else services.token_sources(),
            extra_static_prices=fleet.prices,
            kubernetes=None if services is None else services.kubernetes_config(),
            slurm=fleet.slurm,
        ),
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
    trim_heap()  # start-up's freed memory back to the system (gpuwatch.cli.heap)
    while not stop.wait(0.5):
        fatal = agent.fatal_reason
        if fatal is not None:  # e.g. a driver upgraded under us: a restart recovers
            agent.stop()
            print(f"gpuwatch: {fatal}", file=sys.stderr)
            return EXIT_FAILURE
    agent.stop()
    return EXIT_OK
