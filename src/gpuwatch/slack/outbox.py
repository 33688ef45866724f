"""The Slack outbox and its sender's memory in SQLite (WAL mode): the alerts'
(`state_dir/alerts.sqlite3`, with the alert memory) and the summaries' of reports and
plans (`state_dir/reports.sqlite3`, `gpuwatch.slack.summary`).

A message is inserted together with the memory rows it changes (`Remembered`: the
alerts' `AlertMemory`), in one
transaction, and deleted only after Slack answered 2xx: a crash never loses a queued
message, and a restart neither re-alerts GPUs already alerted nor forgets a reminder
schedule. `in_flight` marks a message whose last attempt got no recorded answer (the
process stopped mid-request): it is sent again, the one place a duplicate can occur.

One connection shared by the evaluating and the delivering thread, behind a lock; every
method holds the lock only for its own short transaction, never across network I/O.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from gpuwatch.slack.errors import OutboxError

log = logging.getLogger("gpuwatch.slack.outbox")  # the name its log lines always carried


class Remembered(Protocol):
    """One row of the sender's memory (the alerts': the last alert about a GPU)."""

    @property
    def condition(self) -> str:
        """What was sent about the key (an alert condition)."""
        ...

    @property
    def alerted_at_seconds(self) -> float:
        """When (epoch seconds)."""
        ...


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """A memory row as stored: `load_memory`'s answer."""

    condition: str
    alerted_at_seconds: float


