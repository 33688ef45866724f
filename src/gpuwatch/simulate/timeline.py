"""Activity over time: the scenario's `activity` tables and their compiled, O(1) form.

An activity timeline is piecewise constant. `Timeline.at(t)` gives the noise-free
`Act` at scenario time `t` (seconds) and `Timeline.next_change(t)` the next time it may
change, so `integrate()` can sum exactly over any interval piece by piece (energy,
NVLink counters, GPM averages) without sampling.

Precedence at time `t`: the segment covering `t` (else the top level), then within it
the first `periodic` window that is open at `t` (else that block's `levels`).
A level given as ``[lo, hi]`` takes one value per `vary_every` window, drawn
deterministically; all ranged metrics of a block move together (one draw per window).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuwatch.simulate.noise import stable_seed, unit

LevelValue = float | tuple[float, float]
"""A constant, or ``[lo, hi]``: a value drawn per `vary_every` window."""


class Levels(BaseModel):
    """What the GPU (or MIG instance) is doing; fractions are 0-1, rates MiB/s."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    util: LevelValue = 0.0
    """Fraction of time a kernel was running (nvmlDeviceGetUtilizationRates .gpu)."""
    sm: LevelValue = 0.0
    """SM active fraction (GPM SM_UTIL)."""
    occupancy: LevelValue = 0.0
    """Resident warps / maximum (GPM SM_OCCUPANCY)."""
    tensor: LevelValue = 0.0
    """Tensor-core active fraction (GPM ANY_TENSOR_UTIL)."""
    dram: LevelValue = 0.0
    """DRAM bandwidth used / peak (GPM DRAM_BW_UTIL; also utilization .memory)."""
    pcie_tx_mib_s: LevelValue = 0.0
    pcie_rx_mib_s: LevelValue = 0.0
    nvlink_tx_mib_s: LevelValue = 0.0
    nvlink_rx_mib_s: LevelValue = 0.0
    power_w: float | None = Field(default=None, gt=0)
    """Board power in W; when omitted it follows activity (idle floor to the limit)."""

    @field_validator("util", "sm", "occupancy", "tensor", "dram")
    @classmethod
    def _fraction(cls, value: LevelValue) -> LevelValue:
        lo, hi = _bounds(value)
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError("must be a fraction 0-1, or [lo, hi] with 0 <= lo <= hi <= 1")
        return value

    @field_validator("pcie_tx_mib_s", "pcie_rx_mib_s", "nvlink_tx_mib_s", "nvlink_rx_mib_s")
    @classmethod
    def _rate(cls, value: LevelValue) -> LevelValue:
        lo, hi = _bounds(value)
        if not 0.0 <= lo <= hi:
            raise ValueError("must be a rate >= 0 (MiB/s), or [lo, hi] with 0 <= lo <= hi")
        return value


class Periodic(BaseModel):
    """A repeating window: `levels` for `duration` s every `every` s, from `offset` s on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    every: float = Field(gt=0)
    duration: float = Field(gt=0)
    offset: float = Field(default=0.0, ge=0)
    levels: Levels = Levels()

    @model_validator(mode="after")
    def _fits(self) -> Periodic:
        if self.duration > self.every:
            raise ValueError("duration must not exceed every")
        return self


class Segment(BaseModel):
    """Activity between `start` and `end` (s; no end: for ever), replacing the top level."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: float = Field(ge=0)
    end: float | None = None
    levels: Levels = Levels()
    periodic: tuple[Periodic, ...] = ()

    @model_validator(mode="after")
    def _ordered(self) -> Segment:
        if self.end is not None and self.end <= self.start:
            raise ValueError("end must be after start")
        return self


