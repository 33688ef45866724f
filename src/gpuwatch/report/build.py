"""Every figure of the report, computed once from `ReportData` rows (any source).

`build_report(data, previous)` sums the GpuDay and TokenDay rows into a `Report`: the
KPIs, cost per day by class, per-host and per-GPU lines, the ten most wasteful GPUs,
month-over-month changes and the method appendix. Each figure is a plain sum or one
division of sums, so it can be re-derived by hand from the rows (docs/reports.md says
how). A figure without data is None ("absent"), never 0 or 1 by default.

Formats render a `Report`; none of them computes a figure. No I/O here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from datetime import date

from gpuwatch.core.text import counted, with_article
from gpuwatch.core.units import DAY_SECONDS, HOUR_SECONDS
from gpuwatch.report.model import (
    GPU_STATES,
    TIME_CLASSES,
    TOKEN_KINDS,
    GpuDay,
    Period,
    ReportData,
)
from gpuwatch.report.result import (
    Change,
    DayLine,
    GpuLine,
    HostLine,
    NamespaceLine,
    Report,
    Savings,
    SlurmLine,
    TokenLine,
    Totals,
    WasteItem,
    _ratio,
)

TOP_WASTE = 10
"""GPUs in the "most wasteful" table."""


def _totals(rows: Iterable[GpuDay]) -> Totals:
    count = 0
    observed = cost = idle = held = 0.0
    seconds = dict.fromkeys(TIME_CLASSES, 0.0)
    energy: float | None = None
    states = dict.fromkeys(GPU_STATES, 0.0)
    activity = sampled = 0.0
    for row in rows:
        count += 1
        for name in GPU_STATES:
            states[name] += row.state_seconds.get(name, 0.0)
        activity += row.activity_seconds
        sampled += row.activity_sampled_seconds
        observed += row.observed_seconds
        cost += row.cost_usd
        idle += row.idle_cost_usd
        held += row.held_cost_usd
        for name in TIME_CLASSES:
            seconds[name] += row.class_seconds.get(name, 0.0)
        if row.energy_joules is not None:
            energy = (energy or 0.0) + row.energy_joules
    return Totals(count, observed, seconds, cost, idle, held, energy, states, activity, sampled)


def _gpu_lines(rows: tuple[GpuDay, ...]) -> tuple[GpuLine, ...]:
    by_gpu: dict[tuple[str, str], list[GpuDay]] = defaultdict(list)
    for row in rows:
        by_gpu[(row.host, row.uuid)].append(row)
    lines = []
    for (host, uuid), days in by_gpu.items():
        days.sort(key=lambda r: r.day)
        latest = days[-1]
        sources = sorted({r.price_source for r in days if r.price_source})
        savings = latest.savings_usd_per_hour if latest.recommended_gpu is not None else None
        lines.append(
            GpuLine(
                host=host,
                uuid=uuid,
                name=latest.name,
                gpu_index=latest.gpu_index,
                totals=_totals(days),
                price_sources=tuple(sources),
                recommended_gpu=latest.recommended_gpu,
                savings_usd_per_hour=savings,
                recommended_rule=latest.recommended_rule,
                need_basis=latest.need_basis,
            )
        )
    lines.sort(key=lambda g: (g.host, g.gpu_index if g.gpu_index is not None else -1, g.uuid))
    return tuple(lines)


def _sum_optional(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _host_lines(
    rows: tuple[GpuDay, ...], gpus: tuple[GpuLine, ...], actions: Iterable[WasteItem]
) -> tuple[HostLine, ...]:
    by_host: dict[str, list[GpuDay]] = defaultdict(list)
    for row in rows:
        by_host[row.host].append(row)
    saves: dict[str, float] = defaultdict(float)
    for item in actions:
        saves[item.gpu.host] += item.action_usd_per_month
    lines = []
    for host in sorted(by_host):
        own = [g for g in gpus if g.host == host]
        lines.append(HostLine(host, len(own), _totals(by_host[host]), saves.get(host)))
    return tuple(lines)


def _day_lines(rows: tuple[GpuDay, ...]) -> tuple[DayLine, ...]:
    by_day: dict[date, list[GpuDay]] = defaultdict(list)
    for row in rows:
        by_day[row.day].append(row)
    lines = []
    for day in sorted(by_day):
        totals = _totals(by_day[day])
        idle_only = totals.idle_cost_usd - totals.held_cost_usd
        by_class = {
            "idle": idle_only,
            "held": totals.held_cost_usd,
            "other": totals.cost_usd - totals.idle_cost_usd,
        }
        lines.append(DayLine(day, by_class, totals))
    return tuple(lines)


def _waste_item(gpu: GpuLine) -> WasteItem | None:
    """What to do about `gpu`: rightsize when that saves more per month than releasing
    its idle/held time would; None with nothing to gain. Releasing saves the GPU's idle
    and held cost per *settled* hour of its own x 730 h (`Totals.usd_per_month`), so the
    figure does not depend on the period's length or on when the GPU was first seen."""
    totals = gpu.totals
    waste = totals.waste_usd
    held = totals.held_cost_usd
    idle_rate = totals.usd_per_month(waste - held)
    held_rate = totals.usd_per_month(held)
    release = None if idle_rate is None or held_rate is None else idle_rate + held_rate
    rightsize = gpu.savings_usd_per_month
    if waste <= 0 and not rightsize:
        return None
    if (
        rightsize is not None
        and gpu.recommended_gpu is not None
        and (release is None or rightsize >= release)
    ):
        text = f"move the workload to {with_article(gpu.recommended_gpu)}"
        why = [gpu.need_phrase] if gpu.need_phrase else []
        why += [f"candidates: {gpu.candidates_phrase}"] if gpu.candidates_phrase else []
        if why:
            text += f" ({'; '.join(why)})"
        return WasteItem(
            gpu, waste, "rightsize", text, rightsize, rightsizing_usd_per_month=rightsize
        )
    if release is None or idle_rate is None or held_rate is None:
        return None
    if held >= waste - held:
        action = "release held"
        text = "stop the processes that hold memory on it and compute nothing, or release it"
    else:
        action = "release idle"
        text = "release or scale down the GPU while it has no work"
    return WasteItem(gpu, waste, action, text, release, idle_rate, held_rate)


