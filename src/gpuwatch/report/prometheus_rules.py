"""The fleet report's recording rules: finding them, and the queries that use them.

`deploy/prometheus/gpuwatch-report.rules.yml` records, every `window` (1 h), per series:
sample counts and sums of `gpuwatch_gpu_up` and the states, the memory peak, the last
identity / price / recommendation values, and per counter whether it may have reset,
each over a window that ends `offset` (5 min) before the evaluation time T, so the
sample recorded at T covers (T - window - offset, T - offset]. The group's last rule is
the heartbeat `gpuwatch:report_window:heartbeat{window, offset, overlap, version}`: its
samples say which evaluations completed, and its labels how to read them.

For one day (S, E] the report uses the evaluations T in [S + window + offset, E + offset]
when their heartbeats form one chain spaced exactly `window` apart (`plan_day`), and raw
queries for the two slivers the chain leaves: (S, lo] before it and (hi, E] after it
(lo = first T - window - offset, hi = last T - offset). `day_expr` and `resets_expr`
build one instant query per figure that returns the three parts, each tagged with a
`gpuwatch_part` label (a, b, c); `merge_parts` folds them back into one value per series.
Counts and sums of 0/1 samples are whole numbers, so the folded figures are the same,
bit for bit, as one raw query over the day.

The heartbeat's `version` names the rule set: version 2 added the pod counters' `resets`
rules. A heartbeat of another version is never used (its group lacks rules the report
reads, and a missing `resets` sample reads as "no reset"), so the days it alone covers
are read raw, with a note naming the version found.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from gpuwatch.core.text import counted

HEARTBEAT = "gpuwatch:report_window:heartbeat"
RULES_VERSION = "2"
"""The heartbeat `version` this report reads (1: before the pod counters' rules)."""
PART_LABEL = "gpuwatch_part"
OVERLAP_MS = 300_000  # the slivers' reset overlap: Prometheus's default lookback (5 min)

Combine = Literal["sum", "max", "last"]
LabelKey = tuple[tuple[str, str], ...]

_RECORDED_OVER = {"sum": "sum_over_time", "max": "max_over_time", "last": "last_over_time"}
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
             "w": 604_800_000, "y": 31_536_000_000}  # fmt: skip
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")

log = logging.getLogger(__name__)


def parse_duration_ms(text: str) -> int | None:
    """A Prometheus duration ("1h5m", "59m59s999ms") in milliseconds; None if malformed."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(int(n) * _UNITS_MS[u] for n, u in parts)


@dataclass(frozen=True, slots=True)
class Window:
    """How a heartbeat's group records: window, offset and overlap, in milliseconds."""

    window_ms: int
    offset_ms: int
    overlap_ms: int

    @staticmethod
    def of(labels: LabelKey) -> Window | None:
        """The window a heartbeat's labels describe; None if they do not (other version)."""
        if version_of(labels) != RULES_VERSION:
            return None
        return Window.described(labels)

    @staticmethod
    def described(labels: LabelKey) -> Window | None:
        """The window the labels describe, whatever their version; None if malformed."""
        found = dict(labels)
        window, offset, overlap = (
            parse_duration_ms(found.get(name, "")) for name in ("window", "offset", "overlap")
        )
        if window is None or offset is None or overlap is None or window <= 0:
            return None
        return Window(window, offset, overlap)


@dataclass(frozen=True, slots=True)
class DayPlan:
    """The recorded evaluations a day uses: T from `first_ms` to `last_ms`, `window` apart."""

    window: Window
    first_ms: int
    last_ms: int

    @property
    def lo_ms(self) -> int:
        """Start of the recorded coverage (exclusive): the first window's left edge."""
        return self.first_ms - self.window.window_ms - self.window.offset_ms

    @property
    def hi_ms(self) -> int:
        """End of the recorded coverage (inclusive): the last window's right edge."""
        return self.last_ms - self.window.offset_ms

    @property
    def evaluations(self) -> int:
        """Number of recorded evaluations used."""
        return (self.last_ms - self.first_ms) // self.window.window_ms + 1


