"""The fleet source of `gpuwatch report --prometheus URL`: any Prometheus-compatible API.

`load(options, period, progress)` reads what every host's agent exported (scraped by
Prometheus, VictoriaMetrics, Thanos Query, Mimir ...) through `/api/v1/query` and returns
`ReportData`: one `GpuDay` per GPU (host = the `node` label, which the Helm chart's
monitors add, else `host`, else `hostname`, else `instance`) per UTC day, one `TokenDay`
per host and token source per day, one `PodDay` per host and Kubernetes pod
(`namespace`, `pod` labels) per day, one `SlurmDay` per host and Slurm account or user
per day (`prometheus_slurm.py`).

Every query is an instant query pinned with the `@` modifier to a day boundary, so a
report of a past period is the same whenever it runs. Counters are read exactly, not
with `increase()` (which extrapolates to the window's edges, and differently on each
backend): a day's figure is the counter's last sample at or before the day's end minus
its last sample at or before the day's start, when `resets()` over the day (plus the 5
minutes of lookback) finds no reset; otherwise the series' raw samples of the day (and
up to 7 days before it, for the base) are fetched and summed reset-corrected as PromQL
does (a drop counts the new value). So days telescope: a month's total is the counter's
exact reset-corrected growth over the month, whatever the backend. A series with no
sample in the 7 days before a day starts from its first sample (as `increase()` does).

Time classes come from the agent's own counters and the state gauges, with `iv` the
scrape interval (measured per host from raw `gpuwatch_gpu_up` timestamps, or given):
observed = samples of `gpuwatch_gpu_up` x iv; unknown = samples with the GPU lost
(`gpuwatch_gpu_up` 0) x iv; idle + held = growth of `gpuwatch_gpu_idle_seconds_total`
(settled, retroactive like the idle cost), split by the day's held / idle cost (else by
the held and idle state samples); busy = observed - unknown - idle - held - pending
samples x iv. Limits: a settled idle spell that crosses midnight is counted on the day
it was confirmed (up to the analysis window late); a scrape gap without an agent restart
moves the idle seconds it hides into observed-less time, so busy is then understated.

The API is reached through `gpuwatch.promapi` (`PrometheusOptions`, the `--prometheus*`
flags, the whole run's deadline); `--prometheus-rules auto|on|off` picks the report's
recording rules (prometheus_rules.py): used for the days their heartbeat chain covers, with
the same figures bit for bit (default off: measured slower than raw, docs/benchmarks.md).

The memory peak of a GPU-day is `max_over_time(gpuwatch_gpu_memory_used_bytes)` over it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from gpuwatch.core.text import counted
from gpuwatch.core.units import DAY_SECONDS
from gpuwatch.promapi.client import Client, PrometheusError, PrometheusOptions
from gpuwatch.promapi.labels import LabelKey, host_of, pod_of
from gpuwatch.report import prometheus_rules as rules
from gpuwatch.report.model import (
    GPU_STATES,
    GpuDay,
    OwnedInputs,
    Period,
    PodDay,
    RentVsBuyGpu,
    ReportData,
    TokenDay,
)
from gpuwatch.report.prometheus_queries import (
    GPU_ROLES,
    Plans,
    ProgressCallback,
    _at,
    _counter_deltas,
    _counter_jobs,
    _Day,
    _day_jobs,
    _days,
    _merge_day_parts,
    _ms,
    _Planner,
    _scrape_intervals,
)
from gpuwatch.report.prometheus_slurm import slurm_rows
from gpuwatch.sizing.units import HOURS_PER_YEAR
from gpuwatch.tco.model import monthly_delta_usd

RENT_VS_BUY_DAYS = 30  # the agent's rent-vs-buy window (gpuwatch.cost.engine)


def _gpu_key(labels: LabelKey) -> tuple[str, str] | None:
    uuid = dict(labels).get("uuid")
    return None if uuid is None else (host_of(labels), uuid)


def _sum_by_gpu(series: Mapping[LabelKey, float]) -> dict[tuple[str, str], float]:
    """Sum series per (host, uuid) (several jobs scraping one agent would double: not merged)."""
    out: dict[tuple[str, str], float] = defaultdict(float)
    for labels, value in series.items():
        if (gpu := _gpu_key(labels)) is not None:
            out[gpu] += value
    return out


def _max_by_gpu(series: Mapping[LabelKey, float]) -> dict[tuple[str, str], float]:
    """The largest value per (host, uuid)."""
    out: dict[tuple[str, str], float] = {}
    for labels, value in series.items():
        if (gpu := _gpu_key(labels)) is not None:
            out[gpu] = max(out.get(gpu, value), value)
    return out


def _label_by_gpu(series: Iterable[LabelKey], label: str) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for labels in series:
        if (gpu := _gpu_key(labels)) is not None and (value := dict(labels).get(label)):
            out[gpu] = value
    return out


def load(
    options: PrometheusOptions, period: Period, progress: ProgressCallback | None = None
) -> ReportData:
    """Read the fleet's figures for `period` from the API `options` names."""
    with Client(options) as client:
        return _load(client, options, period, progress)


