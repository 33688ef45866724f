"""A small YAML emitter for the apply files: block mappings and sequences, every string
double-quoted and escaped, so a name (a pod, a namespace, a model) can never become YAML
syntax, a second document, an anchor or a different type.

The output is pure ASCII: printable ASCII stays as it is (`"` and `\\` backslash-escaped);
every other character is a YAML escape (`\\n`, `\\uXXXX`, `\\UXXXXXXXX`), which YAML 1.1
and 1.2 parsers read back as the same character. A lone surrogate (an undecodable byte
kept by Python's `surrogateescape`) cannot be written in UTF-8 YAML at all: it becomes
U+FFFD. No third-party library: the agent's image has no YAML package.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

YamlValue = str | int | float | bool | None | Mapping[str, "YamlValue"] | Sequence["YamlValue"]


class Block(str):
    """A multi-line text of ours (a nested YAML file) written as a literal block (`|`)
    when it can be: printable ASCII lines ending in a newline, the first not indented;
    else quoted like any string."""

    __slots__ = ()

    @property
    def as_literal(self) -> bool:
        """Whether a literal block keeps the text exactly."""
        lines = self.split("\n")
        return (
            self.endswith("\n")
            and not self.endswith("\n\n")
            and not self.startswith((" ", "\n"))
            and all(line.isascii() and line.isprintable() for line in lines)
            and all(line == line.rstrip() and line for line in lines[:-1])
        )


_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r", '"': '\\"', "\\": "\\\\", "\0": "\\0"}
_INDENT = "  "


def quote(text: str) -> str:
    """`text` as a YAML double-quoted scalar (ASCII only; see the module docstring)."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _SHORT:
            out.append(_SHORT[char])
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\uFFFD")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04X}")
        else:
            out.append(f"\\U{code:08X}")
    out.append('"')
    return "".join(out)


def scalar(value: str | int | float | bool | None) -> str:
    """One scalar: strings quoted, numbers in Python's shortest round-trip form."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value!r}")
        return repr(value)
    return quote(value)


def _lines(value: YamlValue, depth: int) -> list[str]:
    pad = _INDENT * depth
    if isinstance(value, Mapping):
        if not value:
            return [pad + "{}"]
        out: list[str] = []
        for key, item in value.items():
            out.extend(_entry(pad + quote(str(key)) + ":", item, depth))
        return out
    if isinstance(value, Sequence) and not isinstance(value, str):
        if not value:
            return [pad + "[]"]
        out = []
        for item in value:
            out.extend(_entry(pad + "-", item, depth))
        return out
    return [pad + scalar(value)]


def _entry(head: str, item: YamlValue, depth: int) -> list[str]:
    """`head` (a key and ":", or "-") followed by `item`: inline when scalar or empty; a
    mapping in a sequence starts on the dash's line."""
    if isinstance(item, Block) and item.as_literal:
        pad = _INDENT * (depth + 1)
        return [head + " |", *(pad + line for line in item.split("\n")[:-1])]
    is_collection = isinstance(item, Mapping) or (
        isinstance(item, Sequence) and not isinstance(item, str)
    )
    if not is_collection or not item:
        return [head + " " + _lines(item, 0)[0]]
    lines = _lines(item, depth + 1)
    if head.endswith("-") and isinstance(item, Mapping):
        return [head + " " + lines[0].lstrip(" "), *lines[1:]]
    return [head, *lines]


def dump(value: Mapping[str, YamlValue], header: Sequence[str] = ()) -> str:
    """A YAML document: `header` lines as comments (our own text, one line each), then
    `value` as a block mapping."""
    if any(not line.isprintable() for line in header):
        raise ValueError("a header comment must be one printable line")
    comments = [f"# {line}" for line in header]
    return "\n".join([*comments, *_lines(value, 0)]) + "\n"
