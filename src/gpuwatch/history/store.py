"""The SQLite file: open (WAL, migrations), upsert whole rows, read them back, prune.

Rows hold an hour's *absolute* totals, written with `INSERT ... ON CONFLICT DO UPDATE`
in one transaction per write, so writing a row twice changes nothing and a kill -9
leaves every row as of the last commit. Only the writer thread writes; readers (the
restore at start, `gpuwatch report`) open their own connection.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuwatch.history.schema import (
    GPU_COLUMNS,
    MIGRATIONS,
    POD_COLUMNS,
    SCHEMA_VERSION,
    STATE_TABLE_COLUMNS,
    TOKEN_COLUMNS,
)

HISTORY_FILE = "history.sqlite3"

Row = Mapping[str, Any]
Connect = Callable[[Path], sqlite3.Connection]


def default_connect(path: Path) -> sqlite3.Connection:
    """A connection usable from the one thread that holds the store's lock."""
    return sqlite3.connect(path, timeout=5.0, check_same_thread=False, isolation_level=None)


class HistoryStoreError(Exception):
    """The file cannot be opened or is from a newer gpuwatch."""


class HistoryStore:
    """One connection to the history file; every method holds a lock."""

    def __init__(self, path: Path, connect: Connect = default_connect) -> None:
        """Open (creating the file and its directory) and migrate; HistoryStoreError when
        that fails."""
        self.path = path
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = connect(path)
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self.migrate()
        except (OSError, sqlite3.Error) as exc:
            raise HistoryStoreError(f"cannot open {path}: {exc}") from exc

    def version(self) -> int:
        """The schema version of the file (0: empty)."""
        exists = self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'"
        ).fetchone()
        if exists is None:
            return 0
        row = self._conn.execute("SELECT version FROM schema_version").fetchone()
        return 0 if row is None else int(row[0])

    def migrate(self) -> None:
        """Run the migrations after the file's version, each in its own transaction."""
        with self._lock:
            version = self.version()
            if version > SCHEMA_VERSION:
                raise HistoryStoreError(
                    f"{self.path} has schema version {version}; this gpuwatch knows "
                    f"{SCHEMA_VERSION} (a newer gpuwatch wrote it)"
                )
            for number in range(version + 1, SCHEMA_VERSION + 1):
                script = MIGRATIONS[number - 1]
                statements = [s for s in script.split(";") if s.strip()]
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in statements:
                        self._conn.execute(statement)
                    self._conn.execute(
                        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
                    )
                    self._conn.execute("DELETE FROM schema_version")
                    self._conn.execute("INSERT INTO schema_version VALUES (?)", (number,))
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise

    def write(
        self,
        gpu_rows: Sequence[Row],
        token_rows: Sequence[Row] = (),
        states: Sequence[Row] = (),
        prune_before: float | None = None,
        pod_rows: Sequence[Row] = (),
    ) -> None:
        """Upsert every row (absolute values) in one transaction; sqlite3.Error on failure
        (nothing written then)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                _upsert(self._conn, "gpu_hours", GPU_COLUMNS, ("uuid", "hour_start"), gpu_rows)
                _upsert(
                    self._conn, "token_hours", TOKEN_COLUMNS, ("source", "hour_start"), token_rows
                )
                _upsert(self._conn, "gpu_state", STATE_TABLE_COLUMNS, ("uuid",), states)
                _upsert(
                    self._conn,
                    "pod_hours",
                    POD_COLUMNS,
                    ("namespace", "pod", "hour_start"),
                    pod_rows,
                )
                if prune_before is not None:
                    self._conn.execute(
                        "DELETE FROM gpu_hours WHERE hour_start < ?", (prune_before,)
                    )
                    self._conn.execute(
                        "DELETE FROM token_hours WHERE hour_start < ?", (prune_before,)
                    )
                    self._conn.execute(
                        "DELETE FROM pod_hours WHERE hour_start < ?", (prune_before,)
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def gpu_hours(self, since: float, until: float = float("inf")) -> list[dict[str, Any]]:
        """Rows of gpu_hours with since <= hour_start < until, by uuid then hour."""
        return self._select("gpu_hours", "uuid", since, until)

    def token_hours(self, since: float, until: float = float("inf")) -> list[dict[str, Any]]:
        """Rows of token_hours with since <= hour_start < until, by source then hour."""
        return self._select("token_hours", "source", since, until)

    def pod_hours(self, since: float, until: float = float("inf")) -> list[dict[str, Any]]:
        """Rows of pod_hours with since <= hour_start < until, by namespace, pod, hour."""
        return self._select("pod_hours", "namespace, pod", since, until)

    def states(self) -> list[dict[str, Any]]:
        """Every GPU's last stored analysis state."""
        with self._lock:
            return [dict(r) for r in self._conn.execute("SELECT * FROM gpu_state ORDER BY uuid")]

    def _select(self, table: str, key: str, since: float, until: float) -> list[dict[str, Any]]:
        upper = min(until, 1e18)  # sqlite has no infinity literal for integer columns
        with self._lock:
            cursor = self._conn.execute(
                f"SELECT * FROM {table} WHERE hour_start >= ? AND hour_start < ? "  # noqa: S608
                f"ORDER BY {key}, hour_start",
                (since, upper),
            )
            return [dict(r) for r in cursor]

    def close(self) -> None:
        """Close the connection (a checkpoint folds the WAL into the file)."""
        with self._lock:
            self._conn.close()


def _upsert(
    conn: sqlite3.Connection,
    table: str,
    columns: Sequence[str],
    key: Sequence[str],
    rows: Sequence[Row],
) -> None:
    if not rows:
        return
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    sql = (
        f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608 (fixed names)
        f"VALUES ({', '.join('?' for _ in columns)}) "
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    )
    conn.executemany(sql, [tuple(row.get(c) for c in columns) for row in rows])
