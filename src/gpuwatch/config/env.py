"""`GPUWATCH_<SECTION>__<KEY>` environment overrides: applied, checked, and blamed.

An override is a dotted path into `Config` spelled with double underscores; one whose
path does not fit the config's shape is an error naming the variable (never the file)
and the closest real one. A `GPUWATCH_` variable that is neither an override of an
existing option nor one of `OTHER_VARIABLES` (nor a Kubernetes service link) is an
error too. Secrets are never config text: they are read from files named in the config
or from the environment, and never logged.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from gpuwatch.config.schema import Config
from gpuwatch.config.shape import closest, shape_of
from gpuwatch.slack.secret import ENV_WEBHOOK_URL

ENV_PREFIX = "GPUWATCH_"

OTHER_VARIABLES = {
    ENV_WEBHOOK_URL: "the Slack webhook URL (a secret, never config text)",
    "GPUWATCH_REPORT_PROMETHEUS_URL": "the Helm chart's report CronJob (read by its shell)",
}
"""`GPUWATCH_` variables that are not config overrides and are not errors."""
_SERVICE_LINK = re.compile(
    r"(?:[A-Z0-9_]+_)?(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?"
    r"|PORT_[0-9]+_(?:TCP|UDP|SCTP)(?:_(?:PROTO|PORT|ADDR))?)"
)
_SERVICE_LINK_PORT = re.compile(r"(?:[A-Z0-9_]+_)?PORT")
_SERVICE_LINK_URL = re.compile(r"(?:tcp|udp|sctp)://\S+")


def _service_link(name: str, value: str) -> bool:
    """True for a variable Kubernetes injects for a Service (service links, on by
    default): a Service called `gpuwatch` (the chart's, released as `gpuwatch`) or
    `gpuwatch-...` gives every pod in its namespace `GPUWATCH_SERVICE_HOST`,
    `GPUWATCH_SERVICE_PORT[_<PORT NAME>]`, `GPUWATCH_PORT=tcp://...` and
    `GPUWATCH_PORT_<N>_TCP[_PROTO|_PORT|_ADDR]`. They are not gpuwatch's."""
    rest = name[len(ENV_PREFIX) :]
    if _SERVICE_LINK.fullmatch(rest):
        return True
    return bool(_SERVICE_LINK_PORT.fullmatch(rest) and _SERVICE_LINK_URL.fullmatch(value))


def _parse_env_value(raw: str) -> Any:
    """An override as a plain string (pydantic turns "2.5" and "true" into numbers and
    booleans where a field wants them, and "1234" stays a string where it wants one);
    a value that starts like a TOML array, table or quoted string is read as TOML."""
    if raw.lstrip()[:1] not in ("[", "{", '"', "'"):
        return raw
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _override_names(environ: Mapping[str, str]) -> list[str]:
    """The `GPUWATCH_..__..` variables, sorted; others (the webhook URL) are no overrides."""
    return sorted(n for n in environ if n.startswith(ENV_PREFIX) and "__" in n[len(ENV_PREFIX) :])


def _env_path(name: str) -> list[str]:
    return [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]


def env_override_paths(environ: Mapping[str, str]) -> dict[str, str]:
    """Dotted config path -> the `GPUWATCH_...` variable that sets it."""
    return {".".join(_env_path(name)): name for name in _override_names(environ)}


def _override_problem(parts: list[str], data: Any) -> tuple[str, str] | None:
    """(dotted path, reason) when an override's path does not fit the config's shape:
    an unknown section or option, an item index that is not in the file, a key below
    an option. None when it fits."""
    if "" in parts:
        return ".".join(parts), "empty key (two double underscores in a row, or one at an end)"
    model: type[BaseModel] | None = Config
    node: Any = data
    i = 0
    while i < len(parts):
        part, here = parts[i], ".".join(parts[: i + 1])
        if model is None:
            return here, f"{'.'.join(parts[:i])} is an option, not a section: nothing is below it"
        field = model.model_fields.get(part)
        if field is None:
            kind = "option" if i == len(parts) - 1 else "section"
            return here, f"unknown {kind} (check the spelling against config.example.toml)"
        shape = shape_of(field.annotation)
        node = node.get(part) if isinstance(node, dict) else None
        if shape.is_table and i + 2 < len(parts):
            return ".".join(parts[: i + 2]), f"{here} is a table of values, not of sections"
        if shape.is_table:
            return None
        if shape.is_list and i + 1 < len(parts):
            index_text = parts[i + 1]
            items = node if isinstance(node, list) else []
            if not index_text.isdigit():
                return (
                    f"{here}.{index_text}",
                    f"{here} is a list: the key after it is an item number (0, 1, ...)",
                )
            if int(index_text) >= len(items):
                return (
                    f"{here}.{index_text}",
                    f"no item {int(index_text)}: the file has {len(items)} (an override can "
                    "change an item, not add one)",
                )
            node = items[int(index_text)]
            i += 1
        model = shape.model
        i += 1
    return None


def _apply_one(data: dict[str, Any], parts: list[str], value: Any) -> dict[str, Any]:
    """`data` with `value` at `parts` (copying what it changes; indexes into lists)."""
    head, rest = parts[0], parts[1:]
    merged: Any = dict(data)
    if not rest:
        merged[head] = value
        return dict(merged)
    child = merged.get(head)
    if isinstance(child, list) and rest[0].isdigit() and int(rest[0]) < len(child):
        items = list(child)
        index = int(rest[0])
        inner = items[index] if isinstance(items[index], dict) else {}
        items[index] = _apply_one(inner, rest[1:], value) if rest[1:] else value
        merged[head] = items
    else:
        merged[head] = _apply_one(child if isinstance(child, dict) else {}, rest, value)
    return dict(merged)


def checked_overrides(
    data: dict[str, Any], environ: Mapping[str, str]
) -> tuple[dict[str, Any], list[str]]:
    """`data` with every override that fits applied, and one error line per one that
    does not (blamed on the variable, never on the file)."""
    merged = data
    problems: list[str] = []
    seen: dict[str, str] = {}
    for name in _override_names(environ):
        parts = _env_path(name)
        dotted = ".".join(parts)
        if dotted in seen:
            problems.append(f"{dotted}: set twice, by {seen[dotted]} and by this [{name}]")
            continue
        seen[dotted] = name
        problem = _override_problem(parts, data)
        if problem is not None:
            hint = ""
            if problem[1].startswith("unknown "):
                hint = _did_you_mean(name, [*_option_variables(), *OTHER_VARIABLES])
            problems.append(f"{problem[0]}: {problem[1]}{hint} [{name}]")
            continue
        merged = _apply_one(merged, parts, _parse_env_value(environ[name]))
    return merged, problems


def _option_variables(model: type[BaseModel] = Config, prefix: str = ENV_PREFIX) -> list[str]:
    """The override variable of every option (a list of sections as its item 0)."""
    names: list[str] = []
    for key, field in model.model_fields.items():
        name = f"{prefix}{key.upper()}"
        shape = shape_of(field.annotation)
        if shape.model is not None:
            names += _option_variables(
                shape.model, f"{name}__0__" if shape.is_list else f"{name}__"
            )
        else:
            names.append(name)
    return names


def _closest_variable(name: str, candidates: list[str]) -> str | None:
    """The real variable `name` most likely meant (compared without the prefix, which
    every candidate shares), or None when none is close."""
    rest = {c[len(ENV_PREFIX) :]: c for c in candidates}
    found = closest(name[len(ENV_PREFIX) :].upper(), rest)
    return rest[found] if found else None


def _did_you_mean(name: str, candidates: list[str]) -> str:
    nearest = _closest_variable(name, candidates)
    return f"; did you mean {nearest}?" if nearest else ""


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """One error line per `GPUWATCH_` variable without a double underscore that names
    nothing gpuwatch reads (`GPUWATCH_AGENT_INTERVAL_SECONDS`, one underscore too few):
    it would otherwise be ignored without a word. Names the closest real variable.
    `OTHER_VARIABLES` and Kubernetes' service-link variables are no errors."""
    candidates = [*_option_variables(), *OTHER_VARIABLES]
    lines = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in OTHER_VARIABLES:
            continue
        if _service_link(name, environ[name]):
            continue
        if "__" in name[len(ENV_PREFIX) :]:
            continue  # an override: checked against the config's shape by checked_overrides
        lines.append(
            f"{name}: no such setting (overrides are GPUWATCH_<SECTION>__<OPTION>, two "
            f"underscores between the parts){_did_you_mean(name, candidates)} [{name}]"
        )
    return lines


def apply_env_overrides(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Return `data` with every `GPUWATCH_A__B[__C]=value` set at path a.b[.c].

    A number after a list names an existing item (`GPUWATCH_TOKEN_SOURCES__0__URL`).
    Variables without a double underscore (such as `GPUWATCH_SLACK_WEBHOOK_URL`) are not
    config overrides and are left alone here. No check against the config's shape here:
    `validate_config` reports overrides that do not fit it and leaves them out, and
    reports the other `GPUWATCH_` variables that name nothing (`unknown_variables`).
    """
    merged = data
    for name in _override_names(environ):
        merged = _apply_one(merged, _env_path(name), _parse_env_value(environ[name]))
    return merged


def source_of(path: str, origin: str, env_paths: Mapping[str, str]) -> str:
    """Who set the option at dotted `path`: the variable that set it, a part of it or a
    section around it, else `origin` (the file, or "defaults")."""
    for env_path, var in env_paths.items():
        if path == env_path or path.startswith(env_path + ".") or env_path.startswith(path + "."):
            return var
    return origin