class Activity(BaseModel):
    """A whole activity timeline (the default is an idle GPU)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    levels: Levels = Levels()
    periodic: tuple[Periodic, ...] = ()
    segments: tuple[Segment, ...] = ()
    vary_every: float = Field(default=60.0, gt=0)
    """Seconds each draw of a ``[lo, hi]`` level lasts."""
    jitter: float = Field(default=0.02, ge=0, le=0.5)
    """Relative noise on reported values, redrawn each simulated second (0.02 = ±2 %)."""

    @field_validator("segments")
    @classmethod
    def _no_overlap(cls, segments: tuple[Segment, ...]) -> tuple[Segment, ...]:
        previous_end = -1.0
        for segment in segments:
            if segment.start < previous_end:
                raise ValueError("segments must be in time order and must not overlap")
            previous_end = math.inf if segment.end is None else segment.end
        return segments


def _bounds(value: LevelValue) -> tuple[float, float]:
    if isinstance(value, tuple):
        return float(value[0]), float(value[1])
    return float(value), float(value)


class Act(NamedTuple):
    """Activity at one instant: fractions 0-1 and rates in MiB/s."""

    util: float
    sm: float
    occupancy: float
    tensor: float
    dram: float
    pcie_tx: float
    pcie_rx: float
    nvlink_tx: float
    nvlink_rx: float
    power_w: float | None = None

    def metrics(self) -> tuple[float, ...]:
        """The nine fractions and rates, without the power override."""
        return (
            self.util,
            self.sm,
            self.occupancy,
            self.tensor,
            self.dram,
            self.pcie_tx,
            self.pcie_rx,
            self.nvlink_tx,
            self.nvlink_rx,
        )


IDLE = Act(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
_N_METRICS = 9


class ActivitySource(Protocol):
    """Anything with a piecewise-constant activity (a timeline or an aggregate)."""

    def at(self, t: float) -> Act:
        """Noise-free activity at scenario time `t` (s)."""
        ...

    def next_change(self, t: float) -> float:
        """The next time (> t) at which `at` may change; `math.inf` if never."""
        ...


class _Spec:
    """One `Levels` table, compiled: fixed values or lo/hi for a per-window draw."""

    __slots__ = ("_cache", "_hi", "_lo", "fixed", "power_w", "ranged", "salt")

    def __init__(self, levels: Levels, salt: int) -> None:
        values = (
            levels.util,
            levels.sm,
            levels.occupancy,
            levels.tensor,
            levels.dram,
            levels.pcie_tx_mib_s,
            levels.pcie_rx_mib_s,
            levels.nvlink_tx_mib_s,
            levels.nvlink_rx_mib_s,
        )
        bounds = [_bounds(v) for v in values]
        self._lo = tuple(b[0] for b in bounds)
        self._hi = tuple(b[1] for b in bounds)
        self.ranged = any(lo != hi for lo, hi in bounds)
        self.power_w = levels.power_w
        self.salt = salt
        self.fixed = Act._make((*self._lo, self.power_w))
        self._cache: tuple[int, Act] = (-1, self.fixed)

    def value(self, seed: int, window: int) -> Act:
        """The activity in vary-window `window` (the same for every call)."""
        if not self.ranged:
            return self.fixed
        cached_window, cached = self._cache
        if cached_window == window:
            return cached
        u = unit(seed, self.salt, window)
        values = (lo + u * (hi - lo) for lo, hi in zip(self._lo, self._hi, strict=True))
        act = Act._make((*values, self.power_w))
        self._cache = (window, act)
        return act


class _Window:
    __slots__ = ("duration", "every", "offset", "spec")

    def __init__(self, periodic: Periodic, spec: _Spec) -> None:
        self.every = periodic.every
        self.duration = periodic.duration
        self.offset = periodic.offset
        self.spec = spec

    def state(self, t: float) -> tuple[bool, float]:
        """(open at t, time of the next edge after t)."""
        if t < self.offset:
            return False, self.offset
        phase = math.fmod(t - self.offset, self.every)
        if phase < self.duration:
            return True, t + (self.duration - phase)
        return False, t + (self.every - phase)


class _Block:
    __slots__ = ("spec", "windows")

    def __init__(self, spec: _Spec, windows: list[_Window]) -> None:
        self.spec = spec
        self.windows = windows

    def spec_at(self, t: float) -> _Spec:
        for window in self.windows:
            is_open, _ = window.state(t)
            if is_open:
                return window.spec
        return self.spec

    def next_edge(self, t: float) -> float:
        edge = math.inf
        for window in self.windows:
            _, nxt = window.state(t)
            edge = min(edge, nxt)
        return edge


class Timeline:
    """A compiled `Activity`: `at(t)` and `next_change(t)` in O(log segments)."""

    def __init__(self, activity: Activity, seed: int) -> None:
        self.seed = seed
        self.vary_every = activity.vary_every
        self.jitter = activity.jitter
        counter = iter(range(1_000_000))

        def block(levels: Levels, periodic: Sequence[Periodic]) -> _Block:
            spec = _Spec(levels, stable_seed(seed, next(counter)))
            windows = [
                _Window(p, _Spec(p.levels, stable_seed(seed, next(counter)))) for p in periodic
            ]
            return _Block(spec, windows)

        self._base = block(activity.levels, activity.periodic)
        self._starts = [s.start for s in activity.segments]
        self._ends = [math.inf if s.end is None else s.end for s in activity.segments]
        self._blocks = [block(s.levels, s.periodic) for s in activity.segments]

    def _block_at(self, t: float) -> tuple[_Block, float]:
        """The block in force at t and the time it stops being in force."""
        i = bisect_right(self._starts, t) - 1
        if i >= 0 and t < self._ends[i]:
            return self._blocks[i], self._ends[i]
        following = i + 1
        boundary = self._starts[following] if following < len(self._starts) else math.inf
        return self._base, boundary

    def at(self, t: float) -> Act:
        """Noise-free activity at scenario time `t` (s)."""
        block, _ = self._block_at(t)
        spec = block.spec_at(t)
        if not spec.ranged:
            return spec.fixed
        return spec.value(self.seed, math.floor(t / self.vary_every))

    def next_change(self, t: float) -> float:
        """The next time (> t) at which `at` may change."""
        block, boundary = self._block_at(t)
        edge = min(boundary, block.next_edge(t))
        if block.spec_at(t).ranged:
            edge = min(edge, (math.floor(t / self.vary_every) + 1) * self.vary_every)
        return edge


class Aggregate:
    """Weighted sum of several sources (a MIG-enabled GPU: its instances by slice)."""

    def __init__(self, parts: Sequence[tuple[ActivitySource, float]]) -> None:
        self._parts = list(parts)

    def at(self, t: float) -> Act:
        """Weighted sum of the parts' fractions and rates (power follows activity)."""
        totals = [0.0] * _N_METRICS
        for source, weight in self._parts:
            for i, value in enumerate(source.at(t).metrics()):
                totals[i] += value * weight
        return Act._make((*(min(v, 1.0) if i < 5 else v for i, v in enumerate(totals)), None))

    def next_change(self, t: float) -> float:
        """The earliest next change of any part."""
        return min((source.next_change(t) for source, _ in self._parts), default=math.inf)


_MIN_STEP = 1e-9


def integrate(
    source: ActivitySource,
    t0: float,
    t1: float,
    quantities: Callable[[Act], Sequence[float]],
) -> list[float]:
    """Exact ∫ quantities(act(t)) dt over [t0, t1] (seconds x the quantities' units).

    Costs one step per change of the source inside the interval.
    """
    result: list[float] | None = None
    t = t0
    while t < t1:
        nxt = min(max(source.next_change(t), t + _MIN_STEP), t1)
        values = quantities(source.at(t))
        dt = nxt - t
        if result is None:
            result = [v * dt for v in values]
        else:
            for i, v in enumerate(values):
                result[i] += v * dt
        t = nxt
    if result is None:
        return [0.0] * len(quantities(source.at(t0)))
    return result


def average(source: ActivitySource, t0: float, t1: float) -> Act:
    """Time-average activity over [t0, t1]; the activity at t0 when t1 <= t0."""
    if t1 <= t0:
        return source.at(t0)
    sums = integrate(source, t0, t1, Act.metrics)
    span = t1 - t0
    return Act._make((*(s / span for s in sums), None))
