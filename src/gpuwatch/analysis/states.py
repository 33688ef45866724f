"""Per-GPU activity states with hysteresis: busy, idle, held, underutilized.

- **idle**: no process and activity under the noise floor for the whole window;
- **held**: processes hold memory but activity stayed under the floor for the whole window;
- **underutilized**: the window's mean activity is under a target;
- **busy**: everything else.

Entering idle or held needs the whole window (default 30 min) inactive, so a 2-minute
data-loading pause never counts; leaving them needs activity sustained for
`resolve_after_seconds`, so one stray kernel does not flap the state. Each sample is
O(1): the window is a last-active timestamp plus a bucketed running mean.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.analysis.rolling import BucketedWindow

FLAGGED = frozenset({"idle", "held"})


@dataclass(frozen=True, slots=True)
class StateSettings:
    """Thresholds of the state machine (see `[analysis]` in the config)."""

    window_seconds: float = 1800.0
    noise_floor_ratio: float = 0.01
    underutilized_below_ratio: float = 0.25
    resolve_after_seconds: float = 60.0
    power_veto_watts: float | None = None
    max_sample_gap_seconds: float = 60.0


class GpuStateTracker:
    """Follows one GPU's activity signal and decides its state every sample."""

    def __init__(self, settings: StateSettings) -> None:
        self._s = settings
        self._activity = BucketedWindow(settings.window_seconds)
        self._first_seen: float | None = None
        self._window_start = 0.0  # when the current activity window began filling
        self._previous_t: float | None = None
        self._last_active: float | None = None
        self._active_since: float | None = None
        self._inactive_observed = 0.0  # sampled seconds of the current inactivity
        self.state = "busy"
        self.state_since: float = 0.0
        self.idle_seconds_total = 0.0

    @property
    def inactive_since(self) -> float | None:
        """Start of the current stretch of inactivity (None while active)."""
        if self._first_seen is None or self._active_since is not None:
            return None
        return self._last_active if self._last_active is not None else self._first_seen

    @property
    def activity_mean(self) -> float | None:
        """Mean activity over the window, as of the last sample."""
        return None if self._previous_t is None else self._activity.mean(self._previous_t)

    def observe(
        self, t: float, activity: float | None, power_watts: float | None, has_processes: bool
    ) -> str:
        """Take one sample at epoch time `t`; returns the state after it."""
        s = self._s
        if self._first_seen is None:
            self._first_seen = t
            self._window_start = t
            self.state_since = t
        # a gap (agent stopped, GPU down) or a clock step back counts as no time at all
        elapsed = 0.0 if self._previous_t is None else t - self._previous_t
        dt = min(max(elapsed, 0.0), s.max_sample_gap_seconds)
        self._previous_t = max(t, self._previous_t or t)
        vetoed = (
            s.power_veto_watts is not None
            and power_watts is not None
            and power_watts >= s.power_veto_watts
        )
        if activity is None and not vetoed:
            return self.state  # no activity signal this sample: unknown is not idle
        level = activity or 0.0
        active = level >= s.noise_floor_ratio or vetoed
        if dt > 0:
            self._activity.add(t, level, dt)
        if active:
            if self._active_since is None:
                self._active_since = t
            self._last_active = t
            self._inactive_observed = 0.0
        else:
            self._active_since = None
            self._inactive_observed += dt
        new = self._decide(t, active, has_processes)
        if new in FLAGGED:
            if self.state not in FLAGGED:  # counted from the confirmed start, observed only
                self.idle_seconds_total += self._inactive_observed
            elif not active:  # waking up (active, not yet resolved) is not idle time
                self.idle_seconds_total += dt
        if new != self.state:
            if self.state in FLAGGED and new not in FLAGGED:
                # the idle stretch says nothing about the workload that woke up
                self._activity = BucketedWindow(s.window_seconds)
                self._window_start = t
            entering_flagged = new in FLAGGED and self.state not in FLAGGED
            self.state_since = t - self._inactive_observed if entering_flagged else t
            self.state = new
        return new

    def _decide(self, t: float, active: bool, has_processes: bool) -> str:
        s = self._s
        if not active and self._inactive_observed >= s.window_seconds:
            return "held" if has_processes else "idle"
        if self.state in FLAGGED and (
            not active
            or (self._active_since is not None and t - self._active_since < s.resolve_after_seconds)
        ):
            return "held" if has_processes else "idle"
        if self.state in FLAGGED:
            return "busy"  # waking up: the activity window restarts now
        mean = self._activity.mean(t)
        full_window = t - self._window_start >= s.window_seconds
        if full_window and mean is not None and mean < s.underutilized_below_ratio:
            return "underutilized"
        return "busy"
