"""History store: its cost on the sampling thread, the writer's cost per hour, the file
size per GPU-month.

Runs the demo agent (4 GPUs, its simulated vLLM server's token source off) on a manual
clock for one hour of 1 s ticks, then:

- sampling path: `HistoryWriter.offer` per tick, against the agent's own `tick()` in the
  same run (the ratio is what the history adds to a tick);
- writer: folding that hour's 3,600 snapshots into the rollup and writing the changed
  rows every 30 s (the default), against a plain `INSERT` of the same rows into a table
  without key or upsert, one transaction per write, same file settings;
- size: 31 days x 8 GPUs of hour rows (the demo's real rows, renamed), file bytes after
  a WAL checkpoint, per GPU-month.

    python bench/history_write.py [--quick]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import scenario_agent

from benchlib import format_table
from gpuwatch.config import AgentConfig, Config, HistoryConfig
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.history.rollup import Rollup
from gpuwatch.history.rows import GpuHourRow
from gpuwatch.history.schema import GPU_COLUMNS
from gpuwatch.history.store import HISTORY_FILE, HistoryStore
from gpuwatch.simulate import SimulatedNvml, load_scenario

WRITE_EVERY = 30  # ticks (s) between two writes: history.write_interval_seconds


def demo_hour(state_dir: Path, ticks: int) -> tuple[list[FleetSnapshot], float]:
    """`ticks` snapshots of the demo agent, and the agent's mean tick() seconds."""
    clock = ManualClock()
    nv = SimulatedNvml(load_scenario("demo"), clock=clock)
    config = Config(
        agent=AgentConfig(hostname="bench", state_dir=state_dir),
        history=HistoryConfig(enabled=False),
    )
    agent = scenario_agent(config, nv, clock)
    snapshots = []
    started = time.perf_counter()
    for _ in range(ticks):
        clock.advance(1.0)
        snapshots.append(agent.tick())
    elapsed = time.perf_counter() - started
    agent.stop()
    return snapshots, elapsed / ticks


def offer_cost(state_dir: Path, snapshots: list[FleetSnapshot]) -> float:
    """Mean seconds of `HistoryWriter.offer` (the sampling thread's part)."""
    from gpuwatch.history.writer import HistoryWriter

    store = HistoryStore(state_dir / "offer.sqlite3")
    writer = HistoryWriter(
        store, Rollup(), ManualClock(), retention_days=400, write_interval_seconds=30.0
    )
    started = time.perf_counter()
    for snapshot in snapshots:
        writer.offer(snapshot)
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed / len(snapshots)


def writer_cost(path: Path, snapshots: list[FleetSnapshot]) -> tuple[float, list[list[Any]]]:
    """Seconds to roll up and write the snapshots every WRITE_EVERY ticks; the rows of
    each write."""
    store = HistoryStore(path)
    rollup = Rollup()
    writes = []
    started = time.perf_counter()
    for i, snapshot in enumerate(snapshots, 1):
        rollup.add(snapshot)
        if i % WRITE_EVERY == 0:
            gpu_rows, token_rows, states = rollup.take_dirty()
            store.write(gpu_rows, token_rows, states)
            writes.append(gpu_rows)
            rollup.forget_final()
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed, writes


def plain_insert_cost(path: Path, writes: list[list[Any]]) -> float:
    """Seconds to INSERT the same rows into a keyless table, one transaction per write."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"CREATE TABLE plain ({', '.join(GPU_COLUMNS)})")
    sql = f"INSERT INTO plain VALUES ({', '.join('?' for _ in GPU_COLUMNS)})"
    started = time.perf_counter()
    for rows in writes:
        conn.execute("BEGIN")
        conn.executemany(sql, [tuple(r.get(c) for c in GPU_COLUMNS) for r in rows])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def size_per_gpu_month(path: Path, template: dict[str, Any], gpus: int, days: int) -> float:
    """File bytes per GPU-month of hour rows shaped like `template`."""
    store = HistoryStore(path)
    rows = []
    for gpu in range(gpus):
        for hour in range(days * 24):
            row = dict(template)
            row.update(uuid=f"GPU-{gpu:08d}-0000-0000-0000-000000000000", hour_start=hour * 3600)
            rows.append(row)
    store.write(cast("list[GpuHourRow]", rows))
    store.close()  # folds the WAL into the file
    return path.stat().st_size / gpus * (30.44 / days)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    ticks = 600 if args.quick else 3600
    with tempfile.TemporaryDirectory() as tmp:
        state_dir = Path(tmp)
        snapshots, tick_seconds = demo_hour(state_dir, ticks)
        offer_seconds = offer_cost(state_dir, snapshots)
        writer_seconds, writes = writer_cost(state_dir / HISTORY_FILE, snapshots)
        plain_seconds = plain_insert_cost(state_dir / "plain.sqlite3", writes)
        template = writes[-1][0]
        size = size_per_gpu_month(state_dir / "size.sqlite3", template, 8, 31)
    per_hour = 3600 / ticks
    rows = [
        [
            "sampling thread: offer() per tick",
            f"{offer_seconds * 1e6:.2f} us",
            f"tick() {tick_seconds * 1e6:.0f} us",
            f"{offer_seconds / tick_seconds:.4f}",
        ],
        [
            "writer per hour (4 GPUs, write every 30 s)",
            f"{writer_seconds * per_hour * 1e3:.1f} ms",
            f"plain INSERT {plain_seconds * per_hour * 1e3:.1f} ms",
            f"{writer_seconds / plain_seconds:.2f}",
        ],
        ["store size per GPU-month", f"{size / 1024:.1f} KiB", "", ""],
    ]
    print(format_table(["what", "gpuwatch", "baseline (same run)", "ratio"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
