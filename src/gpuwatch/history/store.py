"""The SQLite file: open (WAL, migrations), upsert whole rows, read them back, prune.

Rows hold an hour's *absolute* totals, written with `INSERT ... ON CONFLICT DO UPDATE`
in one transaction per write, so writing a row twice changes nothing and a kill -9
leaves every row as of the last commit. Only the writer thread writes; readers (the
restore at start, `gpuwatch report`) open their own connection. `open_reader` opens the
file read-only (`mode=ro`): it never sets WAL nor migrates the file, reads an older
schema through a migrated copy in memory, and reads a file on a read-only filesystem.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from gpuwatch.history.rows import GpuHourRow, GpuStateRow, JobHourRow, PodHourRow, TokenHourRow
from gpuwatch.history.schema import (
    GPU_COLUMNS,
    JOB_COLUMNS,
    JOB_KEY,
    MIGRATIONS,
    POD_COLUMNS,
    SCHEMA_VERSION,
    STATE_TABLE_COLUMNS,
    TOKEN_COLUMNS,
)

HISTORY_FILE = "history.sqlite3"

Row = Mapping[str, Any]
Connect = Callable[[Path], sqlite3.Connection]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""SQLite's INTEGER range: a Python int outside it cannot be bound (OverflowError)."""

_CORRUPT = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB (primary result codes)
_NO_SHM = {8, 14}  # SQLITE_READONLY, SQLITE_CANTOPEN: the -shm file cannot be made


def default_connect(path: Path) -> sqlite3.Connection:
    """A connection usable from the one thread that holds the store's lock."""
    return sqlite3.connect(path, timeout=5.0, check_same_thread=False, isolation_level=None)


class HistoryStoreError(Exception):
    """The file cannot be opened or read, or is from a newer gpuwatch."""


class HistoryMissingError(HistoryStoreError):
    """There is no history file where the config says (history off, or never ran)."""


class HistoryCorruptError(HistoryStoreError):
    """The file is damaged: not a database, malformed, or it fails SQLite's quick check."""


def describe(exc: BaseException) -> str:
    """`exc` in one line, with SQLite's result code name when it has one
    (`database or disk is full (SQLITE_FULL)`)."""
    name = getattr(exc, "sqlite_errorname", None)
    text = str(exc) or type(exc).__name__
    return f"{text} ({name})" if name else f"{type(exc).__name__}: {text}"


def store_error(what: str, exc: BaseException) -> HistoryStoreError:
    """`what: <exc>` as HistoryCorruptError when SQLite says the file is damaged, else
    as HistoryStoreError (a HistoryStoreError passes through)."""
    if isinstance(exc, HistoryStoreError):
        return exc
    code = getattr(exc, "sqlite_errorcode", None)
    corrupt = code is not None and code & 0xFF in _CORRUPT
    return (HistoryCorruptError if corrupt else HistoryStoreError)(f"{what}: {describe(exc)}")


