"""kill -9 at random moments never corrupts the store nor counts an hour twice."""

from __future__ import annotations

import random
import signal
import sqlite3
import time
from pathlib import Path

from gpuwatch.history.store import HISTORY_FILE
from tests.agent_process import start_agent
from tests.conftest import free_port

GPUS = 4  # the demo fleet
RUNS = 4


def test_kill_9_at_random_moments_keeps_the_store_consistent(tmp_path: Path) -> None:
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[agent]\ninterval_seconds = 0.1\nstate_dir = "{tmp_path}"\n'
        "[history]\nenabled = true\nwrite_interval_seconds = 1.0\n",
        encoding="utf-8",
    )
    rng = random.Random(9)
    ran_seconds = 0.0
    for _ in range(RUNS):
        spawned = time.monotonic()
        proc = start_agent(["--simulate", "demo", "--config", str(config)], free_port())
        time.sleep(rng.uniform(1.0, 3.0))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        ran_seconds += time.monotonic() - spawned
    path = tmp_path / HISTORY_FILE
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        observed, classed, rows = conn.execute(
            "SELECT sum(observed_seconds), sum(busy_seconds + idle_seconds + held_seconds"
            " + unknown_seconds), count(*) FROM gpu_hours"
        ).fetchone()
        worst = conn.execute(
            "SELECT max(busy_seconds + idle_seconds + held_seconds + unknown_seconds"
            " - observed_seconds) FROM gpu_hours"
        ).fetchone()[0]
        (states,) = conn.execute("SELECT count(*) FROM gpu_state").fetchone()
    assert rows >= GPUS
    assert states == GPUS
    # each run adds only its own sampled seconds on top of what the file held
    assert 0.0 < observed <= ran_seconds * GPUS
    assert observed > 0.2 * ran_seconds * GPUS, "most of the sampled time was written"
    assert classed <= observed + 1e-6, "no second classed twice"
    assert worst <= 1e-6, "no hour has more classed than sampled seconds"
