"""`gpuwatch check-config FILE`: validate a config and check it against this host.

Prints the config as `run` would use it (every default filled in), then one warning
line per field that is legal but probably not meant; errors exit 2 (`ConfigError`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuwatch.cli.common import EXIT_OK
from gpuwatch.cli.host_checks import check_config
from gpuwatch.config import config_warnings, render_config


def add_arguments(check: argparse.ArgumentParser) -> None:
    """`gpuwatch check-config`'s arguments."""
    check.add_argument("file", type=Path)
    check.add_argument(
        "--no-host-checks",
        action="store_true",
        help="check the file alone: not its files, state directory and listen address",
    )


def run(args: argparse.Namespace) -> int:
    """Check `args.file` (and, unless `--no-host-checks`, this host) and print it."""
    config = check_config(args.file, on_host=not args.no_host_checks, default_history=True)
    print(render_config(config), end="")
    for warning in config_warnings(config):
        print(f"gpuwatch: warning: {warning}", file=sys.stderr)
    return EXIT_OK
