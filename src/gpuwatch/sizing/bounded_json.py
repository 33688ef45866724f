"""Reading a JSON file a user names, with bounds: at most `MAX_BYTES`, nested at most
`MAX_DEPTH` deep.

A config.json is a few kilobytes and nested a handful of levels, but the path comes from
the command line: `/dev/zero` never ends, a FIFO may have no writer, and ``[[[[...`` a
hundred thousand deep makes the standard parser recurse until RecursionError. `read_json`
opens without blocking (a FIFO with no writer reads as empty), refuses a regular file over
the cap from its size alone, reads anything else at most one byte past the cap, and counts
the brackets' depth before parsing. Errors are `BoundedJsonError` (a ValueError) with one
line that names the file; nothing here knows what the JSON means.
"""

from __future__ import annotations

import json
import os
import re
import stat
from itertools import accumulate
from pathlib import Path

MAX_BYTES = 16 * 2**20
"""16 MiB: a config.json is a few KB (Kimi-K2's: 4 KB); a safetensors index ~100 KB."""

MAX_DEPTH = 64
"""Arrays and objects inside each other: configs nest 2-4 levels (quantization_config's
config_groups); Python's parser fails near 1,000 (its recursion limit)."""

_CHUNK_BYTES = 2**20
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class BoundedJsonError(ValueError):
    """A JSON file that is unreadable, too large, too deep or not JSON; one line."""


def _read_bounded(path: Path, max_bytes: int) -> bytes:
    """At most `max_bytes` + 1 bytes of `path`: enough to tell that it is too large."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise BoundedJsonError(f"{path}: is a directory")
        if stat.S_ISREG(info.st_mode) and info.st_size > max_bytes:
            raise BoundedJsonError(
                f"{path}: {info.st_size:,} bytes, more than the {max_bytes:,} a config may have"
            )
        os.set_blocking(fd, True)  # opened non-blocking only so a FIFO without writer returns
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(_CHUNK_BYTES, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:
        raise BoundedJsonError(f"{path}: more than the {max_bytes:,} bytes a config may have")
    return b"".join(chunks)


def nesting_depth(data: bytes) -> int:
    """How deep arrays and objects nest in the JSON text `data` (brackets inside strings
    do not count); unbalanced text gives what its opening brackets reach."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    return max(accumulate(_STEP[b] for b in brackets), default=0)


def read_json(path: Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> object:
    """The JSON value in the file at `path`, read within the bounds.

    Raises `BoundedJsonError` naming `path`: unreadable (the OS's reason), larger than
    `max_bytes`, nested deeper than `max_depth`, not UTF-8 or not JSON.
    """
    try:
        data = _read_bounded(path, max_bytes)
    except OSError as exc:
        raise BoundedJsonError(f"{path}: {exc.strerror or exc}") from None
    depth = nesting_depth(data)
    if depth > max_depth:
        raise BoundedJsonError(
            f"{path}: JSON nested {depth:,} levels deep, more than the {max_depth} a config "
            "may have"
        )
    if not data.strip():
        raise BoundedJsonError(f"{path}: empty")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BoundedJsonError(f"{path}: not UTF-8: {exc.reason} at byte {exc.start}") from None
    except ValueError as exc:  # JSONDecodeError, or an integer of more than 4,300 digits
        raise BoundedJsonError(f"{path}: not JSON: {exc}") from None
