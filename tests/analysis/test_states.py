"""The state machine on literal sample sequences (simulated seconds, 1 s apart)."""

from __future__ import annotations

from gpuwatch.analysis.rolling import BucketedWindow
from gpuwatch.analysis.states import GpuStateTracker, StateSettings

WINDOW = 1800.0


def feed(
    tracker: GpuStateTracker,
    start: int,
    end: int,
    activity: float,
    *,
    processes: bool = False,
    power: float | None = None,
) -> list[str]:
    return [tracker.observe(float(t), activity, power, processes) for t in range(start, end)]


def test_idle_is_flagged_after_the_window_and_not_before() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))
    states = feed(tracker, 0, 1900, 0.0)
    assert set(states[:1800]) == {"pending"}, "no evidence yet: neither busy nor idle"
    assert states[1800] == "idle"
    assert tracker.state_since == 0.0, "idle since the start of the confirmed inactivity"
    assert tracker.idle_seconds_total == 1899.0


def test_held_when_processes_keep_memory_without_activity() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))
    assert feed(tracker, 0, 1801, 0.0, processes=True)[-1] == "held"


def test_pauses_shorter_than_the_window_never_flag() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))
    states: list[str] = []
    for cycle in range(6):  # 2 hours of 20-minute cycles with a 2-minute pause
        base = cycle * 1200
        states += feed(tracker, base, base + 1080, 0.9, processes=True)
        states += feed(tracker, base + 1080, base + 1200, 0.0, processes=True)
    assert set(states[:1800]) == {"pending"}
    assert set(states[1800:]) == {"busy"}
    assert tracker.idle_seconds_total == 0.0


def test_noise_under_the_floor_is_still_idle() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW, noise_floor_ratio=0.01))
    assert feed(tracker, 0, 1801, 0.005)[-1] == "idle"


def test_power_veto_keeps_a_power_hungry_gpu_out_of_idle() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW, power_veto_watts=150.0))
    assert "idle" not in feed(tracker, 0, 2000, 0.0, power=300.0)
    assert feed(tracker, 2000, 3801, 0.0, power=70.0)[-1] == "idle"


def test_waking_up_resolves_after_sustained_activity_only() -> None:
    settings = StateSettings(window_seconds=WINDOW, resolve_after_seconds=60)
    tracker = GpuStateTracker(settings)
    feed(tracker, 0, 1801, 0.0)
    assert feed(tracker, 1801, 1811, 0.8) == ["idle"] * 10, "a 10 s blip does not resolve"
    assert feed(tracker, 1811, 1900, 0.0)[-1] == "idle"
    woke = feed(tracker, 1900, 1990, 0.8)
    assert woke[58] == "idle"
    assert woke[61] == "busy", "the window restarts when the GPU wakes up"
    assert tracker.state_since == 1960.0
    assert feed(tracker, 1990, 3900, 0.1)[-1] == "underutilized"


def test_underutilized_needs_a_full_window_of_low_mean_activity() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW, underutilized_below_ratio=0.25))
    states = feed(tracker, 0, 2000, 0.15, processes=True)
    assert states[1000] == "pending"
    assert states[-1] == "underutilized"
    assert tracker.activity_mean is not None
    assert abs(tracker.activity_mean - 0.15) < 1e-9


def test_bucketed_window_mean_max_and_expiry() -> None:
    window = BucketedWindow(60.0, buckets=6)
    for t in range(60):
        window.add(float(t), 1.0 if t < 30 else 3.0, 1.0)
    assert window.mean(59.0) == 2.0
    assert window.maximum(59.0) == 3.0
    assert window.covered_seconds(59.0) == 60.0
    # 40 s later the first 30 s (value 1.0) have left the window
    for t in range(60, 100):
        window.add(float(t), 3.0, 1.0)
    assert window.mean(99.0) == 3.0
    # after a gap longer than the window, nothing is left
    assert window.mean(500.0) is None
    assert window.maximum(500.0) is None


def test_no_activity_signal_is_not_idleness() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))
    states = [tracker.observe(float(t), None, 200.0, True) for t in range(0, 4000)]
    assert set(states) == {"pending"}, "no signal is no evidence"
    assert tracker.idle_seconds_total == 0.0
    assert tracker.settled_seconds["unknown"] == 3999.0
    assert tracker.settled_seconds["busy"] == 0.0


def test_a_sampling_gap_does_not_count_as_idle_time() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))
    feed(tracker, 0, 300, 0.0)
    # two hours without samples (agent stopped, GPU down), then one inactive sample
    assert tracker.observe(7500.0, 0.0, None, False) not in ("idle", "held")
    assert feed(tracker, 7501, 9100, 0.0)[-1] == "idle"
    assert tracker.idle_seconds_total < 1900 + 300, "only sampled seconds are idle seconds"


def test_a_clock_step_back_never_decreases_idle_seconds() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))
    feed(tracker, 0, 1900, 0.0)
    before = tracker.idle_seconds_total
    tracker.observe(1870.0, 0.0, None, False)  # wall clock stepped back 30 s
    assert tracker.idle_seconds_total >= before


def test_waking_up_is_not_billed_as_idle_time() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW, resolve_after_seconds=60))
    feed(tracker, 0, 1801, 0.0)
    idle_before = tracker.idle_seconds_total
    feed(tracker, 1801, 1900, 0.8)  # active: resolves after 60 s
    assert tracker.state == "busy"
    assert tracker.idle_seconds_total == idle_before