def _actions(gpus: tuple[GpuLine, ...]) -> tuple[WasteItem, ...]:
    """Every GPU's action, most wasteful first."""
    items = [item for g in gpus if (item := _waste_item(g)) is not None]
    items.sort(key=lambda i: (-i.waste_usd, -(i.gpu.savings_usd_per_month or 0.0), i.gpu.uuid))
    return tuple(items)


def _savings(gpus: tuple[GpuLine, ...], actions: tuple[WasteItem, ...]) -> Savings | None:
    """The sum of every GPU's action by kind; None without a GPU that has settled time
    or a recommendation (nothing to take a rate from)."""
    if not any(g.totals.settled_seconds > 0 or g.savings_usd_per_month is not None for g in gpus):
        return None
    return Savings(
        sum(i.idle_usd_per_month for i in actions),
        sum(i.held_usd_per_month for i in actions),
        sum(i.rightsizing_usd_per_month for i in actions),
    )


def _token_lines(data: ReportData) -> tuple[TokenLine, tuple[TokenLine, ...]]:
    by_source: dict[tuple[str, str], list[float]] = {}
    for row in data.token_days:
        sums = by_source.setdefault((row.host, row.source), [0.0] * (len(TOKEN_KINDS) + 1))
        for i, kind in enumerate(TOKEN_KINDS):
            sums[i] += row.tokens.get(kind, 0.0)
        sums[-1] += row.cost_usd

    def line(source: str, host: str, sums: list[float]) -> TokenLine:
        tokens = dict(zip(TOKEN_KINDS, sums[:-1], strict=True))
        tokens["all"] = sum(sums[:-1])
        return TokenLine(source, host, tokens, sums[-1])

    per_source = tuple(line(s, h, v) for (h, s), v in sorted(by_source.items()))
    total = [sum(column) for column in zip(*by_source.values(), strict=True)] or [0.0] * (
        len(TOKEN_KINDS) + 1
    )
    return line("", "", total), per_source


def _slurm_lines(
    data: ReportData, total_cost_usd: float, *, by_user: bool
) -> tuple[SlurmLine, ...]:
    """Jobs' days summed per Slurm account (or user); the share is of all GPU cost in the
    period (the rest is the GPUs' cost charged to no job)."""
    if not data.job_days:
        return _slurm_group_lines(data, total_cost_usd, by_user=by_user)
    sums: dict[str, list[float]] = {}
    jobs: dict[str, set[tuple[str, str]]] = defaultdict(set)
    reclaimed_known: set[str] = set()  # only where the source knows it
    for row in data.job_days:
        name = row.user if by_user else row.account
        line = sums.setdefault(name, [0.0] * 5)
        line[0] += row.held_seconds / HOUR_SECONDS
        line[1] += row.cost_usd
        line[2] += row.idle_cost_usd
        line[3] += row.held_cost_usd
        jobs[name].add((row.host, row.job_id))
        if row.reclaimed_usd is not None:
            line[4] += row.reclaimed_usd
            reclaimed_known.add(name)
    return _sorted_slurm_lines(
        sums, jobs, total_cost_usd, held_unknown=set(), reclaimed_known=reclaimed_known
    )


