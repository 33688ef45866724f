"""Status without a running agent: one local NVML sample, or a simulated fleet replayed.

`sample_once` is the fallback when no agent answers: two ticks 150 ms apart (GPM needs
two samples at least 100 ms apart) and nothing more, so there is no window behind it
and its document carries no verdict or cost. `replay` runs a simulated scenario from
its start to `at` seconds through the agent's own tick (sampling, analysis, cost) on a
manual clock, as a running `gpuwatch run --simulate` agent would have seen it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from gpuwatch.agent import Agent
from gpuwatch.clock import ManualClock
from gpuwatch.snapshot import FleetSnapshot

GPM_GAP_SECONDS = 0.15
"""Between the two ticks of a one-off sample (GPM needs at least 100 ms)."""
MAX_REPLAY_TICKS = 3600
"""A replay ticks every `agent.interval_seconds`, coarser when that would exceed this
many ticks, but never more than `MAX_REPLAY_STEP_SECONDS` apart."""
MAX_REPLAY_STEP_SECONDS = 60.0
"""The longest gap the analysis and the cost ledger count in full."""


def sample_once(agent: Agent, *, sleep: Callable[[float], None] = time.sleep) -> FleetSnapshot:
    """Two ticks `GPM_GAP_SECONDS` apart on the agent's (real) clock; the second."""
    agent.tick()
    sleep(GPM_GAP_SECONDS)
    return agent.tick()


def replay_step(at: float, interval: float) -> float:
    """Seconds between replayed ticks for a replay to `at` seconds."""
    return min(max(interval, at / MAX_REPLAY_TICKS), MAX_REPLAY_STEP_SECONDS)


def replay(agent: Agent, clock: ManualClock, at: float) -> FleetSnapshot:
    """Tick from scenario time 0 to `at` (at least `GPM_GAP_SECONDS`); the last snapshot.

    The slow job (PCIe, ECC, MIG layout) runs every `agent.slow_interval_seconds`.
    """
    config = agent.config.agent
    end = clock.time() + max(at, GPM_GAP_SECONDS)
    step = replay_step(at, config.interval_seconds)
    next_slow = clock.time() + config.slow_interval_seconds
    snapshot = agent.tick()
    ticks = max(math.ceil((end - clock.time()) / step), 1)
    for _ in range(ticks):
        clock.set(min(clock.time() + step, end))
        if clock.time() >= next_slow:
            agent.nvml.collect_slow()
            next_slow += config.slow_interval_seconds
        snapshot = agent.tick()
    return snapshot
