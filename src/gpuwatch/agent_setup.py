"""What the agent settles once, at construction or start, from its config and its GPUs."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from gpuwatch.analysis.engine import AnalysisSettings
from gpuwatch.config import Config
from gpuwatch.snapshot import GpuIdentity
from gpuwatch.tokens import TokenSourceConfig

log = logging.getLogger("gpuwatch.agent")  # its lines are the agent's

MIN_REAL_INTERVAL_SECONDS = 0.05
"""The shortest real interval between two runs of a job (under --speed X as well)."""

GAP_TICKS = 3
"""A gap between samples counts as sampled time up to this many tick intervals."""


def with_gap_limit(settings: AnalysisSettings, config: Config, speed: float) -> AnalysisSettings:
    """`settings` whose sample-gap limit is at least GAP_TICKS ticks of simulated time.

    Under `--speed X` the scheduler cannot fire faster than every 50 ms of real time, so
    a tick spans up to 0.05 x X simulated seconds (150 s at --speed 3000): a fixed 60 s
    limit would count every tick as a gap and charge nothing.
    """
    tick = max(config.agent.interval_seconds, MIN_REAL_INTERVAL_SECONDS * speed)
    states = settings.states
    limit = max(states.max_sample_gap_seconds, GAP_TICKS * tick)
    return replace(settings, states=replace(states, max_sample_gap_seconds=limit))


def check_token_source_gpus(
    sources: tuple[TokenSourceConfig, ...], identities: Sequence[GpuIdentity]
) -> None:
    """Say once, at start, which token sources can have no $/1M tokens and why."""
    known: set[int | str] = {i.index for i in identities} | {i.uuid for i in identities}
    for source in sources:
        if not source.gpus:
            log.info(
                "token source %r names no GPU: tokens are counted, no $/1M tokens", source.name
            )
            continue
        missing = [gpu for gpu in source.gpus if gpu not in known]
        if missing:
            log.warning(
                "token source %r names GPU(s) %s that this host does not have: "
                "its $/1M tokens stays absent (MIG instances: name their GPU)",
                source.name,
                ", ".join(repr(gpu) for gpu in missing),
            )