def _slurm_group_lines(
    data: ReportData, total_cost_usd: float, *, by_user: bool
) -> tuple[SlurmLine, ...]:
    """Prometheus's account (or user) days summed; held $ is unknown (None) for a name
    with any day whose held counter is unknown (an older agent)."""
    kind = "user" if by_user else "account"
    sums: dict[str, list[float]] = {}
    jobs: dict[str, set[tuple[str, str]]] = defaultdict(set)
    held_unknown: set[str] = set()
    for row in data.slurm_days:
        if row.kind != kind:
            continue
        line = sums.setdefault(row.name, [0.0] * 5)
        line[0] += row.gpu_seconds / HOUR_SECONDS
        line[1] += row.cost_usd
        line[2] += row.idle_cost_usd
        if row.held_cost_usd is None:
            held_unknown.add(row.name)
        else:
            line[3] += row.held_cost_usd
        line[4] += row.reclaimed_usd
        jobs[row.name].update((row.host, job_id) for job_id in row.job_ids)
    return _sorted_slurm_lines(
        sums, jobs, total_cost_usd, held_unknown=held_unknown, reclaimed_known=set(sums)
    )


def _sorted_slurm_lines(
    sums: dict[str, list[float]],
    jobs: dict[str, set[tuple[str, str]]],
    total_cost_usd: float,
    *,
    held_unknown: set[str],
    reclaimed_known: set[str],
) -> tuple[SlurmLine, ...]:
    """One line per name from its sums [GPU-hours, cost, idle, held, reclaimed] (USD) and
    its (host, job) pairs; held $ None for `held_unknown`, $ reclaimed None outside
    `reclaimed_known`; by cost, descending, then name."""
    lines = [
        SlurmLine(
            name,
            len(jobs[name]),
            hours,
            cost,
            idle,
            None if name in held_unknown else held,
            _ratio(cost, total_cost_usd),
            reclaimed if name in reclaimed_known else None,
        )
        for name, (hours, cost, idle, held, reclaimed) in sums.items()
    ]
    return tuple(sorted(lines, key=lambda n: (-n.cost_usd, n.name)))


def _namespace_lines(data: ReportData, total_cost_usd: float) -> tuple[NamespaceLine, ...]:
    """Pods' days summed per namespace; the share is of all GPU cost in the period (the
    rest is the GPUs' cost charged to no pod)."""
    sums: dict[str, list[float]] = {}
    pods: dict[str, set[str]] = defaultdict(set)
    for row in data.pod_days:
        line = sums.setdefault(row.namespace, [0.0, 0.0])
        line[0] += row.cost_usd
        line[1] += row.idle_cost_usd
        pods[row.namespace].add(row.pod)
    lines = [
        NamespaceLine(name, len(pods[name]), cost, idle, _ratio(cost, total_cost_usd))
        for name, (cost, idle) in sums.items()
    ]
    return tuple(sorted(lines, key=lambda n: (-n.cost_usd, n.namespace)))


def _notes(data: ReportData, totals: Totals, coverage: float | None) -> tuple[str, ...]:
    notes = list(data.notes)
    if data.expected_gpu_seconds is None:
        notes.append("coverage unknown: the source cannot tell how many GPU-hours to expect")
    elif totals.observed_seconds > data.expected_gpu_seconds:
        extra = (totals.observed_seconds - data.expected_gpu_seconds) / HOUR_SECONDS
        notes.append(
            f"{extra:,.2f} GPU-hours were observed beyond the expected span: coverage "
            "is shown as 100 %"
        )
    elif coverage is not None and coverage < 1.0:
        missing_hours = (data.expected_gpu_seconds - totals.observed_seconds) / HOUR_SECONDS
        notes.append(
            f"{missing_hours:,.1f} GPU-hours of the period were not observed (agent down, "
            "host off, or gaps): they are in no figure"
        )
    if not data.gpu_days:
        notes.append("no GPU data for the period")
    if not data.token_days:
        notes.append("no token counts for the period: no $/1M tokens")
    unpriced = sum(1 for r in data.gpu_days if r.price_source is None and r.cost_usd == 0)
    if unpriced:
        notes.append(
            f"{counted(unpriced, 'GPU-day')} without a price: "
            f"{'it costs' if unpriced == 1 else 'they cost'} $0 in this report"
        )
    if data.period.month_to_date:
        notes.append("month to date: the period ends at the last sample")
    return tuple(notes)


