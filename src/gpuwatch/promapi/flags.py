"""The `--prometheus-*` flags of the commands that read a Prometheus-compatible API
(`gpuwatch report`, `gpuwatch plan`) and the options they make: one definition for both."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from gpuwatch.core.flag_types import POSITIVE
from gpuwatch.promapi.client import PrometheusOptions


class PrometheusFlagError(Exception):
    """A malformed `--prometheus*` flag: one line naming it, exit 2."""


def add_prometheus_arguments(parser: argparse.ArgumentParser, *, rules: bool = True) -> None:
    """The `--prometheus-*` flags of a command that reads a Prometheus-compatible API
    (`report`, `plan`); `rules`: also `--prometheus-rules` (the report's recording rules)."""
    api = parser.add_argument_group("Prometheus-compatible API (with --prometheus)")
    api.add_argument(
        "--prometheus-header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an extra request header, e.g. 'X-Scope-OrgID: team-a' (repeatable)",
    )
    api.add_argument("--prometheus-bearer-token-file", type=Path, metavar="FILE")
    api.add_argument("--prometheus-user", metavar="NAME", help="basic-auth user")
    api.add_argument("--prometheus-password-file", type=Path, metavar="FILE")
    api.add_argument("--prometheus-ca-file", type=Path, metavar="FILE", help="CA bundle (TLS)")
    api.add_argument(
        "--prometheus-insecure", action="store_true", help="skip TLS certificate verification"
    )
    api.add_argument(
        "--prometheus-timeout",
        type=POSITIVE,
        default=300.0,
        metavar="SECONDS",
        help="a deadline for the whole run: every query ends by then (default 300)",
    )
    api.add_argument(
        "--prometheus-scrape-interval",
        type=POSITIVE,
        metavar="SECONDS",
        help="the agents' scrape interval (default: measured from the samples)",
    )
    if rules:
        api.add_argument(
            "--prometheus-rules",
            choices=("auto", "on", "off"),
            default="off",
            help="the report's recording rules (deploy/prometheus/gpuwatch-report.rules.yml): "
            "read raw series only (off, the default: faster on every fleet measured), use the "
            "rules where found (auto) or require them (on)",
        )


def prometheus_options(args: argparse.Namespace) -> PrometheusOptions | None:
    """The `PrometheusOptions` of the `--prometheus*` flags; None without `--prometheus`.

    Raises PrometheusFlagError naming the flag when one is malformed.
    """
    if getattr(args, "prometheus", None) is None:
        return None
    headers = []
    for header in getattr(args, "prometheus_header", []):
        name, sep, value = header.partition(":")
        if not sep:
            raise PrometheusFlagError("--prometheus-header: expected 'Name: value'")
        headers.append((name.strip(), value.strip()))
    timeout = float(getattr(args, "prometheus_timeout", 300.0))
    try:
        return PrometheusOptions(
            url=args.prometheus,
            headers=tuple(headers),
            bearer_token_file=getattr(args, "prometheus_bearer_token_file", None),
            basic_auth_user=getattr(args, "prometheus_user", None),
            basic_auth_password_file=getattr(args, "prometheus_password_file", None),
            ca_file=getattr(args, "prometheus_ca_file", None),
            insecure_skip_verify=bool(getattr(args, "prometheus_insecure", False)),
            timeout_seconds=timeout,
            deadline=time.monotonic() + timeout if math.isfinite(timeout) else None,
            scrape_interval_seconds=getattr(args, "prometheus_scrape_interval", None),
            rules=str(getattr(args, "prometheus_rules", "off")),
        )
    except ValueError as exc:
        raise PrometheusFlagError(str(exc)) from None
