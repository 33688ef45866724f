"""Counting NVML calls at the library boundary: how many calls one tick costs.

`CountingNvml` wraps a `pynvml`-like module (the stand-in) and counts each `nvml*`
function call by name, passing everything through unchanged. `calls_per_tick` runs
the real `NvmlSampler` over a scenario and reports the steady-state calls of one tick
(the fast path) and of one slow pass, per GPU: the figures in `docs/benchmarks.md`
(`python bench/nvml_calls.py`) and the ones `tests/test_nvml_calls.py` pins.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from gpuwatch.core.clock import ManualClock
from gpuwatch.nvml import NvmlSampler
from gpuwatch.simulate import SimulatedNvml, load_scenario


class CountingNvml:
    """Counts `nvml*` calls by function name and passes everything through."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not name.startswith("nvml") or not callable(value) or isinstance(value, type):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return value(*args, **kwargs)

        return counted

    def total(self) -> int:
        """Every call counted so far."""
        return sum(self.calls.values())


@dataclass(frozen=True, slots=True)
class TickCalls:
    """NVML calls of one steady-state tick and one slow pass, for a whole host."""

    gpus: int
    tick: Counter[str]
    slow: Counter[str]

    @property
    def tick_total(self) -> int:
        """Calls of one fast-path tick, every GPU."""
        return sum(self.tick.values())

    @property
    def slow_total(self) -> int:
        """Calls of one slow pass, every GPU."""
        return sum(self.slow.values())


def calls_per_tick(scenario: str, *, warmup_ticks: int = 3) -> TickCalls:
    """Count the calls of one tick and one slow pass of `scenario` after `warmup_ticks`.

    Ticks are one simulated second apart (fresh GPM pairs and process samples); the
    warm-up lets NotSupported answers be remembered, as they are after the first tick.
    """
    clock = ManualClock()
    counting = CountingNvml(SimulatedNvml(load_scenario(scenario), clock=clock))
    sampler = NvmlSampler(counting, clock, watch_xid=False)
    sampler.open()
    try:
        for _ in range(warmup_ticks):
            clock.advance(1.0)
            sampler.sample()
        sampler.sample_slow()
        clock.advance(1.0)
        counting.calls.clear()
        sampler.sample()
        tick = Counter(counting.calls)
        counting.calls.clear()
        sampler.sample_slow()
        slow = Counter(counting.calls)
        gpus = len(sampler.identities)
    finally:
        sampler.close()
    return TickCalls(gpus=gpus, tick=tick, slow=slow)