def version_of(labels: LabelKey) -> str:
    """A heartbeat's `version` label ("" without one)."""
    return dict(labels).get("version", "")


Heartbeats = Mapping[LabelKey, list[int]]
"""Heartbeat series (labels without __name__) -> sorted evaluation times in ms."""


def heartbeats(matrix: Mapping[LabelKey, list[tuple[float, float]]]) -> dict[LabelKey, list[int]]:
    """Heartbeat evaluation times (ms) per series from a raw range query's result."""
    return {key: sorted(round(t * 1000) for t, _ in samples) for key, samples in matrix.items()}


def plan_day(beats: Heartbeats, start_ms: int, end_ms: int) -> tuple[DayPlan | None, str]:
    """The recorded evaluations day (start, end] can use, or None and why not."""
    found: list[tuple[LabelKey, Window, list[int]]] = []
    for key, times in beats.items():
        window = Window.of(key)
        if window is None:
            continue
        lo = start_ms + window.window_ms + window.offset_ms
        hi = end_ms + window.offset_ms
        inside = [t for t in times if lo <= t <= hi]
        if inside:
            found.append((key, window, inside))
    if not found:
        older = sorted(_other_versions(beats, start_ms, end_ms))
        if older:
            return None, (
                f"recording-rule heartbeat of version {', '.join(older)}, not {RULES_VERSION} "
                "(load the current gpuwatch-report.rules.yml)"
            )
        return None, "no recording-rule heartbeat"
    if len(found) > 1:
        return None, "several recording-rule heartbeat series"
    _, window, times = found[0]
    if any(b - a != window.window_ms for a, b in itertools.pairwise(times)):
        return None, "recording-rule heartbeat chain broken"
    first, last = times[0], times[-1]
    # a raw sliver of 1 ms cannot be written as a [L - 1ms] range: give it a whole window
    if first - window.window_ms - window.offset_ms - start_ms == 1:
        first += window.window_ms
    if end_ms - (last - window.offset_ms) == 1:
        last -= window.window_ms
    if first > last:
        return None, "recording-rule heartbeat chain too short"
    return DayPlan(window, first, last), ""


def _other_versions(beats: Heartbeats, start_ms: int, end_ms: int) -> set[str]:
    """Versions other than RULES_VERSION whose heartbeats fall in the day's evaluations."""
    out: set[str] = set()
    for key, times in beats.items():
        window = Window.described(key)
        if window is None or version_of(key) == RULES_VERSION:
            continue
        lo = start_ms + window.window_ms + window.offset_ms
        if any(lo <= t <= end_ms + window.offset_ms for t in times):
            out.add(version_of(key) or "(none)")
    return out


def current(beats: Heartbeats) -> bool:
    """Whether any heartbeat series is of the version this report reads."""
    return any(version_of(key) == RULES_VERSION for key in beats)


def _at(ms: int) -> str:
    return f"{ms / 1000:.3f}"


def _tag(expr: str, part: str) -> str:
    return f'label_replace({expr}, "{PART_LABEL}", "{part}", "", "")'


def recorded_name(metric: str, operation: str) -> str:
    """The recording rule's series: `report:<metric>:<operation>`."""
    return f"report:{metric}:{operation}"


class Figure(NamedTuple):
    """A per-day figure: `function(metric{matchers}[day])`, recorded as
    `report:<metric>:<operation>`, its recorded parts folded by `combine`."""

    function: str
    metric: str
    matchers: str
    operation: str
    combine: Combine


def _recorded(name: str, over: str, plan: DayPlan) -> str:
    span = plan.last_ms - plan.first_ms + plan.window.window_ms // 2  # first..last T only
    return _tag(f"{over}({name}[{span}ms] @ {_at(plan.last_ms)})", "b")


