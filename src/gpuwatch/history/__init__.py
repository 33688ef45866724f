"""The host's history: hourly rollups per GPU in SQLite, restored at start.

This package's `__init__` holds only `history_wanted`, the agent's decision whether the
history is on (the config and the state directory; nothing of SQLite), so a host with
the history off imports nothing more. `opening.open_history` opens
`agent.state_dir/history.sqlite3` (`store.py`), seeds the analysis and the cost engine
from it (`restore.py`) and returns the writer the agent feeds its published snapshots to
(`writer.py`); the agent imports it only when the history is on. `gpuwatch.report.local`
reads the same file. Each table's row is a typed record (`rows.py`), its columns and
migrations `schema.py`'s, the hour sums `rollup.py`'s (one hour's row `hour_rows.py`'s).
Never imported by the sampling path's modules (nvml, collectors, export); nothing here
imports sqlite3 at module level.
"""

from __future__ import annotations

from gpuwatch.config import Config
from gpuwatch.core.paths import usable_directory

__all__ = ["history_wanted"]


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