def _load(
    client: Client, options: PrometheusOptions, period: Period, progress: ProgressCallback | None
) -> ReportData:
    days = _days(period)
    plans, notes = _plan_days(client, options.rules, days)
    planner = _Planner(client, options.parallel_queries, progress)
    results = planner.run({**_counter_jobs(client, days, plans), **_day_jobs(client, days, plans)})
    _merge_day_parts(results, days)
    deltas = _counter_deltas(planner, results, days)
    if options.scrape_interval_seconds is not None:
        intervals = {"": options.scrape_interval_seconds}
    else:
        intervals = _scrape_intervals(client, days)
        if intervals:
            notes.append(f"scrape interval measured: {intervals['']:g} s (median of hosts)")
    gpu_days: list[GpuDay] = []
    first_seen: dict[tuple[str, str], int] = {}
    for i, d in enumerate(days):
        row = _gpu_rows(i, d, results, deltas, intervals)
        for gpu_day in row:
            first_seen.setdefault((gpu_day.host, gpu_day.uuid), i)
        gpu_days.extend(row)
    expected = sum(period.end_epoch - days[i].start for i in first_seen.values())
    token_days, uncharged = _token_rows(days, deltas)
    if uncharged:
        notes.append(
            f"{counted(uncharged, 'token source-day')} {'comes' if uncharged == 1 else 'come'} "
            "from agents that export no "
            "gpuwatch_token_source_charged_* counters (older versions): their raw tokens "
            "and cost are used, tokens served while such an agent stalled included"
        )
    pod_days = _pod_rows(days, deltas)
    slurm_days = slurm_rows(days, results, deltas, intervals)
    delta = client.vector(
        "sum(last_over_time(gpuwatch_rent_vs_buy_host_monthly_delta_usd[1d] @ "
        f"{_at(period.end_epoch)}))",
        period.end_epoch,
        signed=True,
    )
    rent_vs_buy = _rent_vs_buy_gpus(client, period.end_epoch)
    at_activity = [
        g.activity_monthly_delta_usd
        for g in rent_vs_buy
        if g.activity_monthly_delta_usd is not None
    ]
    activity_delta = sum(at_activity) if at_activity else None
    return ReportData(
        period=period,
        gpu_days=tuple(gpu_days),
        token_days=tuple(token_days),
        pod_days=tuple(pod_days),
        slurm_days=tuple(slurm_days),
        expected_gpu_seconds=float(expected) if first_seen else None,
        rent_vs_buy_monthly_delta_usd=next(iter(delta.values()), None),
        rent_vs_buy_activity_monthly_delta_usd=activity_delta,
        rent_vs_buy_gpus=rent_vs_buy,
        source=options.display_url,
        notes=tuple(notes),
    )


