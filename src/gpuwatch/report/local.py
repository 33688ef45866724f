"""The local report source: the host's history store reduced to `ReportData`.

One `GpuDay` per GPU per UTC day from the stored GPU-hours whose hour starts in the
period, one `TokenDay` per token source and one `PodDay` per Kubernetes pod per UTC
day. Coverage: each GPU is expected from its first sample (or the period's start, when
later) to the period's end, so a GPU added mid-month is not blamed for the days before
it existed; when the period's first stored tick span starts before the period (a tick
at 00:00:05 samples from 23:59:55, and the history books it to the hour holding its
end), the expected span starts there too, and when the first tick after the period
samples from before its end, the expected span ends there: both edges move as the
booked spans do, so observed never exceeds expected. Hours
written before schema 6 have no recorded start: the first sample is then estimated as
the first hour's last sample less its observed seconds.

Token sources: the tokens and the cost of the spans in which every GPU of the source
was charged in full (`charged_*` columns), as the agent's live $/1M-token windows count
them: tokens served across a stall the ledger did not charge count in no figure. Hours
written before schema 6 have no such columns: their raw tokens and cost are used (the
method notes say how many).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from typing import Any

from gpuwatch.config import Config
from gpuwatch.core.costs import RentVsBuyPosition
from gpuwatch.core.text import counted
from gpuwatch.cost.engine import RENT_VS_BUY_WINDOW, rent_vs_buy_position
from gpuwatch.cost.ledger import WINDOWS
from gpuwatch.history.rows import GpuHourRow, JobHourRow, PodHourRow, TokenHourRow
from gpuwatch.history.schema import STATE_COLUMNS
from gpuwatch.history.store import HISTORY_FILE, open_reader
from gpuwatch.report.model import (
    GPU_STATES,
    TIME_CLASSES,
    GpuDay,
    JobDay,
    OwnedInputs,
    Period,
    PodDay,
    RentVsBuyGpu,
    ReportData,
    TokenDay,
)
from gpuwatch.sizing import build_gpu_catalog
from gpuwatch.tco.model import monthly_delta_usd

RENT_VS_BUY_WINDOW_SECONDS = dict(WINDOWS)[RENT_VS_BUY_WINDOW]
"""The rent-vs-buy position is judged over the 30 days before the period's end, as the
agent judges it over the 30 days before each tick."""


def load(config: Config, period: Period) -> ReportData:
    """Read `agent.state_dir/history.sqlite3` (read-only) for `period`;
    HistoryMissingError when the file does not exist, HistoryStoreError when it cannot be
    read (damaged: HistoryCorruptError)."""
    store = open_reader(config.agent.state_dir / HISTORY_FILE)
    try:
        start, end = period.start_epoch, period.end_epoch
        gpu_rows = store.gpu_hours(start, end)
        token_rows = store.token_hours(start, end)
        pod_rows = store.pod_hours(start, end)
        job_rows = store.job_hours(start, end)
        first_hours = {r["uuid"]: _first_sample(r) for r in store.gpu_hours(0.0, end)[::-1]}
        after = store.gpu_hours(end, end + 1.0)  # the hour starting at the end, if any
        window_rows = store.gpu_hours(end - RENT_VS_BUY_WINDOW_SECONDS, end)
    finally:
        store.close()
    # the history books a tick's span (t - tick, t] to the hour holding t: the period's
    # first tick may sample from before its start, and the first tick after its end
    # from before its end. Expected spans move with them, so observed never exceeds it.
    spans: dict[str, float] = {}  # uuid: where the period's first stored tick span starts
    for row in gpu_rows[::-1]:
        if row["first_seconds"] is not None:
            spans[row["uuid"]] = float(row["first_seconds"])
    ends = {r["uuid"]: float(r["first_seconds"]) for r in after if r["first_seconds"] is not None}
    expected = sum(
        max(min(end, ends.get(uuid, end)) - min(max(start, first), spans.get(uuid, first)), 0.0)
        for uuid, first in first_hours.items()
    )
    positions = rent_vs_buy_positions(config, window_rows)
    notes = []
    if not gpu_rows:
        notes.append("the history holds no GPU-hour in this period")
    legacy = sum(1 for r in token_rows if r["charged_cost_usd"] is None)
    if legacy:
        notes.append(
            f"{counted(legacy, 'token source hour')} {'was' if legacy == 1 else 'were'} "
            "stored before gpuwatch counted tokens over charged time only: their raw tokens "
            "and cost are used"
        )
    return ReportData(
        period=period,
        gpu_days=tuple(_gpu_days(gpu_rows)),
        token_days=tuple(_token_days(token_rows)),
        pod_days=tuple(_pod_days(pod_rows)),
        job_days=tuple(_job_days(job_rows)),
        expected_gpu_seconds=expected if first_hours else None,
        rent_vs_buy_monthly_delta_usd=_host_delta(positions, "busy"),
        rent_vs_buy_activity_monthly_delta_usd=_host_delta(positions, "activity"),
        rent_vs_buy_gpus=_rent_vs_buy_gpus(positions, {r["uuid"]: r["host"] for r in window_rows}),
        source="local",
        notes=tuple(notes),
    )


def rent_vs_buy_positions(
    config: Config, rows: Iterable[GpuHourRow]
) -> list[tuple[RentVsBuyPosition, float | None]]:
    """Each GPU's rent-vs-buy position over `rows` (its hours of the 30 days before the
    period's end), as the agent computes it (`gpuwatch.cost.engine.rent_vs_buy_position`):
    at busy / (busy + idle + held) seconds and the latest stored price, with the mean
    activity (activity seconds / seconds with activity) beside it; None without any."""
    by_gpu: dict[str, list[GpuHourRow]] = {}
    for row in rows:
        by_gpu.setdefault(row["uuid"], []).append(row)
    catalog = build_gpu_catalog(config.sizing.gpus)
    out = []
    for uuid, hours in sorted(by_gpu.items()):
        busy = _sum(hours, "busy_seconds")
        judged = busy + _sum(hours, "idle_seconds") + _sum(hours, "held_seconds")
        prices = [h["price_usd_per_hour"] for h in hours if h["price_usd_per_hour"] is not None]
        last = hours[-1]
        position = rent_vs_buy_position(
            catalog,
            config.rent_vs_buy,
            name=str(last["name"]),
            gpu_index=int(last["gpu_index"] if last["gpu_index"] is not None else -1),
            uuid=uuid,
            busy_ratio=busy / judged if judged > 0 else None,
            price_usd_per_hour=prices[-1] if prices else None,
        )
        sampled = _sum(hours, "activity_sampled_seconds")
        activity = _sum(hours, "activity_seconds") / sampled if sampled > 0 else None
        if position is not None:
            out.append((position, None if activity is None else min(max(activity, 0.0), 1.0)))
    return out


def _rent_vs_buy_gpus(
    positions: Iterable[tuple[RentVsBuyPosition, float | None]], hosts: dict[str, str]
) -> tuple[RentVsBuyGpu, ...]:
    """The report's per-GPU lines of the positions (host from the GPU's latest hour)."""
    return tuple(
        RentVsBuyGpu(
            host=str(hosts.get(p.uuid, "")),
            uuid=p.uuid,
            gpu_index=p.gpu_index if p.gpu_index >= 0 else None,
            rent_usd_per_hour=p.rent_usd_per_hour,
            owned_usd_per_year=p.owned_usd_per_year,
            busy_ratio=p.busy_ratio,
            activity_ratio=activity,
            monthly_delta_usd=p.monthly_delta_usd,
            activity_monthly_delta_usd=(
                None if activity is None else activity_monthly_delta_usd(p, activity)
            ),
            inputs=OwnedInputs(
                capex_usd=p.capex_usd,
                host_share=p.host_share,
                life_years=p.life_years,
                cost_of_capital=p.cost_of_capital,
                ops_usd_per_year=p.ops_usd_per_year,
                facility=p.facility,
                pue_applied=p.pue_applied,
                hosting_usd_per_kw_month=p.hosting_usd_per_kw_month,
                it_power_watts=p.it_power_watts,
            ),
        )
        for p, activity in positions
    )


def _host_delta(
    positions: Iterable[tuple[RentVsBuyPosition, float | None]], at: str
) -> float | None:
    """The sum of the GPUs' monthly deltas at their busy fraction ("busy") or mean
    activity ("activity"); None when no GPU has that figure."""
    deltas = []
    for position, activity in positions:
        if at == "busy":
            deltas.append(position.monthly_delta_usd)
        elif activity is not None:
            deltas.append(activity_monthly_delta_usd(position, activity))
    return sum(deltas) if deltas else None


def activity_monthly_delta_usd(position: RentVsBuyPosition, activity_ratio: float) -> float:
    """The GPU's monthly delta at `activity_ratio` instead of its busy fraction: the same
    rent and owned cost (tco's `monthly_delta_usd`)."""
    return monthly_delta_usd(
        position.rent_usd_per_hour, activity_ratio, position.owned_usd_per_year
    )


def _first_sample(row: GpuHourRow) -> float:
    """Where a GPU's first stored hour starts being sampled: its recorded first span
    start; before schema 6 its last sample less its observed seconds (within the hour)."""
    if row["first_seconds"] is not None:
        return float(row["first_seconds"])
    estimate = float(row["last_seconds"]) - float(row["observed_seconds"])
    return max(float(row["hour_start"]), estimate)


def _charged(row: Mapping[str, Any], column: str) -> float:  # a TokenHourRow
    """`charged_<column>` of a token hour; the raw `column` in a row stored before it."""
    value = row[f"charged_{column}"]
    return float(row[column] if value is None else value)


def _day(hour_start: float) -> date:
    return datetime.fromtimestamp(hour_start, UTC).date()


def _gpu_days(rows: Iterable[GpuHourRow]) -> list[GpuDay]:
    days: dict[tuple[str, date], list[GpuHourRow]] = {}
    for row in rows:  # by uuid, then hour
        days.setdefault((row["uuid"], _day(row["hour_start"])), []).append(row)
    out = []
    for (uuid, day), hours in sorted(days.items(), key=lambda item: (item[0][1], item[0][0])):
        last = hours[-1]
        energies = [h["energy_joules"] for h in hours if h["energy_joules"] is not None]
        peaks = [h["memory_peak_bytes"] for h in hours if h["memory_peak_bytes"] is not None]
        sources = [h["price_source"] for h in hours if h["price_source"] is not None]
        out.append(
            GpuDay(
                host=str(last["host"]),
                uuid=uuid,
                name=str(last["name"]),
                day=day,
                observed_seconds=_sum(hours, "observed_seconds"),
                class_seconds={c: _sum(hours, f"{c}_seconds") for c in TIME_CLASSES},
                cost_usd=_sum(hours, "cost_usd"),
                idle_cost_usd=_sum(hours, "idle_cost_usd") + _sum(hours, "held_cost_usd"),
                held_cost_usd=_sum(hours, "held_cost_usd"),
                gpu_index=last["gpu_index"],
                energy_joules=sum(energies) if energies else None,
                price_source=sources[-1] if sources else None,
                recommended_gpu=last["recommended_gpu"],
                savings_usd_per_hour=last["savings_usd_per_hour"],
                recommended_rule=last.get("recommended_rule"),
                need_basis=last.get("need_basis"),
                memory_peak_bytes=max(peaks) if peaks else None,
                state_seconds={name: _sum(hours, f"{name}_state_seconds") for name in GPU_STATES},
                activity_seconds=_sum(hours, "activity_seconds"),
                activity_sampled_seconds=_sum(hours, "activity_sampled_seconds"),
            )
        )
    return out


def state_seconds(rows: Iterable[GpuHourRow]) -> dict[str, float]:
    """Seconds by analysis state (pending, busy, idle, held, underutilized) over rows."""
    rows = list(rows)
    return {c.removesuffix("_state_seconds"): _sum(rows, c) for c in STATE_COLUMNS}


def _token_days(rows: Iterable[TokenHourRow]) -> list[TokenDay]:
    days: dict[tuple[str, date], list[TokenHourRow]] = {}
    for row in rows:
        days.setdefault((row["source"], _day(row["hour_start"])), []).append(row)
    return [
        TokenDay(
            host=str(hours[-1]["host"]),
            source=source,
            day=day,
            tokens={
                "prompt": sum(_charged(h, "prompt_tokens") for h in hours),
                "generation": sum(_charged(h, "generation_tokens") for h in hours),
            },
            cost_usd=sum(_charged(h, "cost_usd") for h in hours),
        )
        for (source, day), hours in sorted(days.items(), key=lambda item: (item[0][1], item[0][0]))
    ]


def _pod_days(rows: Iterable[PodHourRow]) -> list[PodDay]:
    days: dict[tuple[str, str, date], list[PodHourRow]] = {}
    for row in rows:
        days.setdefault((row["namespace"], row["pod"], _day(row["hour_start"])), []).append(row)
    return [
        PodDay(
            host=str(hours[-1]["host"]),
            namespace=namespace,
            pod=pod,
            day=day,
            cost_usd=_sum(hours, "cost_usd"),
            idle_cost_usd=_sum(hours, "idle_cost_usd"),
        )
        for (namespace, pod, day), hours in sorted(days.items(), key=lambda i: (i[0][2], i[0][:2]))
    ]


def _job_days(rows: Iterable[JobHourRow]) -> list[JobDay]:
    days: dict[tuple[str, str, date], list[JobHourRow]] = {}
    for row in rows:
        days.setdefault((row["host"], row["job_id"], _day(row["hour_start"])), []).append(row)
    out = []
    for (host, job_id, day), hours in sorted(days.items(), key=lambda i: (i[0][2], i[0][:2])):
        named = [h for h in hours if h["account"] or h["user"]] or hours
        latest = max(named, key=lambda h: h["last_seconds"])
        out.append(
            JobDay(
                host=host,
                job_id=job_id,
                account=latest["account"],
                user=latest["user"],
                day=day,
                held_seconds=_sum(hours, "held_seconds"),
                cost_usd=_sum(hours, "cost_usd"),
                idle_cost_usd=_sum(hours, "idle_cost_usd"),
                held_cost_usd=_sum(hours, "held_cost_usd"),
                reclaimed_usd=_sum(hours, "reclaimed_usd"),
            )
        )
    return out


def _sum(rows: Iterable[Mapping[str, Any]], column: str) -> float:  # rows of one table
    return float(sum(row[column] or 0.0 for row in rows))
