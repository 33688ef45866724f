"""Paths: whether a directory can hold state (the one check the agent's state users, the
history and the CLI's pre-flight checks, share; it writes nothing), and the one way a
file is written whole or not at all (`write_atomic`)."""

from __future__ import annotations

import os
from pathlib import Path


def usable_directory(path: Path) -> str | None:
    """Why `path` cannot hold state (be created, written, searched); None when it can."""
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        return f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        verb = "write to" if existing == path else "create"
        target = existing if existing == path else path
        read_only = os.statvfs(existing).f_flag & os.ST_RDONLY
        why = "read-only file system" if read_only else "permission denied"
        return f"cannot {verb} {target}: {why}"
    return None


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through `<path>.partial` and a rename: a reader sees the old
    file or the whole new one, never a part."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    partial.replace(path)