def _rent_vs_buy_gpus(client: Client, at: float) -> tuple[RentVsBuyGpu, ...]:
    """Each GPU's rent-vs-buy position at `at`, from what its agent last exported: rent
    (`gpuwatch_rent_vs_buy_rent_usd_per_hour`), owned = breakeven x rent x 8760 h, the
    30-day busy fraction (`gpuwatch_gpu_busy_ratio{window="30d"}`) and delta at it
    (`gpuwatch_rent_vs_buy_monthly_delta_usd`), and the mean activity over the 30 days
    before `at` (mean of `gpuwatch_gpu_activity_mean_ratio` samples) with the delta at it:
    rent x 730 h x activity - owned / 12, and the owning inputs behind owned
    (`gpuwatch_rent_vs_buy_inputs_info`, `_owned_inputs`). GPUs without a rent (agents
    before that gauge) are left out."""

    def last(metric: str, *, signed: bool = False) -> dict[LabelKey, float]:
        return client.vector(f"last_over_time({metric}[1d] @ {_at(at)})", at, signed=signed)

    rent_series = last("gpuwatch_rent_vs_buy_rent_usd_per_hour")
    rent, indexes = _sum_by_gpu(rent_series), _label_by_gpu(rent_series, "gpu")
    breakeven = _sum_by_gpu(last("gpuwatch_rent_vs_buy_breakeven_utilization_ratio"))
    delta = _sum_by_gpu(last("gpuwatch_rent_vs_buy_monthly_delta_usd", signed=True))
    busy = _sum_by_gpu(last('gpuwatch_gpu_busy_ratio{window="30d"}'))
    window = f"[{RENT_VS_BUY_DAYS}d] @ {_at(at)}"
    activity = _sum_by_gpu(
        client.vector(f"avg_over_time(gpuwatch_gpu_activity_mean_ratio{window})", at)
    )
    inputs = _owned_inputs(last("gpuwatch_rent_vs_buy_inputs_info"))
    lines = []
    for gpu in sorted(rent):
        if gpu not in breakeven or rent[gpu] <= 0:
            continue
        owned = breakeven[gpu] * rent[gpu] * HOURS_PER_YEAR
        mean = activity.get(gpu)
        mean = None if mean is None else min(max(mean, 0.0), 1.0)
        index = indexes.get(gpu)
        lines.append(
            RentVsBuyGpu(
                host=gpu[0],
                uuid=gpu[1],
                gpu_index=int(index) if index is not None and index.isdigit() else None,
                rent_usd_per_hour=rent[gpu],
                owned_usd_per_year=owned,
                busy_ratio=busy.get(gpu),
                activity_ratio=mean,
                monthly_delta_usd=delta.get(gpu),
                activity_monthly_delta_usd=(
                    None if mean is None else monthly_delta_usd(rent[gpu], mean, owned)
                ),
                inputs=inputs.get(gpu),
            )
        )
    return tuple(lines)


def _owned_inputs(series: Iterable[LabelKey]) -> dict[tuple[str, str], OwnedInputs]:
    """Each GPU's owning inputs, from the labels of its last `gpuwatch_rent_vs_buy_inputs_info`
    of the day before the period's end. A GPU gets none when its series of that day
    disagree (the inputs changed: which one priced the last sample is not known here) or
    a label is missing or unreadable (an agent older than the series has none at all)."""
    found: dict[tuple[str, str], set[OwnedInputs | None]] = defaultdict(set)
    for labels in series:
        if (gpu := _gpu_key(labels)) is not None:
            found[gpu].add(_parse_inputs(dict(labels)))
    return {
        gpu: only
        for gpu, parsed in found.items()
        if len(parsed) == 1 and (only := next(iter(parsed))) is not None
    }


def _parse_inputs(labels: Mapping[str, str]) -> OwnedInputs | None:
    try:
        return OwnedInputs(
            capex_usd=float(labels["capex_usd"]),
            host_share=labels["host_share"] == "true",
            life_years=float(labels["life_years"]),
            cost_of_capital=float(labels["cost_of_capital"]),
            ops_usd_per_year=float(labels["ops_usd_per_year"]),
            facility=labels["facility"],
            pue_applied=float(labels["pue_applied"]),
            hosting_usd_per_kw_month=float(labels["hosting_usd_per_kw_month"]),
            it_power_watts=float(labels["it_power_watts"]),
        )
    except (KeyError, ValueError):
        return None


