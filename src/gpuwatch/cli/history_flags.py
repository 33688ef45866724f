"""The flags `gpuwatch report` and `gpuwatch plan` share: where the history comes from
(this host's, or a Prometheus-compatible API with its `--prometheus-*` flags) and where
the output goes (`--config`, `--format`, `--out`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuwatch.promapi.flags import add_prometheus_arguments


def add_source_arguments(parser: argparse.ArgumentParser, *, rules: bool) -> None:
    """`--source local` or `--prometheus URL` (one of them), and the API's flags;
    `rules`: also `--prometheus-rules`."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--source", choices=("local",), default="local", help="this host's history (default)"
    )
    source.add_argument("--prometheus", metavar="URL", help="a Prometheus-compatible API (fleet)")
    add_prometheus_arguments(parser, rules=rules)


def add_output_arguments(parser: argparse.ArgumentParser, *, formats_help: str) -> None:
    """`--config FILE`, `--format LIST` (into `args.formats`) and `--out DIR`."""
    parser.add_argument("--config", type=Path, help="TOML config file")
    parser.add_argument("--format", dest="formats", metavar="LIST", help=formats_help)
    parser.add_argument("--out", type=Path, metavar="DIR", help="directory for the files")