def unstorable(value: object) -> str | None:
    """Why SQLite cannot hold `value` or a report cannot use it (an int past 64 bits, a
    NaN or infinite float, text that is not UTF-8, another type), else None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if INT64_MIN <= value <= INT64_MAX else "past SQLite's 64-bit integers"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value}"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "not UTF-8 text"
        return None
    return f"a {type(value).__name__}"


def open_reader(path: Path) -> HistoryStore:
    """The history file at `path`, read-only; HistoryMissingError when there is none,
    HistoryCorruptError when it is damaged, HistoryStoreError when it cannot be read."""
    if not path.is_file():
        raise HistoryMissingError(
            f"no history at {path}: is [history] on and has `gpuwatch run` run here?"
        )
    return HistoryStore(path, read_only=True)


def last_sample_epoch(state_dir: Path) -> float | None:
    """Unix time of the newest sample in the history under `state_dir` (where a report or
    a plan of the period in progress ends); None without a history or a sample."""
    path = state_dir / HISTORY_FILE
    if not path.is_file():
        return None
    store = open_reader(path)
    try:
        rows = store.gpu_hours(0.0, float("inf"))
    finally:
        store.close()
    return max((float(r["last_seconds"]) for r in rows), default=None)


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """`mode=ro`; where SQLite cannot make the -shm file a WAL file needs (a read-only
    directory or filesystem) and no -wal file holds pages not yet in the file,
    `immutable=1`."""
    uri = path.resolve().as_uri()
    conn = sqlite3.connect(
        f"{uri}?mode=ro", uri=True, timeout=5.0, check_same_thread=False, isolation_level=None
    )
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        conn.close()
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        wal = path.with_name(path.name + "-wal")
        if code not in _NO_SHM or (wal.exists() and wal.stat().st_size > 0):
            raise
        conn = sqlite3.connect(
            f"{uri}?mode=ro&immutable=1",
            uri=True,
            check_same_thread=False,
            isolation_level=None,
        )
    return conn


class HistoryStore:
    """One connection to the history file; every method holds a lock."""

    def __init__(
        self, path: Path, connect: Connect = default_connect, *, read_only: bool = False
    ) -> None:
        """Open (creating the file and its directory), check and migrate; `read_only`:
        open as `open_reader` does. HistoryCorruptError when the file is damaged,
        HistoryStoreError when it cannot be opened otherwise."""
        self.path = path
        self._lock = threading.RLock()  # replace_damaged reopens (and migrates) holding it
        self._connect = connect
        self._open(read_only=read_only)

    def _open(self, *, read_only: bool = False) -> None:
        conn = None
        try:
            if read_only:
                conn = _connect_read_only(self.path)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = self._connect(self.path)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.row_factory = sqlite3.Row
            self._conn = conn
            self._check(read_only)
        except BaseException as exc:
            if conn is not None:
                conn.close()  # a corrupt file is moved aside: nothing may touch it after
            if isinstance(exc, OSError | sqlite3.Error):
                raise store_error(f"cannot open {self.path}", exc) from exc
            raise

    def replace_damaged(self, now: float) -> Path:
        """Close the damaged file, move it aside (`set_aside`) and open a fresh one in its
        place; returns where the damaged one is kept. HistoryStoreError when that fails
        (the store is closed then)."""
        with self._lock:
            self._conn.close()
            aside = set_aside(self.path, now)
            self._open()
            return aside

    def _check(self, read_only: bool) -> None:
        """Refuse a damaged or newer file; migrate an older one (a reader: a copy of it in
        memory, the file untouched)."""
        version = self.version()
        if version > SCHEMA_VERSION:
            raise HistoryStoreError(
                f"{self.path} has schema version {version}; this gpuwatch knows "
                f"{SCHEMA_VERSION} (a newer gpuwatch wrote it)"
            )
        (check,) = self._conn.execute("PRAGMA quick_check(1)").fetchone()
        if check != "ok":
            detail = " ".join(str(check).replace("*** in database main ***", "").split())
            raise HistoryCorruptError(f"{self.path} is damaged (SQLite's quick check: {detail})")
        if read_only and version == 0:
            raise HistoryStoreError(f"{self.path} holds no gpuwatch history")
        if read_only and version < SCHEMA_VERSION:
            copy = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            self._conn.backup(copy)
            self._conn.close()
            self._conn = copy
            copy.row_factory = sqlite3.Row
        self.migrate()
        self.required = {
            table: frozenset(
                str(column["name"])
                for column in self._conn.execute(f"PRAGMA table_info({table})")  # fixed names
                if column["notnull"] or column["pk"]
            )
            for table in ("gpu_hours", "token_hours", "pod_hours", "job_hours", "gpu_state")
        }
        """Each table's columns that cannot be NULL (NOT NULL or in the key)."""

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
                    self._rollback()
                    raise

    def write(
        self,
        gpu_rows: Sequence[GpuHourRow],
        token_rows: Sequence[TokenHourRow] = (),
        states: Sequence[GpuStateRow] = (),
        *,
        prune_before: float | None = None,
        pod_rows: Sequence[PodHourRow] = (),
        job_rows: Sequence[JobHourRow] = (),
    ) -> None:
        """Upsert every row (absolute values) in one transaction; sqlite3.Error (or any
        other exception) on failure, nothing written then. Rows must be storable
        (`unstorable` None for every value)."""
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
                _upsert(self._conn, "job_hours", JOB_COLUMNS, JOB_KEY, job_rows)
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
                    self._conn.execute(
                        "DELETE FROM job_hours WHERE hour_start < ?", (prune_before,)
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def _rollback(self) -> None:
        """Roll back the open transaction, if SQLite has not already (it does on
        SQLITE_FULL and some I/O errors: a second ROLLBACK would hide that error)."""
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def gpu_hours(self, since: float, until: float = float("inf")) -> list[GpuHourRow]:
        """Rows of gpu_hours with since <= hour_start < until, by uuid then hour."""
        return cast("list[GpuHourRow]", self._select("gpu_hours", "uuid", since, until))

    def token_hours(self, since: float, until: float = float("inf")) -> list[TokenHourRow]:
        """Rows of token_hours with since <= hour_start < until, by source then hour."""
        return cast("list[TokenHourRow]", self._select("token_hours", "source", since, until))

    def pod_hours(self, since: float, until: float = float("inf")) -> list[PodHourRow]:
        """Rows of pod_hours with since <= hour_start < until, by namespace, pod, hour."""
        rows = self._select("pod_hours", "namespace, pod", since, until)
        return cast("list[PodHourRow]", rows)

    def job_hours(self, since: float, until: float = float("inf")) -> list[JobHourRow]:
        """Rows of job_hours with since <= hour_start < until, by job, GPU, hour."""
        rows = self._select("job_hours", "job_id, uuid", since, until)
        return cast("list[JobHourRow]", rows)

    def job_rows(self, job_id: str) -> list[JobHourRow]:
        """Every stored row of one job, by GPU then hour."""
        rows = self._read(
            "SELECT * FROM job_hours WHERE job_id = ? ORDER BY uuid, hour_start", (job_id,)
        )
        return cast("list[JobHourRow]", rows)

    def states(self) -> list[GpuStateRow]:
        """Every GPU's last stored analysis state."""
        return cast("list[GpuStateRow]", self._read("SELECT * FROM gpu_state ORDER BY uuid", ()))

    def _select(self, table: str, key: str, since: float, until: float) -> list[dict[str, Any]]:
        upper = min(until, 1e18)  # sqlite has no infinity literal for integer columns
        return self._read(
            f"SELECT * FROM {table} WHERE hour_start >= ? AND hour_start < ? "  # noqa: S608
            f"ORDER BY {key}, hour_start",
            (since, upper),
        )

    def _read(self, sql: str, parameters: tuple[float | str, ...]) -> list[dict[str, Any]]:
        """The rows of a query; HistoryCorruptError or HistoryStoreError when SQLite fails
        (a damaged page may only show when read). Untyped: the readers above cast them to
        their table's row (`gpuwatch.history.rows`)."""
        with self._lock:
            try:
                return [dict(r) for r in self._conn.execute(sql, parameters)]
            except sqlite3.Error as exc:
                raise store_error(f"cannot read {self.path}", exc) from exc

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


def set_aside(path: Path, now: float) -> Path:
    """Move a damaged history file out of the way, kept for a look: renamed
    `<name>.corrupt-<UTC time>` (a counter after it when taken), its `-wal` and `-journal`
    with it (SQLite would otherwise replay them into the fresh file), its `-shm` removed.
    Returns the new name; HistoryStoreError when it cannot be moved."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    count = 1
    while aside.exists():
        count += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}.{count}")
    try:
        path.replace(aside)
        for suffix in ("-wal", "-journal"):
            companion = path.with_name(path.name + suffix)
            if companion.exists():
                companion.replace(aside.with_name(aside.name + suffix))
        path.with_name(path.name + "-shm").unlink(missing_ok=True)
    except OSError as exc:
        raise HistoryStoreError(
            f"{path} is damaged and cannot be moved aside: {exc.strerror or exc}"
        ) from exc
    return aside
