"""The effective config as TOML text: what `gpuwatch check-config` prints.

A small TOML writer for the shapes `Config` dumps to (tables, arrays of tables,
scalars, lists and inline tables); unset options are shown as comments.
"""

from __future__ import annotations

import json
from typing import Any

from gpuwatch.config.schema import Config


def render_config(config: Config) -> str:
    """The effective config as TOML text (unset options shown as comments)."""
    lines: list[str] = []
    _render_table(config.model_dump(mode="json"), [], lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _is_table_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _render_table(table: dict[str, Any], path: list[str], lines: list[str]) -> None:
    """Scalars first, then sub-tables and arrays of tables, as TOML requires."""
    for key, value in table.items():
        if isinstance(value, dict) or _is_table_list(value):
            continue
        if value is None:
            lines.append(f"# {key} is not set")
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in table.items():
        if isinstance(value, dict):
            lines.extend(["", f"[{'.'.join([*path, key])}]"])
            _render_table(value, [*path, key], lines)
        elif _is_table_list(value):
            for item in value:
                lines.extend(["", f"[[{'.'.join([*path, key])}]]"])
                _render_table(item, [*path, key], lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + items + " }"
    return json.dumps(str(value))  # a JSON string is a valid TOML basic string