def _plan_days(client: Client, mode: str, days: list[_Day]) -> tuple[Plans, list[str]]:
    """Which days read the recording rules (`--prometheus-rules`), and notes saying so."""
    if mode == "off":
        return [None] * len(days), []
    start, end = days[0].start, days[-1].end + DAY_SECONDS  # evaluations up to a day late
    matrix = client.matrix(f"{rules.HEARTBEAT}[{_ms(end - start)}ms] @ {_at(end)}", end)
    beats = rules.heartbeats(matrix)
    if mode == "on" and not beats:
        raise PrometheusError(
            f"--prometheus-rules on: no {rules.HEARTBEAT} samples in the period "
            "(load deploy/prometheus/gpuwatch-report.rules.yml)"
        )
    if mode == "on" and not rules.current(beats):
        found = sorted({rules.version_of(key) or "(none)" for key in beats})
        raise PrometheusError(
            f"--prometheus-rules on: {rules.HEARTBEAT} samples of version {', '.join(found)} "
            f"only, this report reads version {rules.RULES_VERSION} "
            "(load the current deploy/prometheus/gpuwatch-report.rules.yml)"
        )
    planned = [(d.day.isoformat(), *rules.plan_day(beats, _ms(d.start), _ms(d.end))) for d in days]
    notes = rules.describe(planned) if beats else []
    return [plan for _, plan, _ in planned], notes


def _gpu_rows(
    i: int,
    d: _Day,
    results: Mapping[str, Any],
    deltas: Mapping[tuple[str, int], dict[LabelKey, float]],
    intervals: Mapping[str, float],
) -> list[GpuDay]:
    up_count = _sum_by_gpu(results[f"up_count@{i}"])
    up_sum = _sum_by_gpu(results[f"up_sum@{i}"])
    states: dict[str, dict[tuple[str, str], float]] = defaultdict(lambda: defaultdict(float))
    for labels, value in (*results[f"states@{i}"].items(), *results[f"busy_states@{i}"].items()):
        if (gpu := _gpu_key(labels)) is not None:
            states[dict(labels).get("state", "")][gpu] += value
    activity_sum = _sum_by_gpu(results[f"activity_sum@{i}"])
    activity_count = _sum_by_gpu(results[f"activity_count@{i}"])
    names = _label_by_gpu(results[f"info@{i}"], "name")
    indexes = _label_by_gpu(results[f"info@{i}"], "gpu")
    price_sources = _label_by_gpu(results[f"price@{i}"], "source")
    recommended = _label_by_gpu(results[f"recommendation@{i}"], "recommended")
    recommended_rules = _label_by_gpu(results[f"recommendation@{i}"], "rule")
    need_bases = _label_by_gpu(results[f"need_basis@{i}"], "basis")
    savings = _sum_by_gpu(results[f"savings@{i}"])
    memory = _max_by_gpu(results[f"memory@{i}"])
    role = {r: _sum_by_gpu(deltas[(r, i)]) for r in GPU_ROLES}
    gpus = set(up_count) | set(role["cost"])
    rows: list[GpuDay] = []
    for gpu in sorted(gpus):
        host, uuid = gpu
        iv = intervals.get(host, intervals.get("", 0.0))
        observed = up_count.get(gpu, 0.0) * iv
        unknown = (up_count.get(gpu, 0.0) - up_sum.get(gpu, 0.0)) * iv
        idle_held = role["idle_seconds"].get(gpu, 0.0)
        idle_cost = role["idle_cost"].get(gpu, 0.0)
        held_cost = role["held_cost"].get(gpu, 0.0)
        n_idle, n_held = states["idle"].get(gpu, 0.0), states["held"].get(gpu, 0.0)
        if idle_cost > 0:
            held = idle_held * min(held_cost / idle_cost, 1.0)
        elif n_idle + n_held > 0:
            held = idle_held * n_held / (n_idle + n_held)
        else:
            held = 0.0
        pending = states["pending"].get(gpu, 0.0) * iv
        busy = max(observed - unknown - idle_held - pending, 0.0)
        index = indexes.get(gpu)
        rows.append(
            GpuDay(
                host=host,
                uuid=uuid,
                name=names.get(gpu, ""),
                day=d.day,
                observed_seconds=observed,
                class_seconds={
                    "busy": busy,
                    "idle": idle_held - held,
                    "held": held,
                    "unknown": unknown,
                },
                cost_usd=role["cost"].get(gpu, 0.0),
                idle_cost_usd=idle_cost,
                held_cost_usd=held_cost,
                gpu_index=int(index) if index is not None and index.isdigit() else None,
                energy_joules=role["energy"].get(gpu),
                price_source=price_sources.get(gpu),
                recommended_gpu=recommended.get(gpu),
                savings_usd_per_hour=savings.get(gpu),
                recommended_rule=recommended_rules.get(gpu),
                memory_peak_bytes=memory.get(gpu),
                need_basis=need_bases.get(gpu),
                state_seconds={name: states[name].get(gpu, 0.0) * iv for name in GPU_STATES},
                activity_seconds=activity_sum.get(gpu, 0.0) * iv,
                activity_sampled_seconds=activity_count.get(gpu, 0.0) * iv,
            )
        )
    return rows