class Replay:
    """Replays a tracker's per-tick classes and settlements over the tick seconds, the
    way the cost ledger does: seconds by class, and what is still unsettled."""

    def __init__(self, tracker: GpuStateTracker) -> None:
        self.tracker = tracker
        self.queue: list[tuple[float, str | None]] = []
        self.booked: dict[str, float] = {}

    def feed(self, samples: list[tuple[float, float | None]]) -> dict[str, float]:
        for t, activity in samples:
            self.tracker.observe(t, activity, None, False)
            self.queue.append((self.tracker.tick_seconds, self.tracker.tick_class))
            for time_class, ticks in self.tracker.settlements:
                left = ticks
                for k, (seconds, known) in enumerate(self.queue):
                    if left == 0:
                        break
                    if known is None:
                        self.queue[k] = (seconds, time_class)
                        left -= 1
            while self.queue and self.queue[0][1] is not None:
                seconds, known = self.queue.pop(0)
                self.booked[str(known)] = self.booked.get(str(known), 0.0) + seconds
        return {**self.booked, "unsettled": sum(seconds for seconds, _ in self.queue)}


def test_pending_time_settles_as_busy_when_the_window_fills_active() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))
    replay = Replay(tracker)
    booked = replay.feed([(float(t), 0.9) for t in range(0, 1800)])
    assert tracker.state == "pending"
    assert booked == {"unsettled": 1799.0}, "every second is unsettled while pending"
    booked = replay.feed([(float(t), 0.9) for t in range(1800, 1802)])
    assert tracker.state == "busy"
    assert booked == {"busy": 1801.0, "unsettled": 0.0}
    assert tracker.settled_seconds["busy"] == 1801.0


def test_a_pause_is_unsettled_until_it_ends_then_busy() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))
    replay = Replay(tracker)
    replay.feed([(float(t), 0.9) for t in range(0, 2000)])
    booked = replay.feed([(float(t), 0.0) for t in range(2000, 2120)])
    assert tracker.state == "busy"
    assert tracker.unsettled_seconds == 120.0
    assert tracker.inactive_seconds == 120.0
    assert booked == {"busy": 1999.0, "unsettled": 120.0}
    booked = replay.feed([(2120.0, 0.9)])
    assert booked == {"busy": 2120.0, "unsettled": 0.0}, "the pause was part of the work"
    assert tracker.unsettled_seconds == 0.0


def test_a_spell_open_when_pending_ends_stays_unsettled_and_becomes_idle() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))
    replay = Replay(tracker)
    # active through t=599; each tick's second is classed by the sample that ends it
    booked = replay.feed([(float(t), 0.9 if t < 600 else 0.0) for t in range(0, 1801)])
    assert tracker.state == "busy", "the window filled with a 20-minute spell open"
    assert booked == {"busy": 599.0, "unsettled": 1201.0}
    booked = replay.feed([(float(t), 0.0) for t in range(1801, 2399)])
    assert tracker.state == "underutilized", "the spell is 1799 s long: not yet the window"
    assert booked == {"busy": 599.0, "unsettled": 1799.0}
    booked = replay.feed([(2399.0, 0.0)])
    assert tracker.state == "idle"
    assert booked == {"busy": 599.0, "idle": 1800.0, "unsettled": 0.0}, "idle from its start"
    assert tracker.idle_seconds_total == 1800.0
    assert tracker.state_since == 599.0


def test_unknown_samples_inside_a_spell_stay_unknown() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))
    samples: list[tuple[float, float | None]] = [
        (float(t), None if 100 <= t < 200 else 0.0) for t in range(0, 2000)
    ]
    booked = Replay(tracker).feed(samples)
    assert tracker.state == "idle"
    assert booked["unknown"] == 100.0
    assert booked["idle"] == 1999.0 - 100.0
    assert booked["unsettled"] == 0.0


def test_underutilized_has_hysteresis_around_the_target() -> None:
    settings = StateSettings(
        window_seconds=WINDOW, underutilized_below_ratio=0.25, underutilized_hysteresis_ratio=0.05
    )
    tracker = GpuStateTracker(settings)
    feed(tracker, 0, 1801, 0.2)
    assert tracker.state == "underutilized"
    # the mean wobbles between 0.22 and 0.28, across the target but inside the band
    states: list[str] = []
    for cycle in range(20):
        base = 1801 + cycle * 600
        states += feed(tracker, base, base + 300, 0.22)
        states += feed(tracker, base + 300, base + 600, 0.28)
    assert set(states) == {"underutilized"}, "no flapping inside the band"
    assert feed(tracker, 13801, 16000, 0.4)[-1] == "busy", "leaves once above target + band"
    states = feed(tracker, 16000, 30000, 0.27)
    assert states[-1] == "busy", "a busy GPU at 0.27 is not underutilized (below 0.25 only)"


def test_a_gap_longer_than_the_limit_adds_no_seconds() -> None:
    tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW, max_sample_gap_seconds=60.0))
    tracker.observe(0.0, 0.5, None, False)
    tracker.observe(30.0, 0.5, None, False)
    assert tracker.tick_seconds == 30.0
    tracker.observe(500.0, 0.5, None, False)
    assert tracker.tick_seconds == 0.0
