"""The `gpuwatch` command line: run, status, check-config, size, tco, alert test, report, plan, job.

Exit codes: 0 ok, 1 runtime failure, 2 bad usage or bad config. Errors a user can fix
are one line on stderr, never a traceback.

`COMMANDS` is the table of subcommands: each row names the module that implements the
command, and that module is imported (here, with importlib: the one lazy import of the
package) only when its command runs or the whole command line is built, so that
`gpuwatch run` never loads the report, plan, sizing or tco code
(tests/test_plain_imports.py). Each command's module has `add_arguments(parser)` and
`run(args) -> int`, and imports what it needs at module level; `common` holds what they
share. The process lifecycle of `gpuwatch run` is `run`'s. What must not live here: a
command's own arguments or work, anything a library (report, plan, the agent) imports.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple, Protocol

import gpuwatch.alerts as alerting
from gpuwatch import __version__
from gpuwatch.alerts import WebhookSecretError
from gpuwatch.cli.common import EXIT_USAGE, UsageError
from gpuwatch.cli.stdout import EXIT_BROKEN_PIPE, reader_gone, silence
from gpuwatch.config import ConfigError


class Command(NamedTuple):
    """One subcommand: its name, the module that implements it, its one-line help."""

    name: str
    module: str
    help: str


COMMANDS = (
    Command("run", "gpuwatch.cli.run", "run the agent daemon"),
    Command(
        "status",
        "gpuwatch.cli.status",
        "what the agent on this host says about its GPUs (states, costs)",
    ),
    Command(
        "check-config",
        "gpuwatch.cli.check_config",
        "validate a config file and check it against this host, as `run` would",
    ),
    Command(
        "size",
        "gpuwatch.cli.size",
        "VRAM breakdown, which GPUs fit, tokens/s and $/1M tokens",
    ),
    Command(
        "tco",
        "gpuwatch.cli.tco",
        "rent vs buy: totals, break-even utilization, $/1M tokens owned vs rented",
    ),
    Command("alert", "gpuwatch.cli.alert", "alert channels"),
    Command(
        "report",
        "gpuwatch.cli.report",
        "the GPU cost report of a month (or days) from local history or Prometheus",
    ),
    Command(
        "plan",
        "gpuwatch.cli.plan",
        "the cheapest set of GPUs that holds every workload's measured need",
    ),
    Command(
        "job",
        "gpuwatch.cli.job",
        "a Slurm job's GPU-hours, activity, memory, cost and what to request next time",
    ),
)
"""Every subcommand, in the order `gpuwatch --help` lists them."""

DAEMON_COMMANDS = 3
"""`gpuwatch run`'s command line lists only the first rows (run, status, check-config)."""


class CommandModule(Protocol):
    """What a command's module provides."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def command(name: str) -> Command:
    """The row of the subcommand `name`."""
    return next(row for row in COMMANDS if row.name == name)


def _module(row: Command) -> CommandModule:
    module: CommandModule = importlib.import_module(row.module)
    return module


def add_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str
) -> argparse.ArgumentParser:
    """Register the subcommand `name` with its arguments; returns its parser."""
    row = command(name)
    parser = subparsers.add_parser(row.name, help=row.help)
    _module(row).add_arguments(parser)
    return parser


def _parser(*, only: str | None = None) -> argparse.ArgumentParser:
    """The command line. With `only` (the command about to run), only that command's
    module is imported and given its arguments; for `run`, only the daemon's commands
    are listed, and the other commands' modules (report, sizing, tco, alert) are not
    even imported."""
    parser = argparse.ArgumentParser(prog="gpuwatch", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"gpuwatch {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    rows = COMMANDS[:DAEMON_COMMANDS] if only == "run" else COMMANDS
    for row in rows:
        if only is None or row.name == only:
            add_command(subparsers, row.name)
        else:
            subparsers.add_parser(row.name, help=row.help)
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
    names = {row.name for row in COMMANDS}
    only = argv[0] if argv and argv[0] in names else None
    args = _parser(only=only).parse_args(argv)
    try:
        return _module(command(args.command)).run(args)
    except ConfigError as exc:
        for line in exc.errors:
            print(f"gpuwatch: {line}", file=sys.stderr)
        return EXIT_USAGE
    # (alerting.OutboxError is looked up only when something is raised: no sqlite3 before)
    except (UsageError, WebhookSecretError, alerting.OutboxError) as exc:
        print(f"gpuwatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