def _changes(current: Report, previous: Report) -> tuple[Change, ...]:
    pairs = (
        ("total cost", "usd", current.totals.cost_usd, previous.totals.cost_usd),
        ("idle and held cost", "usd", current.totals.idle_cost_usd, previous.totals.idle_cost_usd),
        ("held cost", "usd", current.totals.held_cost_usd, previous.totals.held_cost_usd),
        ("busy ratio", "ratio", current.totals.busy_ratio, previous.totals.busy_ratio),
        (
            "savings available per month",
            "usd",
            current.savings_usd_per_month,
            previous.savings_usd_per_month,
        ),
        (
            "$/1M generated tokens",
            "usd_per_million",
            current.usd_per_million_tokens("generation"),
            previous.usd_per_million_tokens("generation"),
        ),
    )
    return tuple(Change(name, unit, now, before) for name, unit, now, before in pairs)


def build_report(data: ReportData, previous: ReportData | None = None) -> Report:
    """The report of `data`; `previous` (the period before) adds month-over-month changes."""
    rows = data.gpu_days
    totals = _totals(rows)
    expected = data.expected_gpu_seconds
    coverage = _ratio(totals.observed_seconds, expected) if expected is not None else None
    if coverage is not None and coverage > 1.0:
        # a source that counts a sampled second outside the span it expects; the local
        # history and the Prometheus source each bound the two to the same span, so this
        # guard only keeps a ratio from reading above 100 % (a note says by how much)
        coverage = 1.0
    gpus = _gpu_lines(rows)
    actions = _actions(gpus)
    savings = _savings(gpus, actions)
    tokens, token_sources = _token_lines(data)
    price_sources: dict[str, int] = defaultdict(int)
    for row in rows:
        price_sources[row.price_source or "none"] += 1
    report = Report(
        period=data.period,
        source=data.source,
        coverage_ratio=coverage,
        observed_gpu_seconds=totals.observed_seconds,
        expected_gpu_seconds=expected,
        totals=totals,
        savings_usd_per_month=None if savings is None else savings.total_usd_per_month,
        savings=savings,
        tokens=tokens,
        token_sources=token_sources,
        rent_vs_buy_monthly_delta_usd=data.rent_vs_buy_monthly_delta_usd,
        rent_vs_buy_activity_monthly_delta_usd=data.rent_vs_buy_activity_monthly_delta_usd,
        rent_vs_buy_gpus=tuple(
            sorted(
                data.rent_vs_buy_gpus,
                key=lambda g: (g.host, -1 if g.gpu_index is None else g.gpu_index, g.uuid),
            )
        ),
        days=_day_lines(rows),
        hosts=_host_lines(rows, gpus, actions),
        gpus=gpus,
        top_waste=actions[:TOP_WASTE],
        namespaces=_namespace_lines(data, totals.cost_usd),
        slurm_accounts=_slurm_lines(data, totals.cost_usd, by_user=False),
        slurm_users=_slurm_lines(data, totals.cost_usd, by_user=True),
        changes=(),
        previous_label=None,
        price_sources=dict(sorted(price_sources.items())),
        notes=_notes(data, totals, coverage),
    )
    if previous is None:
        return report
    before = build_report(previous)
    return replace(
        report,
        changes=_changes(report, before),
        previous_label=previous.period.label,
        notes=(*report.notes, _comparison_note(data.period, previous.period)),
    )


def _comparison_note(period: Period, previous: Period) -> str:
    """What the month-over-month changes compare, in words."""
    days = period.seconds / DAY_SECONDS
    before = previous.seconds / DAY_SECONDS
    if period.month_to_date:
        return (
            f"month over month: this month to date ({days:,.2f} days) against the same span "
            f"from the start of the month before ({previous.label}, {before:,.2f} days)"
        )
    return (
        f"month over month: {period.label} ({days:,.2f} days) against {previous.label} "
        f"({before:,.2f} days), whole month against whole month"
    )