OUTBOX_FILE = "alerts.sqlite3"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_seconds REAL NOT NULL,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    in_flight INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS alert_memory (
    uuid TEXT PRIMARY KEY,
    condition TEXT NOT NULL,
    alerted_at_seconds REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value REAL NOT NULL
);
"""


class _CorruptError(Exception):
    """SQLite says the file is not a (sound) database."""


_CORRUPT = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})


def _move_aside(path: Path, now_seconds: float) -> Path:
    """Rename the corrupt `path` (and its -wal and -shm files) with a UTC timestamp;
    never deletes. Returns the new name of the main file."""
    stamp = datetime.fromtimestamp(now_seconds, UTC).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    serial = 1
    while target.exists():
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{serial}")
        serial += 1
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    path.rename(target)
    return target


@dataclass(frozen=True, slots=True)
class PendingMessage:
    """A queued webhook payload."""

    id: int
    payload: dict[str, Any]
    attempts: int  # delivery attempts started so far, across restarts


class Outbox:
    """Queued messages, alert memory and a few persisted values, in one SQLite file."""

    def __init__(
        self, path: Path, *, max_messages: int, now: Callable[[], float] = time.time
    ) -> None:
        """Open (or create) the outbox at `path`. A corrupt file is renamed aside
        (`alerts.sqlite3.corrupt-YYYYmmddTHHMMSSZ`, with its -wal/-shm), logged once and
        replaced by an empty outbox; anything else unusable (no space, no permission)
        raises OutboxError. `now()` is the clock's Unix time (s), for the new name."""
        self.path = path
        self._max_messages = max_messages
        self._lock = threading.Lock()
        self._closed = False
        self.moved_aside: Path | None = None
        try:
            self._db = self._open(path)
        except _CorruptError as exc:
            try:
                self.moved_aside = _move_aside(path, now())
            except OSError as move:
                raise OutboxError(
                    f"the alert outbox {path} is corrupt ({exc}) and cannot be moved "
                    f"aside: {move.strerror}"
                ) from None
            log.warning(
                "the alert outbox %s is corrupt (%s): moved aside to %s; starting an empty "
                "outbox (queued messages and alert memory in it are not delivered)",
                path,
                exc,
                self.moved_aside.name,
            )
            try:
                self._db = self._open(path)
            except _CorruptError as again:
                raise OutboxError(f"cannot use the alert outbox {path}: {again}") from None
        self._pending = self._scalar("SELECT COUNT(*) FROM outbox")

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        """A checked connection; raises _CorruptError or OutboxError."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
        except (OSError, sqlite3.Error) as exc:
            raise OutboxError(f"cannot open the alert outbox {path}: {exc}") from None
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")  # a lost delete would mean a duplicate
            check = db.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise _CorruptError(f"quick_check: {check[0] if check else 'no answer'}")
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            db.close()
            if getattr(exc, "sqlite_errorname", "") in _CORRUPT:
                raise _CorruptError(str(exc)) from None
            raise OutboxError(f"cannot use the alert outbox {path}: {exc}") from None
        except _CorruptError:
            db.close()
            raise
        return db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise OutboxError("the alert outbox is closed")
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _scalar(self, sql: str) -> int:
        row = self._db.execute(sql).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def close(self) -> None:
        """Close the database; later calls raise OutboxError."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    @property
    def pending_count(self) -> int:
        """Messages waiting to be delivered."""
        return self._pending

    def load_memory(self) -> dict[str, MemoryRow]:
        """The persisted alert memory, by GPU uuid."""
        with self._transaction() as db:
            rows = db.execute("SELECT uuid, condition, alerted_at_seconds FROM alert_memory")
            return {uuid: MemoryRow(cond, float(at)) for uuid, cond, at in rows}

    def in_flight_count(self) -> int:
        """Messages whose last attempt was cut off (by a crash or stop) without an answer."""
        with self._transaction() as db:
            return int(db.execute("SELECT COUNT(*) FROM outbox WHERE in_flight").fetchone()[0])

    def enqueue(
        self,
        build: Callable[[int], dict[str, Any]],
        created_seconds: float,
        updates: Mapping[str, Remembered | None],
    ) -> tuple[int, int]:
        """Queue `build(id)` and apply `updates` atomically; returns (id, messages dropped).

        When the outbox holds more than `max_messages`, the oldest are dropped.
        """
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO outbox (created_seconds, payload) VALUES (?, '')", (created_seconds,)
            )
            message_id = int(cursor.lastrowid or 0)
            payload = json.dumps(build(message_id), separators=(",", ":"), ensure_ascii=False)
            db.execute("UPDATE outbox SET payload = ? WHERE id = ?", (payload, message_id))
            self._write_memory(db, updates)
            dropped = db.execute(
                "DELETE FROM outbox WHERE id <= ?", (message_id - self._max_messages,)
            ).rowcount
            count = self._scalar("SELECT COUNT(*) FROM outbox")
        self._pending = count
        return message_id, max(dropped, 0)

    def update_memory(self, updates: Mapping[str, Remembered | None]) -> None:
        """Write (or, for None, delete) alert-memory rows without queueing a message."""
        with self._transaction() as db:
            self._write_memory(db, updates)

    @staticmethod
    def _write_memory(db: sqlite3.Connection, updates: Mapping[str, Remembered | None]) -> None:
        for uuid, memory in updates.items():
            if memory is None:
                db.execute("DELETE FROM alert_memory WHERE uuid = ?", (uuid,))
            else:
                db.execute(
                    "INSERT OR REPLACE INTO alert_memory (uuid, condition, alerted_at_seconds) "
                    "VALUES (?, ?, ?)",
                    (uuid, memory.condition, memory.alerted_at_seconds),
                )

    def next_pending(self, after_id: int = 0) -> PendingMessage | None:
        """The oldest queued message with an id above `after_id`."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT id, payload, attempts FROM outbox WHERE id > ? ORDER BY id LIMIT 1",
                (after_id,),
            ).fetchone()
        if row is None:
            return None
        return PendingMessage(int(row[0]), json.loads(row[1]), int(row[2]))

    def begin_attempt(self, message_id: int) -> None:
        """Record that an attempt starts (committed before the request is sent)."""
        with self._transaction() as db:
            db.execute(
                "UPDATE outbox SET attempts = attempts + 1, in_flight = 1 WHERE id = ?",
                (message_id,),
            )

    def end_attempt(self, message_id: int) -> None:
        """Record that Slack definitely did not take the message; it stays queued."""
        with self._transaction() as db:
            db.execute("UPDATE outbox SET in_flight = 0 WHERE id = ?", (message_id,))

    def remove(self, message_id: int, *, success_seconds: float | None = None) -> None:
        """Delete a delivered (or dropped) message; record the success time when given."""
        with self._transaction() as db:
            db.execute("DELETE FROM outbox WHERE id = ?", (message_id,))
            if success_seconds is not None:
                db.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('last_success', ?)",
                    (success_seconds,),
                )
            count = self._scalar("SELECT COUNT(*) FROM outbox")
        self._pending = count

    def last_success_seconds(self) -> float | None:
        """When Slack last accepted a message (epoch seconds), across restarts."""
        with self._transaction() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'last_success'").fetchone()
        return None if row is None else float(row[0])
