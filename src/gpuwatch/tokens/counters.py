"""Counter-reset handling: cumulative increases of counter series, the way PromQL does.

Pure state, no clock and no I/O. A server restart sets its counters back to 0; like
PromQL's `increase()`, a raw value below the previous one counts in full as the
increase since the reset. Each series (label set) is tracked on its own, so one
series' reset does not distort another's.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwatch.tokens.parse import LabelSet


class ResetCorrectedCounter:
    """The total increase of a group of counter series since the first observation.

    The first `observe()` sets the baseline (total stays 0). After it, a series seen
    before adds `value - previous`, or `value` when it dropped (a reset); a series not
    seen before adds its whole value (it was created since the last observation). A
    series that disappears keeps its last value, so a restart that is missed in between
    still counts as a reset when the series comes back lower.
    """

    def __init__(self) -> None:
        self.total = 0.0
        """Cumulative increase (the counter's unit, here tokens), never decreasing."""
        self.resets = 0
        """How many times a series dropped (server restarts seen)."""
        self._last: dict[LabelSet, float] = {}
        self._primed = False

    @property
    def primed(self) -> bool:
        """True once a baseline has been observed."""
        return self._primed

    def observe(self, series: Mapping[LabelSet, float]) -> float:
        """Take one scrape's raw values (all >= 0) by series; returns the increase added."""
        return sum(self.observe_series(series).values())

    def observe_series(self, series: Mapping[LabelSet, float]) -> dict[LabelSet, float]:
        """Like `observe`, but returns the increase of each series (0 at the baseline)."""
        steps: dict[LabelSet, float] = {}
        increase = 0.0
        for labels, value in series.items():
            step, reset = self._step(labels, value)
            self.resets += int(reset)
            steps[labels] = step
            increase += step
            self._last[labels] = value
        self._primed = True
        self.total += increase
        return steps

    def pending(self, series: Mapping[LabelSet, float]) -> float:
        """The increase `observe(series)` would add, without taking it."""
        return sum(self._step(labels, value)[0] for labels, value in series.items())

    def forget(self) -> None:
        """Drop the baseline, keeping the total (after a refused span): the next
        observation is a new baseline and adds nothing; increases count from there."""
        self._last.clear()
        self._primed = False

    def _step(self, labels: LabelSet, value: float) -> tuple[float, bool]:
        """(increase of one series, whether it dropped: a reset)."""
        previous = self._last.get(labels)
        if previous is None:
            return (value if self._primed else 0.0), False
        if value < previous:
            return value, True
        return value - previous, False


class GroupedCounter:
    """Reset-corrected increases of counter series, totalled by the value of one label.

    For a counter such as vLLM's `vllm:prompt_tokens_by_source_total{source=...}`: each
    series is corrected on its own (see `ResetCorrectedCounter`), and its increases add
    to the total of its `label` value (series without the label count under ""). At most
    `max_groups` distinct values are kept; further ones are ignored, so a misbehaving
    server cannot grow the exported series without bound.
    """

    def __init__(self, label: str, max_groups: int = 16) -> None:
        self.label = label
        self.max_groups = max_groups
        self.totals: dict[str, float] = {}
        """Cumulative increase by label value (tokens), never decreasing."""
        self._counter = ResetCorrectedCounter()

    def pending(self, series: Mapping[LabelSet, float]) -> float:
        """The increase `observe(series)` would add over all groups, without taking it."""
        return self._counter.pending(series)

    def forget(self) -> None:
        """Drop the baseline, keeping the totals (`ResetCorrectedCounter.forget`)."""
        self._counter.forget()

    def observe(self, series: Mapping[LabelSet, float]) -> None:
        """Take one scrape's raw values by series."""
        for labels, step in self._counter.observe_series(series).items():
            group = dict(labels).get(self.label, "")
            if group not in self.totals and len(self.totals) >= self.max_groups:
                continue
            self.totals[group] = self.totals.get(group, 0.0) + step
