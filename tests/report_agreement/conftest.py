"""One simulated run of the `demo` fleet, seen by both report sources.

Session-scoped: the real agent (history on, state_dir in a temporary directory) ticks
the demo fleet on a manual clock from 23:00 UTC the day before `DAYS` whole UTC days to
30 minutes after them; after every tick (one per `TICK_SECONDS`, which is also the
scrape interval) its OpenMetrics exposition is rendered with the tick's timestamp, as a
Prometheus scrape would store it (`instance` and `job` labels added). promtool backfills
those samples into blocks that a real Prometheus serves.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.openmetrics.exposition import generate_latest

from gpuwatch.config import AgentConfig, Config, HistoryConfig
from gpuwatch.core.clock import ManualClock
from gpuwatch.report.model import Period
from tests.conftest import require_binary
from tests.history.demo import HistoryRun
from tests.report_prometheus.conftest import backfill, start_prometheus, stop

FIRST_DAY = datetime(2026, 1, 1, tzinfo=UTC)
DAYS = 2
TICK_SECONDS = 60.0  # the agent's interval and the scrape interval
LEAD_SECONDS = 3600.0  # the run starts this long before FIRST_DAY ...
TAIL_SECONDS = 1800.0  # ... and ends this long after the last day
INSTANCE = "test-host"

REPORT_FAMILIES = frozenset(
    {
        "gpuwatch_gpu_cost_usd_total",
        "gpuwatch_gpu_idle_cost_usd_total",
        "gpuwatch_gpu_held_cost_usd_total",
        "gpuwatch_gpu_idle_seconds_total",
        "gpuwatch_gpu_energy_joules_total",
        "gpuwatch_tokens_total",
        "gpuwatch_token_source_cost_usd_total",
        "gpuwatch_token_source_charged_tokens_total",
        "gpuwatch_token_source_charged_cost_usd_total",
        "gpuwatch_gpu_up",
        "gpuwatch_gpu_state",
        "gpuwatch_gpu_info",
        "gpuwatch_gpu_price_usd_per_hour",
        "gpuwatch_gpu_recommendation_info",
        "gpuwatch_gpu_potential_savings_usd_per_hour",
        "gpuwatch_gpu_need_basis_info",
        "gpuwatch_rent_vs_buy_host_monthly_delta_usd",
        "gpuwatch_rent_vs_buy_breakeven_utilization_ratio",
        "gpuwatch_rent_vs_buy_rent_usd_per_hour",
        "gpuwatch_rent_vs_buy_monthly_delta_usd",
        "gpuwatch_rent_vs_buy_inputs_info",
        "gpuwatch_gpu_busy_ratio",
        "gpuwatch_gpu_activity_mean_ratio",
        # what `gpuwatch plan` reads besides (tests/report_agreement/test_plan.py)
        "gpuwatch_gpu_required_memory_bytes",
        "gpuwatch_gpu_dram_bandwidth_ratio",
        "gpuwatch_gpu_utilization_ratio",  # kernel-busy time (time-slicing adds it up)
        "gpuwatch_gpu_pod_info",
        "gpuwatch_pod_cost_usd_total",
        "gpuwatch_pod_idle_cost_usd_total",
    }
)
"""The samples the report and the plan read (the rest would only slow the backfill)."""


@dataclass(frozen=True)
class Run:
    """The simulated run: the agent's config (history) and the Prometheus serving it."""

    config: Config
    period: Period
    prometheus_url: str
    tokens: dict[float, tuple[float, float]]  # tick time -> (prompt, generation) totals
    rent_vs_buy: dict[float, float | None]  # tick time -> the agent's host delta, $/month


class Scrapes:
    """OpenMetrics samples grouped by family, each line stamped with its scrape time."""

    def __init__(self) -> None:
        self.headers: dict[str, list[str]] = {}
        self.lines: dict[str, list[str]] = {}

    def add(self, exposition: str, t: float) -> None:
        """Keep the report's samples of one exposition, stamped `t` (Unix seconds)."""
        family = ""
        labels = f'instance="{INSTANCE}",job="gpuwatch"'
        for line in exposition.splitlines():
            if line.startswith(("# HELP ", "# TYPE ")):
                family = line.split(" ", 3)[2]
                header = self.headers.setdefault(family, [])
                if len(header) < 2:
                    header.append(line)
                continue
            if line.startswith("#"):
                continue
            name, brace, rest = line.partition("{")
            if not brace:
                name, _, value = line.partition(" ")
                rest = f"}} {value}"
            if name not in REPORT_FAMILIES:
                continue
            sep = "," if not rest.startswith("}") else ""
            self.lines.setdefault(family, []).append(f"{name}{{{labels}{sep}{rest} {t:.3f}")

    def write(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as out:
            for family, lines in self.lines.items():
                out.write("\n".join([*self.headers[family], *lines]) + "\n")
            out.write("# EOF\n")


def simulate(
    state_dir: Path, openmetrics: Path
) -> tuple[Config, dict[float, tuple[float, float]], dict[float, float | None]]:
    """Run the demo agent over the whole span, writing its scrapes to `openmetrics`;
    (its config, token totals and rent-vs-buy host delta by tick time)."""
    config = Config(
        agent=AgentConfig(
            hostname=INSTANCE,
            state_dir=state_dir,
            interval_seconds=TICK_SECONDS,
            slow_interval_seconds=TICK_SECONDS,
        ),
        history=HistoryConfig(enabled=True),
    )
    start = FIRST_DAY.timestamp() - LEAD_SECONDS
    run = HistoryRun(state_dir, ManualClock(start), config, kubernetes=True)
    scrapes = Scrapes()
    tokens: dict[float, tuple[float, float]] = {}
    rent_vs_buy: dict[float, float | None] = {}
    ticks = round((LEAD_SECONDS + DAYS * 86400 + TAIL_SECONDS) / TICK_SECONDS)
    try:
        assert run.agent.history is not None
        for i in range(ticks):
            run.clock.advance(TICK_SECONDS)
            run.agent.tokens.scrape_due()
            run.agent.refresh_attribution()
            snapshot = run.agent.tick()
            rent_vs_buy[snapshot.timestamp_seconds] = (
                snapshot.cost.rent_vs_buy_host_monthly_delta_usd
            )
            exposition = generate_latest(run.agent.registry)  # type: ignore[no-untyped-call]
            scrapes.add(exposition.decode(), snapshot.timestamp_seconds)
            (reading,) = run.agent.tokens.readings()
            tokens[snapshot.timestamp_seconds] = (
                reading.prompt_tokens_total,
                reading.generation_tokens_total,
            )
            if i % 60 == 0:  # the writer thread's job: hours are written as the run goes
                run.agent.history.flush()
    finally:
        run.close()
    scrapes.write(openmetrics)
    return config, tokens, rent_vs_buy


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    workdir = tmp_path_factory.mktemp("agreement")
    openmetrics = workdir / "scrapes.om"
    config, tokens, rent_vs_buy = simulate(workdir / "state", openmetrics)
    data = workdir / "prometheus-data"
    try:
        backfill(require_binary("promtool"), openmetrics, data)
    except subprocess.CalledProcessError as exc:
        raise AssertionError(f"promtool: {exc.stderr.decode()[-2000:]}") from None
    url, proc = start_prometheus(data, workdir)
    period = Period(FIRST_DAY, FIRST_DAY + timedelta(days=DAYS), "2026-01-01 to 2026-01-02")
    try:
        yield Run(config, period, url, tokens, rent_vs_buy)
    finally:
        stop(proc)
