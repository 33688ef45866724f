"""Damaged, old, read-only and lying history: readers, the agent's start, the writer."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.cli import main
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.history.schema import MIGRATIONS
from gpuwatch.history.store import HISTORY_FILE, HistoryStore, unstorable
from tests.history.demo import HistoryRun, history_config

MONTH = ["--month", "2026-01"]


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A history file two hours of the demo fleet wrote (WAL mode, as the agent leaves it)."""
    state = tmp_path_factory.mktemp("intact")
    run = HistoryRun(state, ManualClock())
    run.run(2 * 3600.0)
    run.close()
    return state / HISTORY_FILE


def config_file(state: Path) -> Path:
    path = state / "gpuwatch.toml"
    path.write_text(f'[agent]\nstate_dir = "{state}"\n\n[history]\nenabled = true\n')
    return path


def copy_history(intact: Path, state: Path) -> Path:
    state.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(intact, state / HISTORY_FILE))


def not_a_database(path: Path) -> None:
    with path.open("r+b") as f:
        f.write(b"\xa5" * 100)  # the header: SQLite no longer knows the file


def truncated(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def mid_page_damaged(path: Path) -> None:
    with path.open("r+b") as f:
        f.seek(4096 + 8)  # inside page 2, past its header
        f.write(os.urandom(2000))


def emptied(path: Path) -> None:
    os.truncate(path, 0)


DAMAGES: dict[str, Callable[[Path], None]] = {
    "not a database": not_a_database,
    "truncated": truncated,
    "a damaged page": mid_page_damaged,
    "empty": emptied,
}


@pytest.mark.parametrize("command", ["report", "plan"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_file_is_one_line_and_exit_1(
    intact: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    damage: str,
) -> None:
    DAMAGES[damage](copy_history(intact, tmp_path))
    args = [command, "--config", str(config_file(tmp_path))]
    code = main([*args, *MONTH] if command == "report" else args)
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith("gpuwatch: ")
    assert str(tmp_path / HISTORY_FILE) in line


def file_state(path: Path) -> tuple[str, bytes]:
    """The file's digest and its header's write/read versions (1 1: rollback, 2 2: WAL)."""
    data = path.read_bytes()
    return hashlib.sha256(data).hexdigest(), data[18:20]


def schema_7_file(intact: Path, path: Path) -> None:
    """A file as gpuwatch with schema 7 left it (rollback journal), holding the intact
    file's GPU-hours less the columns of schemas 8 and 9."""
    with sqlite3.connect(intact) as source:
        source.row_factory = sqlite3.Row
        rows = [dict(r) for r in source.execute("SELECT * FROM gpu_hours")]
    conn = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:7]:
        conn.executescript(script)
    conn.executescript(
        "CREATE TABLE schema_version (version INTEGER NOT NULL);"
        "INSERT INTO schema_version VALUES (7);"
    )
    old = {row[1] for row in conn.execute("PRAGMA table_info(gpu_hours)")}
    columns = [c for c in rows[0] if c in old]
    conn.executemany(
        f"INSERT INTO gpu_hours ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
        [tuple(r[c] for c in columns) for r in rows],
    )
    conn.close()


def test_readers_never_migrate_nor_switch_an_older_file_to_wal(
    intact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / HISTORY_FILE
    schema_7_file(intact, path)
    before = file_state(path)
    assert before[1] == b"\x01\x01"  # rollback journal
    config = str(config_file(tmp_path))
    assert main(["report", "--config", config, *MONTH]) == 0
    report = json.loads(capsys.readouterr().out)
    assert main(["plan", "--config", config, "--until", "2026-01-01T03:00:00Z"]) == 0, (
        capsys.readouterr().err
    )
    assert file_state(path) == before, "not migrated, not switched to WAL, not written"
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchone() == (7,)
    assert len(report["gpus"]) == 4, "the schema 7 rows, read through a copy in memory"


def unshare_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.mark.skipif(not unshare_available(), reason="needs unshare (mount namespaces)")
def test_an_intact_file_on_a_read_only_filesystem_is_read(intact: Path, tmp_path: Path) -> None:
    """A real read-only mount (a tmpfs remounted ro in a private mount namespace): no
    -shm can be made beside the WAL file, and nothing may be written."""
    mount = tmp_path / "ro"
    mount.mkdir()
    config = config_file(tmp_path)
    config.write_text(config.read_text().replace(str(tmp_path), str(mount)))
    script = (
        f'mount -t tmpfs tmpfs "{mount}" && cp "{intact}" "{mount}/{HISTORY_FILE}" && '
        f'mount -o remount,ro "{mount}" && '
        f'{sys.executable} -m gpuwatch report --config "{config}" {" ".join(MONTH)} && '
        f'{sys.executable} -m gpuwatch plan --config "{config}" --format json '
        "--until 2026-01-01T03:00:00Z"
    )
    done = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "sh", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report, _, plan = done.stdout.partition("\n{")
    assert len(json.loads(report)["gpus"]) == 4
    assert json.loads("{" + plan)


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the reader as another uid")
def test_an_intact_file_in_a_directory_the_reader_cannot_write_is_read(
    intact: Path, tmp_path: Path
) -> None:
    """As a uid that may read but not write the directory (root ignores mode bits); the
    directory outside pytest's (which only root may enter)."""
    with tempfile.TemporaryDirectory() as top:
        Path(top).chmod(0o755)
        state = Path(top) / "state"
        copy_history(intact, state)
        config = config_file(state)
        state.chmod(0o555)
        (state / HISTORY_FILE).chmod(0o444)
        try:
            done = read_as_nobody(config)
        finally:
            state.chmod(0o755)
        if "Permission denied" in done.stderr and "python" in done.stderr:
            pytest.skip("the interpreter is not readable by uid 65534")
        assert done.returncode == 0, done.stderr
        assert len(json.loads(done.stdout)["gpus"]) == 4
        assert sorted(p.name for p in state.iterdir()) == ["gpuwatch.toml", HISTORY_FILE]


def read_as_nobody(config: Path) -> subprocess.CompletedProcess[str]:
    """`gpuwatch report` run as uid 65534."""
    return subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-m",
            "gpuwatch",
            "report",
            "--config",
            str(config),
            *MONTH,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "HOME": str(config.parent)},
    )


@pytest.mark.parametrize("damage", ["not a database", "truncated", "a damaged page"])
def test_the_agent_moves_a_damaged_file_aside_and_starts_a_fresh_one(
    intact: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    path = copy_history(intact, tmp_path)
    DAMAGES[damage](path)
    damaged = path.read_bytes()
    clock = ManualClock()
    with caplog.at_level(logging.ERROR, logger="gpuwatch.history"):
        run = HistoryRun(tmp_path, clock)  # asserts the history is on
    try:
        (aside,) = tmp_path.glob(f"{HISTORY_FILE}.corrupt-*")
        assert aside.name == f"{HISTORY_FILE}.corrupt-20260101T000000Z"
        assert aside.read_bytes() == damaged, "kept as it was"
        (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert str(aside) in line
        assert "fresh" in line
        run.run(600.0)
        writer = run.agent.history
        assert writer is not None
        assert writer.flush()
        assert {f.name: f.samples[0].value for f in writer.families()}["gpuwatch_history_up"] == 1.0
    finally:
        run.close()
    store = HistoryStore(path)
    try:
        assert len({r["uuid"] for r in store.gpu_hours(0.0)}) == 4
    finally:
        store.close()


def lying(uuid: str, need: int) -> Callable[[FleetSnapshot], FleetSnapshot]:
    """Snapshots in which `uuid`'s memory need is `need` bytes (a lying KV pool)."""

    def lie(snapshot: FleetSnapshot) -> FleetSnapshot:
        verdicts = tuple(
            replace(v, need_basis="measured", need_sample_bytes=need) if v.uuid == uuid else v
            for v in snapshot.verdicts
        )
        return replace(snapshot, verdicts=verdicts)

    return lie


def stored_hours(path: Path) -> dict[tuple[str, int], float]:
    with sqlite3.connect(path) as conn:
        return {
            (uuid, hour): observed
            for uuid, hour, observed in conn.execute(
                "SELECT uuid, hour_start, observed_seconds FROM gpu_hours"
            )
        }


def counters(run: HistoryRun) -> dict[str, float]:
    writer = run.agent.history
    assert writer is not None
    return {f.name: f.samples[0].value for f in writer.families()}


@pytest.fixture
def lie_run(tmp_path: Path) -> Iterator[tuple[HistoryRun, Callable[[Any], None]]]:
    """A run whose writer is offered what `set_lie` makes of each snapshot."""
    run = HistoryRun(tmp_path, ManualClock())
    writer = run.agent.history
    assert writer is not None
    offer = writer.offer
    current: list[Any] = [None]

    def offered(snapshot: FleetSnapshot, readings: Any = ()) -> None:
        lie = current[0]
        offer(snapshot if lie is None else lie(snapshot), readings)

    writer.offer = offered  # type: ignore[method-assign]

    def set_lie(lie: Any) -> None:
        current[0] = lie

    yield run, set_lie
    run.close()


@pytest.mark.parametrize("need", [10**21, 2**63])
def test_a_value_sqlite_cannot_hold_loses_nothing_else(
    lie_run: tuple[HistoryRun, Callable[[Any], None]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    need: int,
) -> None:
    """A lying KV pool's need past int64: before, every write failed (OverflowError) and
    every GPU-hour of the host was lost while gpuwatch_history_up stayed 1."""
    run, set_lie = lie_run
    writer = run.agent.history
    assert writer is not None
    run.run(600.0)
    assert writer.flush()
    snapshot = run.agent.store.latest()
    assert snapshot is not None
    liar = snapshot.gpus[0].identity.uuid
    set_lie(lying(liar, need))
    with caplog.at_level(logging.ERROR, logger="gpuwatch.history.writer"):
        for _ in range(3):  # three writes while the source lies: one line
            run.run(600.0)
            assert writer.flush(), "written"
    # this writer's lines only: a thread another test left running may log elsewhere
    (line,) = [r.getMessage() for r in caplog.records if r.name == "gpuwatch.history.writer"]
    assert ascii(liar) in line
    assert "need_bytes is past SQLite's 64-bit integers (stored as NULL)" in line
    assert "and 1 more" in line
    values = counters(run)
    assert values["gpuwatch_history_up"] == 1.0
    assert values["gpuwatch_history_refused_values"] == 6.0  # the need and its p95, 3 times
    assert values["gpuwatch_history_pending_rows"] == 0.0
    latest = run.agent.store.latest()
    assert latest is not None
    stored = stored_hours(tmp_path / HISTORY_FILE)
    for cost in latest.cost.gpus:  # every GPU's seconds, the liar's too
        written = sum(v for (uuid, _), v in stored.items() if uuid == cost.uuid)
        assert written == pytest.approx(cost.observed_seconds_total)
    with sqlite3.connect(tmp_path / HISTORY_FILE) as conn:
        assert conn.execute(
            "SELECT need_basis, need_bytes, need_p95_bytes FROM gpu_hours WHERE uuid = ?",
            (liar,),
        ).fetchall() == [("measured", None, None)]


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (2**63 - 1, None),
        (-(2**63), None),
        (2**63, "past SQLite's 64-bit integers"),
        (-(2**63) - 1, "past SQLite's 64-bit integers"),
        (1e300, None),
        (float("nan"), "nan"),
        (float("-inf"), "-inf"),
        ("GPU-\udcff", "not UTF-8 text"),
        ("pod-\u00e9", None),
        (True, None),
        (b"bytes", "a bytes"),
    ],
)
def test_what_sqlite_cannot_hold(value: object, why: str | None) -> None:
    assert unstorable(value) == why


class Failing(sqlite3.Connection):
    """A real connection whose writes raise what the sqlite3 module raised for an int
    past 64 bits, while `fail` is set."""

    fail = False

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        if Failing.fail:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        return super().executemany(sql, parameters)


def test_any_exception_puts_the_rows_back_and_history_up_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from gpuwatch.history.opening import open_history

    clock = ManualClock()
    run = HistoryRun(tmp_path, clock)
    run.agent.history.stop()  # type: ignore[union-attr]
    run.agent.history = open_history(
        history_config(tmp_path),
        clock,
        run.agent.analysis,
        run.agent.cost,
        connect=lambda p: sqlite3.connect(
            p, timeout=5.0, check_same_thread=False, isolation_level=None, factory=Failing
        ),
    )
    writer = run.agent.history
    try:
        Failing.fail = True
        with caplog.at_level(logging.ERROR, logger="gpuwatch.history.writer"):
            for _ in range(3):
                run.run(600.0)
                assert not writer.flush()
        (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert "OverflowError" in line
        values = counters(run)
        assert values["gpuwatch_history_up"] == 0.0
        assert values["gpuwatch_history_pending_rows"] >= 4
        Failing.fail = False
        assert writer.flush()
        assert counters(run)["gpuwatch_history_up"] == 1.0
        latest = run.agent.store.latest()
        assert latest is not None
        stored = stored_hours(tmp_path / HISTORY_FILE)
        observed = sum(c.observed_seconds_total for c in latest.cost.gpus)
        assert sum(stored.values()) == pytest.approx(observed), "nothing lost"
    finally:
        Failing.fail = False
        run.close()


def test_a_state_dir_whose_name_looks_like_a_uri_is_read(intact: Path, tmp_path: Path) -> None:
    """The read-only open goes through a file: URI: `?`, `#`, `%` and spaces in the path
    are data, not query or fragment."""
    from gpuwatch.plan.local import load_usage

    state = tmp_path / "a dir?mode=rw#x%41"
    copy_history(intact, state)
    usages = load_usage(state, 0.0, 2e9)
    assert len(usages) == 4
    assert sorted(p.name for p in state.iterdir())[0] == HISTORY_FILE


def test_a_file_damaged_while_the_agent_runs_is_replaced_at_the_next_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Pages overwritten under the running writer (a disk error, another program): the
    next write moves the file aside and writes the hours in memory to a fresh one."""
    clock = ManualClock()
    run = HistoryRun(tmp_path, clock)
    writer = run.agent.history
    assert writer is not None
    try:
        run.run(1800.0)
        assert writer.flush()
        path = tmp_path / HISTORY_FILE
        with sqlite3.connect(path) as other:  # fold the WAL in: the pages live in the file
            other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = path.stat().st_size
        with path.open("r+b") as f:
            f.seek(4096)
            f.write(b"\xa5" * (size - 4096))  # every page after the first
        run.run(600.0)
        with caplog.at_level(logging.ERROR, logger="gpuwatch.history.writer"):
            assert writer.flush()
        (line,) = [r.getMessage() for r in caplog.records if r.name == "gpuwatch.history.writer"]
        aside = tmp_path / f"{HISTORY_FILE}.corrupt-20260101T004000Z"
        assert aside.read_bytes()[4096:8192] == b"\xa5" * 4096, "kept as it was"
        assert str(aside) in line
        assert "SQLITE_CORRUPT" in line
        assert counters(run)["gpuwatch_history_up"] == 1.0
        latest = run.agent.store.latest()
        assert latest is not None
        stored = stored_hours(path)
        observed = sum(c.observed_seconds_total for c in latest.cost.gpus)
        assert sum(stored.values()) == pytest.approx(observed), "the hour in memory, whole"
    finally:
        run.close()