def day_expr(figure: Figure, start_ms: int, end_ms: int, plan: DayPlan) -> str:
    """`figure` over (start, end] from the plan's recorded samples and raw queries for the
    slivers, as one query of tagged parts."""
    series = f"{figure.metric}{figure.matchers}"
    parts: list[str] = []
    if plan.lo_ms > start_ms:
        window = f"{series}[{plan.lo_ms - start_ms - 1}ms] @ {_at(plan.lo_ms)}"
        parts.append(_tag(f"{figure.function}({window})", "a"))
    recorded = recorded_name(figure.metric, figure.operation)
    parts.append(_recorded(recorded, _RECORDED_OVER[figure.combine], plan))
    if end_ms > plan.hi_ms:
        window = f"{series}[{end_ms - plan.hi_ms - 1}ms] @ {_at(end_ms)}"
        parts.append(_tag(f"{figure.function}({window})", "c"))
    return " or ".join(parts)


def flagged_resets(metric: str, length_ms: int, at_ms: int, overlap_ms: int) -> str:
    """resets() over [at - length - overlap, at]; 1 + that where no sample lies in the
    overlap (a longer gap before the window could hide a reset), as the rules record it."""
    resets = f"resets({metric}[{length_ms + overlap_ms}ms] @ {_at(at_ms)})"
    present = f"count_over_time({metric}[{overlap_ms}ms] @ {_at(at_ms - length_ms)})"
    return f"{resets} and {present} or {resets} + 1"


def resets_expr(metric: str, start_ms: int, end_ms: int, plan: DayPlan) -> str:
    """Whether counter `metric` may have reset in [start - 5 min, end] (a value > 0), from the
    plan's recorded samples and raw queries for the slivers, as one query of tagged parts."""
    head = f"resets({metric}[{plan.lo_ms - start_ms + OVERLAP_MS}ms] @ {_at(plan.lo_ms)})"
    parts = [_tag(head, "a"), _recorded(recorded_name(metric, "resets"), "max_over_time", plan)]
    if end_ms > plan.hi_ms:
        parts.append(_tag(flagged_resets(metric, end_ms - plan.hi_ms, end_ms, OVERLAP_MS), "c"))
    return " or ".join(parts)


def merge_parts(result: Mapping[LabelKey, float], combine: Combine) -> dict[LabelKey, float]:
    """Fold the tagged parts of `day_expr`/`resets_expr` into one value per series (a result
    without parts is returned as it is). `last` takes the latest part: c, else b, else a."""
    merged: dict[LabelKey, float] = {}
    ranks: dict[LabelKey, str] = {}
    for labels, value in result.items():
        part = dict(labels).get(PART_LABEL, "")
        key = tuple(item for item in labels if item[0] != PART_LABEL)
        if key not in merged:
            merged[key], ranks[key] = value, part
        elif combine == "sum":
            merged[key] += value
        elif combine == "max":
            merged[key] = max(merged[key], value)
        elif part > ranks[key]:
            merged[key], ranks[key] = value, part
    return merged


def describe(plans: Iterable[tuple[str, DayPlan | None, str]]) -> list[str]:
    """Notes for the report's method appendix: which days used the rules, which did not."""
    plans = list(plans)
    used = [plan for _, plan, _ in plans if plan is not None]
    notes: list[str] = []
    if used:
        w = used[0].window
        notes.append(
            f"recording rules (gpuwatch-report: {w.window_ms / 1000:g} s windows, "
            f"{w.offset_ms / 1000:g} s offset) used for {len(used)} of "
            f"{counted(len(plans), 'day')}; "
            "raw queries for the slivers around them"
        )
        for day, plan, why in plans:
            if plan is None:
                notes.append(f"raw queries for {day}: {why}")
    for day, plan, why in plans:
        log.debug("report day %s: %s", day, "recording rules" if plan else f"raw ({why})")
    return notes
