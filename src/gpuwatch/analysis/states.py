"""Per-GPU activity states with hysteresis, and which class each sampled second falls in.

States:

- **pending**: the window (default 30 min of sampled time) does not yet hold enough
  evidence to say anything; the first state of every GPU;
- **idle**: no process and activity under the noise floor for the whole window;
- **held**: processes hold memory but activity stayed under the floor for the whole window;
- **underutilized**: the window's mean activity is under a target (leaving it needs the
  mean to climb a hysteresis band above the target);
- **busy**: everything else.

Entering idle or held needs the whole window inactive, so a 2-minute data-loading pause
never counts; leaving them needs activity sustained for `resolve_after_seconds`, so one
stray kernel does not flap the state. Each sample is O(1): the window is a last-active
timestamp plus a bucketed running mean.

**Classes of time.** Every sampled second ends up in one class: `busy`, `idle`, `held`
or `unknown` (no activity signal). Some seconds cannot be classed when they are sampled:
the seconds of the pending period, and the seconds of an inactive spell that is shorter
than the window (a pause that may end, or may become idleness). They stay *unsettled*
until the evidence arrives, and are then settled in time order, oldest first:

- an inactive spell that reaches the window settles as idle or held, all of it;
- an inactive spell that ends (activity resumes) settles as busy: it was a pause;
- the pending period settles as busy when the window fills, except an inactive spell
  still open at that moment, which stays unsettled and follows the rule above.

Unsettled seconds count as neither busy nor idle in any ratio or cost split. The
tracker reports settlements as tick counts (`tick_class`, `settlements`), so the cost
ledger can replay them over its own per-tick record without any float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.analysis.rolling import BucketedWindow

FLAGGED = frozenset({"idle", "held"})

TIME_CLASSES = ("busy", "idle", "held", "unknown")
"""The classes a settled second can fall in."""


@dataclass(frozen=True, slots=True)
class StateSettings:
    """Thresholds of the state machine (see `[analysis]` in the config).

    `underutilized_hysteresis_ratio`: an underutilized GPU is busy again only once its
    window mean reaches `underutilized_below_ratio` + this band, so a mean that wobbles
    around the target does not flip the state every evaluation.
    """

    window_seconds: float = 1800.0
    noise_floor_ratio: float = 0.01
    underutilized_below_ratio: float = 0.25
    underutilized_hysteresis_ratio: float = 0.05
    resolve_after_seconds: float = 60.0
    power_veto_watts: float | None = None
    max_sample_gap_seconds: float = 60.0


class GpuStateTracker:
    """Follows one GPU's activity signal, decides its state and classes its time."""

    def __init__(self, settings: StateSettings) -> None:
        self._s = settings
        self._activity = BucketedWindow(settings.window_seconds)
        self._first_seen: float | None = None
        self._evidence = 0.0  # sampled seconds with a signal since the window (re)started
        self._previous_t: float | None = None
        self._last_active: float | None = None
        self._active_since: float | None = None
        self._inactive_observed = 0.0  # sampled seconds of the current inactivity
        self._unsettled_ticks = 0
        self._unsettled_seconds = 0.0
        self._spell_ticks = 0  # unsettled ticks of the open inactive spell
        self.state = "pending"
        self.state_since: float = 0.0
        self.settled_seconds: dict[str, float] = dict.fromkeys(TIME_CLASSES, 0.0)
        self.tick_seconds = 0.0
        self.tick_class: str | None = None
        self.settlements: tuple[tuple[str, int], ...] = ()

    @property
    def idle_seconds_total(self) -> float:
        """Settled seconds spent idle or held."""
        return self.settled_seconds["idle"] + self.settled_seconds["held"]

    @property
    def unsettled_seconds(self) -> float:
        """Sampled seconds not yet classed (pending period, open inactive spell)."""
        return self._unsettled_seconds

    @property
    def inactive_seconds(self) -> float:
        """Sampled seconds of the current inactivity; 0 while active."""
        return self._inactive_observed

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
        """Take one sample at epoch time `t`; returns the state after it.

        Afterwards `tick_seconds` is the sampled time this tick adds, `tick_class` its
        class when known at once (`unknown` without a signal) or None when it joins the
        unsettled ticks, and `settlements` the (class, ticks) settled by this sample,
        oldest unsettled ticks first.
        """
        s = self._s
        if self._first_seen is None:
            self._first_seen = t
            self.state_since = t
        # a gap (agent stopped, GPU down) or a clock step back counts as no time at all
        elapsed = 0.0 if self._previous_t is None else t - self._previous_t
        dt = elapsed if 0.0 < elapsed <= s.max_sample_gap_seconds else 0.0
        self._previous_t = max(t, self._previous_t or t)
        self.tick_seconds = dt
        self.settlements = ()
        vetoed = (
            s.power_veto_watts is not None
            and power_watts is not None
            and power_watts >= s.power_veto_watts
        )
        if activity is None and not vetoed:
            # no activity signal this sample: unknown is neither idle nor busy
            self.tick_class = "unknown"
            self.settled_seconds["unknown"] += dt
            return self.state
        self.tick_class = None
        self._unsettled_ticks += 1
        self._unsettled_seconds += dt
        level = activity or 0.0
        active = level >= s.noise_floor_ratio or vetoed
        if dt > 0:
            self._activity.add(t, level, dt)
            self._evidence += dt
        if active:
            if self._active_since is None:
                self._active_since = t
            self._last_active = t
            self._inactive_observed = 0.0
            self._spell_ticks = 0
        else:
            self._active_since = None
            self._inactive_observed += dt
            self._spell_ticks += 1
        new = self._decide(t, active, has_processes)
        self._settle(new, active)
        if new != self.state:
            if self.state in FLAGGED and new not in FLAGGED:
                # the idle stretch says nothing about the workload that woke up
                self._activity = BucketedWindow(s.window_seconds)
                self._evidence = 0.0
            entering_flagged = new in FLAGGED and self.state not in FLAGGED
            self.state_since = t - self._inactive_observed if entering_flagged else t
            self.state = new
        return new

    def restore(
        self,
        t: float,
        *,
        state: str,
        state_since: float,
        inactive_since: float | None,
        inactive_seconds: float,
        activity_mean: float | None,
    ) -> None:
        """Resume a state a previous run stored, before the first sample.

        `t` is when that run last sampled; the time between then and the first sample
        here counts as a gap (no sampled time). The window counts as full, so the GPU is
        never `pending` again: an idle or held GPU stays so (its `state_since` and
        inactive seconds continue, and activity must last `resolve_after_seconds` to
        wake it), and a busy or underutilized GPU keeps its window mean as one
        window-long sample. Settled and unsettled seconds start from 0. Ignored once a
        sample was taken or for `pending`.
        """
        if self._first_seen is not None or state == "pending":
            return
        s = self._s
        self._first_seen = min(state_since, t)
        self._evidence = s.window_seconds
        self.state = state
        self.state_since = state_since
        if state in FLAGGED:
            self._last_active = inactive_since if inactive_since is not None else state_since
            self._inactive_observed = max(inactive_seconds, s.window_seconds)
        else:
            self._active_since = state_since
            self._last_active = t
        if activity_mean is not None and state not in FLAGGED:
            self._activity.add(t, activity_mean, s.window_seconds)

    def _settle(self, new: str, active: bool) -> None:
        """Class the unsettled ticks that this sample gives evidence for."""
        if new == "pending":
            return
        if new in FLAGGED and not active:
            self._settle_oldest(new, self._unsettled_ticks, self._unsettled_seconds)
        elif active:  # a pause ended, or a GPU wakes up: its time is busy
            self._settle_oldest("busy", self._unsettled_ticks, self._unsettled_seconds)
        else:  # an open inactive spell: what came before it is busy, the spell waits
            spell_seconds = self._inactive_observed
            self._settle_oldest(
                "busy",
                self._unsettled_ticks - self._spell_ticks,
                self._unsettled_seconds - spell_seconds,
            )

    def _settle_oldest(self, time_class: str, ticks: int, seconds: float) -> None:
        if ticks <= 0:
            return
        self.settlements = (*self.settlements, (time_class, ticks))
        self.settled_seconds[time_class] += max(seconds, 0.0)
        self._unsettled_ticks -= ticks
        self._unsettled_seconds = 0.0 if self._unsettled_ticks == 0 else self._inactive_observed
        self._spell_ticks = min(self._spell_ticks, self._unsettled_ticks)

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
        full_window = self._evidence >= s.window_seconds
        if self.state == "pending" and not full_window:
            return "pending"
        mean = self._activity.mean(t)
        if not full_window or mean is None:
            return "busy"
        target = s.underutilized_below_ratio
        if self.state == "underutilized":
            target += s.underutilized_hysteresis_ratio
        return "underutilized" if mean < target else "busy"
