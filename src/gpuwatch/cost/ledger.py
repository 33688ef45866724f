"""Per-GPU cost accrual and classed time, settled in time order.

Each sample adds price x sampled seconds to the GPU's cost at once. Which *class* those
seconds (and that cost) belong to — busy, idle, held or unknown — is often known only
later (see `gpuwatch.analysis.states`: the pending period and an open inactive spell are
unsettled until the window gives evidence). The ledger therefore keeps every unsettled
tick (time, seconds, cost) in a queue and books it when the analysis settles it, oldest
first. Booked ticks feed checkpoint histories of the cumulative classed totals *at the
tick's own time*, so a window such as "the last hour" holds exactly the seconds that
were busy or idle inside that hour, however late their class became known.

Each window keeps its own checkpoints — every 60 s for 1 h, 10 min for 24 h, 1 h for
30 d (about 1,000 per GPU in all) — so the window's start moves in those steps and
`TimeWindow` says which span it covers.

Each account also books the same seconds and cost to the UTC hour of the tick
(`GpuCost.hours`): the history store rolls them up per GPU-hour, and at start
`CostLedger.restore_windows` seeds the window histories from those rows, so the 24 h and
30 d windows continue across a restart while the `*_total` counters start from 0.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gpuwatch.analysis.states import TIME_CLASSES
from gpuwatch.core.costs import GpuCost, GpuPrice, HourTotals, TimeWindow
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.core.verdict import GpuVerdict
from gpuwatch.cost.history import CheckpointHistory

WINDOWS: tuple[tuple[str, float], ...] = (("1h", 3600.0), ("24h", 86400.0), ("30d", 30 * 86400.0))
"""The windows of every windowed figure: (name, seconds)."""

RESOLUTION_SECONDS = {"1h": 60.0, "24h": 600.0, "30d": 3600.0}
"""How far apart each window's checkpoints are: the step its start moves in."""

# cumulative columns kept per checkpoint: seconds and cost of every class
_COLUMNS = len(TIME_CLASSES) * 2
_CLASS_INDEX = {name: i for i, name in enumerate(TIME_CLASSES)}

HOURS_KEPT_OPEN = 2
"""Hours before the current one that `GpuCost.hours` always shows, so a reader that
skips snapshots still sees each hour's final figures for at least this many hours."""

# per-hour columns: observed s, cost, seconds by class, cost by class, newest tick time,
# start of the earliest tick span charged
_HOUR_OBSERVED, _HOUR_COST, _HOUR_CLASSES = 0, 1, 2
_HOUR_LAST = _HOUR_CLASSES + _COLUMNS
_HOUR_FIRST = _HOUR_LAST + 1


@dataclass(slots=True)
class _Tick:
    t: float
    seconds: float
    cost: float
    time_class: str | None  # None: unsettled


