"""Opening the history: the store, the restore and the writer, for `Agent.open_history`.

Imports sqlite3 (through `store`): the agent imports this module only when
`history_wanted` says the history is on. What must not live here: the decision whether
the history is on (`gpuwatch.history.history_wanted`) or the store's SQL (`store.py`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from gpuwatch.analysis.engine import AnalysisEngine
from gpuwatch.config import Config
from gpuwatch.core.clock import Clock
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.cost.engine import CostEngine
from gpuwatch.history.restore import restore
from gpuwatch.history.rollup import Rollup, hour_of
from gpuwatch.history.store import (
    HISTORY_FILE,
    Connect,
    HistoryCorruptError,
    HistoryStore,
    default_connect,
    set_aside,
    store_error,
)
from gpuwatch.history.writer import HistoryWriter

log = logging.getLogger("gpuwatch.history")  # the name its log lines have always had


def open_history(
    config: Config,
    clock: Clock,
    analysis: AnalysisEngine,
    cost: CostEngine,
    *,
    connect: Connect | None = None,
) -> HistoryWriter:
    """Open the store, restore the windows and states as of now, and return the writer
    (not started). A damaged file is moved aside (`<file>.corrupt-<UTC time>`, kept, one
    ERROR line naming it) and a fresh one started. HistoryStoreError when the file cannot
    be opened or migrated otherwise. `connect` opens the SQLite connection (default:
    `store.default_connect`)."""
    path = config.agent.state_dir / HISTORY_FILE
    try:
        return _open_writer(path, config, clock, analysis, cost, connect=connect)
    except HistoryCorruptError as exc:
        log.error(
            "history: %s; kept as %s, a fresh history starts", exc, set_aside(path, clock.time())
        )
    return _open_writer(path, config, clock, analysis, cost, connect=connect)


def _open_writer(
    path: Path,
    config: Config,
    clock: Clock,
    analysis: AnalysisEngine,
    cost: CostEngine,
    *,
    connect: Connect | None,
) -> HistoryWriter:
    """Open `path`, restore from it and return its writer (`open_history` less the
    damaged file's handling)."""
    store = HistoryStore(path, connect or default_connect)
    now = clock.time()
    try:
        restored = restore(store, analysis, cost, now, config.analysis.window_seconds)
        since = hour_of(now) - HOUR_SECONDS  # this run can only touch hours from its start
        rollup = Rollup(
            store.gpu_hours(since),
            store.token_hours(since),
            store.pod_hours(since),
            store.job_hours(since),
        )
    except Exception as exc:
        store.close()
        raise store_error(f"cannot read {path}", exc) from exc
    log.info(
        "history: %s (%d GPUs' windows, %d token sources, %d states restored)",
        store.path,
        restored.gpus_with_windows,
        restored.token_sources,
        restored.states,
    )
    return HistoryWriter(
        store,
        rollup,
        clock,
        retention_days=config.history.retention_days,
        write_interval_seconds=config.history.write_interval_seconds,
    )
