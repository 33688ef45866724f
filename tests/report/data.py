"""Hand-made ReportData whose every figure is worked out by hand in test_build.py."""

from __future__ import annotations

from datetime import UTC, date, datetime

from gpuwatch.report.model import GpuDay, Period, ReportData, TokenDay

DAY1, DAY2 = date(2026, 10, 1), date(2026, 10, 2)
PERIOD = Period(
    datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 10, 3, tzinfo=UTC), "2026-10-01 to 2026-10-02"
)
H100, L4 = "NVIDIA H100 80GB HBM3", "NVIDIA L4"


def seconds(
    busy: float = 0, idle: float = 0, held: float = 0, unknown: float = 0
) -> dict[str, float]:
    return {"busy": busy, "idle": idle, "held": held, "unknown": unknown}


def gpu_day(host: str, uuid: str, index: int, name: str, day: date, **kwargs: object) -> GpuDay:
    fields: dict[str, object] = {"price_source": "static", "gpu_index": index}
    fields.update(kwargs)
    return GpuDay(host=host, uuid=uuid, name=name, day=day, **fields)  # type: ignore[arg-type]


def sample_data(
    host_a: str = "alpha", host_b: str = "beta", gpu_name: str = H100, source: str = "vllm"
) -> ReportData:
    """Two hosts, three GPUs, two days (see test_build.py for the sums)."""
    rows = (
        gpu_day(
            host_a,
            "GPU-a",
            0,
            gpu_name,
            DAY1,
            observed_seconds=86400.0,
            class_seconds=seconds(busy=43200, idle=43200),
            cost_usd=48.0,
            idle_cost_usd=24.0,
            held_cost_usd=0.0,
        ),
        gpu_day(
            host_a,
            "GPU-a",
            0,
            gpu_name,
            DAY2,
            observed_seconds=86400.0,
            class_seconds=seconds(busy=21600, held=64800),
            cost_usd=48.0,
            idle_cost_usd=36.0,
            held_cost_usd=36.0,
            recommended_gpu="l4",
            savings_usd_per_hour=1.5,
        ),
        gpu_day(
            host_a,
            "GPU-b",
            1,
            H100,
            DAY1,
            observed_seconds=43200.0,
            class_seconds=seconds(busy=43200),
            cost_usd=24.0,
            idle_cost_usd=0.0,
            held_cost_usd=0.0,
            recommended_gpu="a10g",
            savings_usd_per_hour=0.5,
        ),
        gpu_day(
            host_a,
            "GPU-b",
            1,
            H100,
            DAY2,
            observed_seconds=86400.0,
            class_seconds=seconds(unknown=86400),
            cost_usd=48.0,
            idle_cost_usd=0.0,
            held_cost_usd=0.0,
        ),
        gpu_day(
            host_b,
            "GPU-c",
            0,
            L4,
            DAY1,
            observed_seconds=86400.0,
            class_seconds=seconds(idle=86400),
            cost_usd=19.2,
            idle_cost_usd=19.2,
            held_cost_usd=0.0,
            energy_joules=1e6,
            price_source="catalog",
        ),
    )
    tokens = (
        TokenDay(host_a, source, DAY1, {"prompt": 1e6, "generation": 2e5}, 30.0),
        TokenDay(host_a, source, DAY2, {"prompt": 1e6, "generation": 3e5}, 40.0),
    )
    return ReportData(
        period=PERIOD,
        gpu_days=rows,
        token_days=tokens,
        expected_gpu_seconds=3 * 2 * 86400.0,
        rent_vs_buy_monthly_delta_usd=-120.0,
        notes=("host beta was off on 2026-10-02",),
    )


def month_data(year: int, month: int, cost: float, idle: float) -> ReportData:
    """One GPU, one day: a month's worth of data for month-over-month tests."""
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    row = gpu_day(
        "alpha",
        "GPU-a",
        0,
        H100,
        start.date(),
        observed_seconds=86400.0,
        class_seconds=seconds(busy=43200, idle=43200),
        cost_usd=cost,
        idle_cost_usd=idle,
        held_cost_usd=0.0,
    )
    return ReportData(Period(start, end, f"{year:04d}-{month:02d}"), (row,))