class _Account:
    __slots__ = (
        "cost",
        "histories",
        "hours",
        "last",
        "last_t",
        "observed",
        "queue",
        "settled",
        "unsettled_seconds",
    )

    def __init__(self) -> None:
        self.cost = 0.0
        self.observed = 0.0
        self.settled = [0.0] * _COLUMNS  # seconds by class, then cost by class
        self.queue: deque[_Tick] = deque()
        self.unsettled_seconds = 0.0
        # unsettled time lags by up to two windows of the analysis: keep a margin of 2 h
        self.histories = {
            name: CheckpointHistory(
                _COLUMNS, resolution=RESOLUTION_SECONDS[name], retention=seconds + 7200.0
            )
            for name, seconds in WINDOWS
        }
        self.last: GpuCost | None = None
        self.last_t = 0.0
        self.hours: dict[int, list[float]] = {}  # hour start: the _HOUR_* columns

    def hour(self, t: float) -> list[float]:
        """The per-hour columns of the UTC hour holding epoch time `t`."""
        start = int(t // HOUR_SECONDS) * HOUR_SECONDS
        row = self.hours.get(start)
        if row is None:
            row = self.hours[start] = [0.0] * (_HOUR_FIRST + 1)
            row[_HOUR_FIRST] = float("inf")
        row[_HOUR_LAST] = max(row[_HOUR_LAST], t)
        return row

    def charge(self, t: float, seconds: float, cost: float) -> None:
        """Add a tick's sampled seconds and cost (any class) to its hour; the hour's
        first span start is the earliest t - seconds (a run's first tick: t itself)."""
        row = self.hour(t)
        row[_HOUR_OBSERVED] += seconds
        row[_HOUR_COST] += cost
        row[_HOUR_FIRST] = min(row[_HOUR_FIRST], t - seconds)

    def open_hours(self, t: float) -> tuple[HourTotals, ...]:
        """The hours that may still change (from the oldest unsettled tick's hour, and at
        least the last HOURS_KEPT_OPEN), oldest first; older hours are dropped."""
        oldest = t if not self.queue else min(t, self.queue[0].t)
        floor = int(oldest // HOUR_SECONDS) * HOUR_SECONDS
        floor = min(floor, (int(t // HOUR_SECONDS) - HOURS_KEPT_OPEN) * HOUR_SECONDS)
        for start in [s for s in self.hours if s < floor]:
            del self.hours[start]
        n = len(TIME_CLASSES)
        out = []
        for start in sorted(self.hours):
            row = self.hours[start]
            classes = row[_HOUR_CLASSES : _HOUR_CLASSES + _COLUMNS]
            out.append(
                HourTotals(
                    hour_start_seconds=float(start),
                    observed_seconds=row[_HOUR_OBSERVED],
                    cost_usd=row[_HOUR_COST],
                    class_seconds=(classes[0], classes[1], classes[2], classes[3]),
                    class_cost_usd=(classes[n], classes[n + 1], classes[n + 2], classes[n + 3]),
                    last_tick_seconds=row[_HOUR_LAST],
                    first_span_seconds=(
                        row[_HOUR_FIRST] if row[_HOUR_FIRST] != float("inf") else None
                    ),
                )
            )
        return tuple(out)

    def append(self, tick: _Tick) -> None:
        if tick.time_class is not None and not self.queue:
            self.book(tick)
        else:
            self.queue.append(tick)
            if tick.time_class is None:
                self.unsettled_seconds += tick.seconds

    def settle(self, time_class: str, ticks: int) -> None:
        """Book the oldest `ticks` unsettled ticks as `time_class` (classed ones pass)."""
        while ticks > 0 and self.queue:
            tick = self.queue.popleft()
            if tick.time_class is None:
                tick.time_class = time_class
                self.unsettled_seconds -= tick.seconds
                ticks -= 1
            self.book(tick)
        self.flush()

    def flush(self) -> None:
        """Book the classed ticks at the head of the queue."""
        while self.queue and self.queue[0].time_class is not None:
            self.book(self.queue.popleft())
        if not self.queue:
            self.unsettled_seconds = 0.0  # exact zero: no float drift

    def book(self, tick: _Tick) -> None:
        assert tick.time_class is not None
        index = _CLASS_INDEX[tick.time_class]
        self.settled[index] += tick.seconds
        self.settled[len(TIME_CLASSES) + index] += tick.cost
        row = self.hour(tick.t)
        row[_HOUR_CLASSES + index] += tick.seconds
        row[_HOUR_CLASSES + len(TIME_CLASSES) + index] += tick.cost
        totals = tuple(self.settled)
        for history in self.histories.values():
            history.record(tick.t, totals)

    def windows(self, now: float) -> tuple[TimeWindow, ...]:
        out = []
        for name, seconds in WINDOWS:
            span = self.histories[name].span(seconds, now)
            if span is None:
                continue
            start, end, delta = span
            busy, idle, held, unknown, *cost = delta  # the order of TIME_CLASSES
            out.append(
                TimeWindow(
                    window=name,
                    start_seconds=start,
                    end_seconds=end,
                    busy_seconds=busy,
                    idle_seconds=idle,
                    held_seconds=held,
                    unknown_seconds=unknown,
                    cost_usd=sum(cost),
                    idle_cost_usd=cost[1] + cost[2],
                )
            )
        return tuple(out)


class CostLedger:
    """Accrues cost and classed time for every GPU the analysis reports."""

    def __init__(self) -> None:
        self._accounts: dict[str, _Account] = {}

    def observe(
        self, t: float, verdicts: tuple[GpuVerdict, ...], prices: dict[str, GpuPrice]
    ) -> tuple[GpuCost, ...]:
        """Charge each verdict's sampled seconds and apply its settlements; `prices` is
        keyed by uuid. Returns the GPUs of `verdicts`."""
        costs = []
        for verdict in verdicts:
            account = self._accounts.get(verdict.uuid)
            if account is None:
                account = self._accounts[verdict.uuid] = _Account()
            price = prices.get(verdict.uuid)
            dt = verdict.tick_seconds
            cost = tick_cost_usd(price, dt)
            account.cost += cost
            account.observed += dt
            account.charge(t, dt, cost)  # dt 0 (first tick, after a gap): marks where it starts
            account.append(_Tick(t, dt, cost, verdict.tick_class))
            for time_class, ticks in verdict.settlements:
                account.settle(time_class, ticks)
            account.last = _gpu_cost(verdict, price, account, t)
            account.last_t = t
            costs.append(account.last)
        return tuple(costs)

    def restore_windows(
        self, uuid: str, hours: Sequence[tuple[float, float, Sequence[float]]]
    ) -> None:
        """Seed one GPU's window histories from stored hours, before its first sample.

        `hours`: (start, end, columns) per stored hour, oldest first: when the hour's
        figures begin and end (epoch s), its settled seconds by class then cost by class
        (TIME_CLASSES order). The hours become checkpoints of the windows only: the
        GPU's `*_total` figures still start from 0. Ignored once the GPU has been sampled.
        """
        if uuid in self._accounts or not hours:
            return
        account = self._accounts[uuid] = _Account()
        running = [0.0] * _COLUMNS
        cumulative = [(hours[0][0], running)]
        for _, end, columns in hours:
            running = [r + c for r, c in zip(running, columns, strict=True)]
            cumulative.append((end, running))
        # offset so the newest stored total is the live zero the first sample adds to
        for end, values in cumulative:
            totals = tuple(v - r for v, r in zip(values, running, strict=True))
            for history in account.histories.values():
                history.record(end, totals)

    def totals(self, t: float) -> tuple[GpuCost, ...]:
        """Every GPU seen, including GPUs down this tick (windows as of `t`)."""
        out = []
        for account in self._accounts.values():
            if account.last is None:
                continue
            if account.last_t != t:
                account.last = replace(account.last, windows=account.windows(t))
                account.last_t = t
            out.append(account.last)
        return tuple(out)


def tick_cost_usd(price: GpuPrice | None, seconds: float) -> float:
    """What `seconds` of a GPU at `price` cost (USD; 0 without a price)."""
    return 0.0 if price is None else price.usd_per_hour / HOUR_SECONDS * seconds


def _gpu_cost(verdict: GpuVerdict, price: GpuPrice | None, account: _Account, t: float) -> GpuCost:
    settled = account.settled
    n = len(TIME_CLASSES)
    seconds = dict(zip(TIME_CLASSES, settled[:n], strict=True))
    cost = dict(zip(TIME_CLASSES, settled[n:], strict=True))
    return GpuCost(
        gpu_index=verdict.gpu_index,
        uuid=verdict.uuid,
        price=price,
        cost_usd_total=account.cost,
        idle_cost_usd_total=cost["idle"] + cost["held"],
        busy_seconds_total=seconds["busy"],
        observed_seconds_total=account.observed,
        held_cost_usd_total=cost["held"],
        idle_seconds_total=seconds["idle"],
        held_seconds_total=seconds["held"],
        unknown_seconds_total=seconds["unknown"],
        unsettled_seconds=max(account.unsettled_seconds, 0.0),
        windows=account.windows(t),
        hours=account.open_hours(t),
    )
