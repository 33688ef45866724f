"""The host's history: hourly rollups per GPU in SQLite, restored at start.

`open_history` is the agent's one entry point: it decides whether the history is on,
opens `agent.state_dir/history.sqlite3`, seeds the analysis and the cost engine from it
(`restore.py`) and returns the writer the agent feeds its published snapshots to
(`writer.py`). `gpuwatch.report.local` reads the same file. Never imported by the
sampling path's modules (nvml, collectors, export). Each table's row is a typed record
(`rows.py`), its columns and migrations `schema.py`'s, the hour sums `rollup.py`'s.

Importing this package does not load sqlite3 or the store, writer and restore modules: a
host with the history off decides so with `history_wanted` and loads nothing more. They
are imported by `open_history` and on first use of the names below (PEP 562).
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuwatch.config import Config
from gpuwatch.core.paths import usable_directory

if TYPE_CHECKING:
    from gpuwatch.analysis.engine import AnalysisEngine
    from gpuwatch.core.clock import Clock
    from gpuwatch.cost.engine import CostEngine
    from gpuwatch.history.rollup import TokenReadingTotals
    from gpuwatch.history.store import (
        HISTORY_FILE,
        Connect,
        HistoryCorruptError,
        HistoryStore,
        HistoryStoreError,
        set_aside,
    )
    from gpuwatch.history.writer import HistoryWriter

__all__ = [
    "HISTORY_FILE",
    "HistoryCorruptError",
    "HistoryStore",
    "HistoryStoreError",
    "HistoryWriter",
    "TokenReadingTotals",
    "history_wanted",
    "open_history",
    "set_aside",
]

log = logging.getLogger(__name__)

_LAZY = {
    "HISTORY_FILE": "gpuwatch.history.store",
    "HistoryStore": "gpuwatch.history.store",
    "HistoryStoreError": "gpuwatch.history.store",
    "HistoryCorruptError": "gpuwatch.history.store",
    "set_aside": "gpuwatch.history.store",
    "HistoryWriter": "gpuwatch.history.writer",
    "TokenReadingTotals": "gpuwatch.history.rollup",
}


def __getattr__(name: str) -> Any:
    """The store's and writer's names, imported on first use (sqlite3 with them)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def history_wanted(config: Config, *, simulated: bool) -> str | None:
    """None when the history should be kept, else why not (for one INFO line)."""
    enabled = config.history.enabled
    if enabled is False:
        return "history.enabled = false"
    if enabled is None and simulated:
        return "a simulated fleet keeps no history unless history.enabled = true"
    problem = usable_directory(config.agent.state_dir)
    if problem is not None:
        return f"agent.state_dir: {problem}"
    return None


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
    from gpuwatch.history.store import (  # noqa: PLC0415
        HISTORY_FILE,
        HistoryCorruptError,
        set_aside,
    )

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
    from gpuwatch.core.units import HOUR_SECONDS  # noqa: PLC0415
    from gpuwatch.history.restore import restore  # noqa: PLC0415 - sqlite3 only when on
    from gpuwatch.history.rollup import Rollup, hour_of  # noqa: PLC0415
    from gpuwatch.history.store import HistoryStore, default_connect, store_error  # noqa: PLC0415
    from gpuwatch.history.writer import HistoryWriter  # noqa: PLC0415

    store = HistoryStore(path, connect or default_connect)
    now = clock.time()
    try:
        restored = restore(store, analysis, cost, now, config.analysis.window_seconds)
        since = hour_of(now) - HOUR_SECONDS  # this run can only touch hours from its start
        rollup = Rollup(store.gpu_hours(since), store.token_hours(since), store.pod_hours(since))
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
