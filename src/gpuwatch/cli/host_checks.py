"""Checks of a config against the host it will run on: what `gpuwatch run` would refuse.

`check_config` is what `gpuwatch check-config` and `gpuwatch run` call: the file's field
errors, the override errors and these host checks, all in one pass, one line each with
the dotted path and the file or variable that set it. Checked here: the TLS certificate
and key load; the basic-auth password file and the Slack webhook URL (variable or file)
can be read; the state directory can be used when something keeps state there; the
listen host resolves to an address of this host. Messages name fields and files, never
a secret's content. Not checked: that the listen port is free and that the token
sources' GPUs exist (both are known only when the agent starts).
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Mapping
from pathlib import Path

from gpuwatch.alerts import WebhookSecretError
from gpuwatch.config import Config, ConfigError, ExporterConfig, validate_config
from gpuwatch.core.paths import usable_directory
from gpuwatch.core.values import parse_listen_address
from gpuwatch.slack.secret import ENV_WEBHOOK_URL, resolve_webhook_url


def _read_problem(field: str, path: Path) -> str | None:
    """Why the secret file at `path` cannot be used, as `field: reason`; None when it can."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return f"{field}: {path}: no such file"
    except IsADirectoryError:
        return f"{field}: {path}: is a directory, not a file"
    except OSError as exc:
        return f"{field}: {path}: cannot read: {exc.strerror}"
    except UnicodeDecodeError:
        return f"{field}: {path}: not UTF-8 text"
    if not text.strip():
        return f"{field}: {path}: the file is empty"
    return None


def secret_file_problems(exporter: ExporterConfig) -> list[str]:
    """The TLS and basic-auth files can be read and used, as `field: reason` lines."""
    problems = []
    if exporter.basic_auth_password_file is not None:
        problem = _read_problem(
            "exporter.basic_auth_password_file", exporter.basic_auth_password_file
        )
        problems += [problem] if problem else []
    cert, key = exporter.tls_cert_file, exporter.tls_key_file
    if cert is not None and key is not None:
        unreadable = [
            p
            for p in (
                _read_problem("exporter.tls_cert_file", cert),
                _read_problem("exporter.tls_key_file", key),
            )
            if p
        ]
        problems += unreadable
        if not unreadable:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            try:
                context.load_cert_chain(str(cert), str(key))
            except OSError as exc:  # ssl.SSLError is an OSError
                detail = exc.strerror or getattr(exc, "reason", None) or type(exc).__name__
                problems.append(
                    f"exporter.tls_cert_file: cannot load the certificate and key: {detail}"
                )
    return problems


def listen_problems(exporter: ExporterConfig) -> list[str]:
    """The listen host resolves, and to an address of this host (a bind to port 0)."""
    host, _ = parse_listen_address(exporter.listen)
    try:
        infos = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return [f"exporter.listen: {host} does not resolve: {reason}"]
    family, kind, proto, _, address = infos[0]
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.bind(address)
    except OSError as exc:
        return [f"exporter.listen: cannot listen on {host}: {exc.strerror}"]
    return []


def state_dir_users(
    config: Config, environ: Mapping[str, str], *, default_history: bool = False
) -> list[str]:
    """What keeps files in `agent.state_dir` with this config (the Slack alert outbox,
    the AWS price cache, a history store set to `enabled = true`); empty when nothing
    does. An unset `history.enabled` needs nothing to run (the history is then off without
    a usable state_dir), but counts with `default_history` (what `check-config` reports)."""
    users = []
    slack = config.alerts.slack
    if slack.enabled and (environ.get(ENV_WEBHOOK_URL, "").strip() or slack.webhook_url_file):
        users.append("the Slack alert outbox")
    if config.billing.pricing_api:
        users.append("the AWS price cache")
    if config.history.enabled:
        users.append("the history store")
    elif config.history.enabled is None and default_history:
        users.append(
            "the history store, which is on while history.enabled is unset; set it to false "
            "to run without"
        )
    return users


def host_problems(
    config: Config,
    environ: Mapping[str, str],
    skip: frozenset[str] = frozenset(),
    *,
    default_history: bool = False,
) -> list[str]:
    """Every host check of `config` as `field: reason` lines; sections in `skip` (invalid
    ones) are not checked. `default_history`: a history left on by default needs a usable
    state_dir too (`state_dir_users`)."""
    problems: list[str] = []
    if "exporter" not in skip:
        problems += secret_file_problems(config.exporter)
        problems += listen_problems(config.exporter)
    if "alerts" not in skip and config.alerts.slack.enabled:
        try:
            resolve_webhook_url(config.alerts.slack, environ)
        except WebhookSecretError as exc:
            message = str(exc)
            if message.startswith(ENV_WEBHOOK_URL):
                problems.append(f"alerts.slack: {message}")
            else:
                field = "alerts.slack.webhook_url_file"
                problems.append(f"{field}: {message.removeprefix(field + ' ')}")
    users = state_dir_users(config, environ, default_history=default_history)
    if "agent" not in skip and users:
        reason = usable_directory(config.agent.state_dir)
        if reason:
            problems.append(f"agent.state_dir: {reason} (needed by {' and '.join(users)})")
    return problems


def check_config(
    path: Path | None,
    environ: Mapping[str, str] | None = None,
    *,
    on_host: bool = True,
    listen: str | None = None,
    default_history: bool = False,
) -> Config:
    """`load_config` plus, with `on_host`, the host checks: every problem in one
    ConfigError, one `path: reason [source]` line each.

    `default_history` (`gpuwatch check-config`): an unusable state_dir is an error also
    when `history.enabled` is unset, where `gpuwatch run` would start without history.

    `listen` replaces `exporter.listen` (the `--listen` of `gpuwatch run`); its problems
    are blamed on `--listen`.
    """
    env = os.environ if environ is None else environ
    result = validate_config(path, env)
    errors = list(result.errors)
    config = result.config
    listen_source: str | None = None
    if listen is not None:
        listen_source = "--listen"
        try:
            parse_listen_address(listen)
        except ValueError as exc:
            errors.append(f"exporter.listen: {exc} [--listen]")
        else:
            exporter = config.exporter.model_copy(update={"listen": listen})
            config = config.model_copy(update={"exporter": exporter})
    if on_host:
        problems = host_problems(config, env, result.bad_sections, default_history=default_history)
        for line in problems:
            field, _, reason = line.partition(": ")
            source = result.source(field)
            if field == "exporter.listen" and listen_source is not None:
                source = listen_source
            if field == "alerts.slack" and reason.startswith(ENV_WEBHOOK_URL):
                source = ENV_WEBHOOK_URL
            errors.append(f"{line} [{source}]")
    if errors:
        raise ConfigError(errors)
    return config