def _token_rows(
    days: list[_Day], deltas: Mapping[tuple[str, int], dict[LabelKey, float]]
) -> tuple[list[TokenDay], int]:
    """One TokenDay per host, source and day: the tokens and cost over charged time
    (`gpuwatch_token_source_charged_*`, the live windows' rule) where the source's agent
    exports them, else its raw tokens and cost; and how many source-days were raw."""
    rows: list[TokenDay] = []
    raw_days = 0
    for i, d in enumerate(days):
        tokens, cost = _token_sums(deltas, "tokens", "token_cost", i)
        charged_tokens, charged_cost = _token_sums(
            deltas, "charged_tokens", "charged_token_cost", i
        )
        for key in sorted(tokens.keys() | cost.keys() | charged_cost.keys()):
            charged = key in charged_cost
            raw_days += not charged
            rows.append(
                TokenDay(
                    host=key[0],
                    source=key[1],
                    day=d.day,
                    tokens=(charged_tokens if charged else tokens).get(key, {}),
                    cost_usd=(charged_cost if charged else cost).get(key, 0.0),
                )
            )
    return rows, raw_days


def _token_sums(
    deltas: Mapping[tuple[str, int], dict[LabelKey, float]],
    tokens_role: str,
    cost_role: str,
    i: int,
) -> tuple[dict[tuple[str, str], dict[str, float]], dict[tuple[str, str], float]]:
    """Day `i`'s tokens by kind and cost per (host, source), from two counter roles."""
    tokens: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    cost: dict[tuple[str, str], float] = defaultdict(float)
    for labels, value in deltas[(tokens_role, i)].items():
        found = dict(labels)
        if "source" in found and "kind" in found:
            kinds = tokens[(host_of(labels), found["source"])]
            kinds[found["kind"]] = kinds.get(found["kind"], 0.0) + value
    for labels, value in deltas[(cost_role, i)].items():
        if "source" in (found := dict(labels)):
            cost[(host_of(labels), found["source"])] += value
    return tokens, cost


def _pod_rows(
    days: list[_Day], deltas: Mapping[tuple[str, int], dict[LabelKey, float]]
) -> list[PodDay]:
    """One row per (host, namespace, pod) per day from the pod counters' growth."""
    rows: list[PodDay] = []
    for i, d in enumerate(days):
        sums: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for column, role in enumerate(("pod_cost", "pod_idle_cost")):
            for labels, value in deltas[(role, i)].items():
                pod = pod_of(labels)
                if pod is not None:
                    sums[(host_of(labels), *pod)][column] += value
        rows.extend(
            PodDay(host, namespace, pod, d.day, cost, idle)
            for (host, namespace, pod), (cost, idle) in sorted(sums.items())
        )
    return rows


def last_sample_epoch(options: PrometheusOptions, at: float) -> float | None:
    """Unix time of the fleet's newest `gpuwatch_gpu_up` sample in the day before `at`
    (the end of a month-to-date report); None when there is none."""
    with Client(options) as client:
        found = client.vector(f"max(timestamp(gpuwatch_gpu_up @ {_at(at)}))", at)
        if found:
            return next(iter(found.values()))
        found = client.vector(
            f"max(max_over_time(timestamp(gpuwatch_gpu_up)[1d:1m] @ {_at(at)}))", at
        )
    return next(iter(found.values()), None)
