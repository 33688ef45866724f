"""Status without a running agent: one local NVML sample, or a simulated fleet replayed.

`sample_once` is the fallback when no agent answers: two ticks 150 ms apart (GPM needs
two samples at least 100 ms apart) and nothing more, so there is no window behind it
and its document carries no verdict or cost. `replay` runs a simulated scenario from
its start to `at` seconds through the agent's own tick (sampling, analysis, cost) on a
manual clock, scraping its token sources (the scenario's inference servers) as they are
due, as a running `gpuwatch run --simulate` agent would have seen it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TextIO

from gpuwatch.agent import Agent
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot

GPM_GAP_SECONDS = 0.15
"""Between the two ticks of a one-off sample (GPM needs at least 100 ms)."""
MAX_REPLAY_TICKS = 3600
"""A replay ticks every `agent.interval_seconds`, coarser when that would exceed this
many ticks, but never more than `MAX_REPLAY_STEP_SECONDS` apart: beyond 60 simulated
hours it takes more than this many ticks (`at` / 60)."""
MAX_REPLAY_STEP_SECONDS = 60.0
"""The longest gap the analysis and the cost ledger count in full."""
MAX_REPLAY_SECONDS = 31 * 86400.0
"""The longest replay `gpuwatch status --at` accepts (31 simulated days: 44,640 ticks, about
75 s of CPU on the benchmark VM, docs/benchmarks.md); beyond it the command refuses with
exit 2 instead of running for hours."""
PROGRESS_EVERY_SECONDS = 0.5
"""How often `ProgressLine` rewrites its line (real seconds)."""


def sample_once(agent: Agent, *, sleep: Callable[[float], None] = time.sleep) -> FleetSnapshot:
    """Two ticks `GPM_GAP_SECONDS` apart on the agent's (real) clock; the second."""
    agent.tick()
    sleep(GPM_GAP_SECONDS)
    return agent.tick()


def replay_step(at: float, interval: float) -> float:
    """Seconds between replayed ticks for a replay to `at` seconds."""
    return min(max(interval, at / MAX_REPLAY_TICKS), MAX_REPLAY_STEP_SECONDS)


def replay(
    agent: Agent,
    clock: ManualClock,
    at: float,
    *,
    progress: Callable[[float], None] | None = None,
) -> FleetSnapshot:
    """Tick from scenario time 0 to `at` (at least `GPM_GAP_SECONDS`); the last snapshot.

    The slow job (PCIe, ECC, MIG layout) runs every `agent.slow_interval_seconds`; the
    token sources are scraped before each tick when due.
    `progress(fraction)` is told after each tick how much of the replay is done (0-1).
    """
    config = agent.config.agent
    end = clock.time() + max(at, GPM_GAP_SECONDS)
    step = replay_step(at, config.interval_seconds)
    next_slow = clock.time() + config.slow_interval_seconds
    agent.tokens.scrape_due(inline=True)
    snapshot = agent.tick()
    ticks = max(math.ceil((end - clock.time()) / step), 1)
    for done in range(1, ticks + 1):
        clock.set(min(clock.time() + step, end))
        if clock.time() >= next_slow:
            agent.nvml.collect_slow()
            next_slow += config.slow_interval_seconds
        agent.tokens.scrape_due(inline=True)
        snapshot = agent.tick()
        if progress is not None:
            progress(done / ticks)
    return snapshot


class ProgressLine:
    """`replaying 42%` on one terminal line, rewritten at most every
    `PROGRESS_EVERY_SECONDS` of `now()` (real seconds), erased by `close()`."""

    def __init__(self, stream: TextIO, now: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self._now = now
        self._next = now() + PROGRESS_EVERY_SECONDS
        self._shown = False

    def __call__(self, fraction: float) -> None:
        if self._now() < self._next:
            return
        self._next = self._now() + PROGRESS_EVERY_SECONDS
        self._stream.write(f"\rgpuwatch: replaying {fraction:4.0%}")
        self._stream.flush()
        self._shown = True

    def close(self) -> None:
        """Erase the line if one was written."""
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
