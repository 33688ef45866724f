"""The local report and the Prometheus report of one simulated demo run agree.

Both read the same run (tests/report_agreement/conftest.py): the history the agent wrote,
and the /metrics samples Prometheus stored. What may differ, and why (docs/reports.md,
"Local and fleet reports of the same run"):

- the history books a tick's interval (t - tick, t] to the UTC hour holding t, so a tick
  landing exactly on midnight opens the new day; the Prometheus source counts a sample
  at a day's boundary in the day that ends (its counters are read over (start, end]).
  Each edge of the period therefore moves one tick of tokens between the two: the token
  counts differ by exactly (tokens of the tick ending at the period's start) - (tokens
  of the tick ending at its end). Cost, idle/held cost and state seconds run at a
  constant rate per GPU across both edges here, so the same shift leaves them equal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwatch.cli import main
from gpuwatch.promapi.client import PrometheusOptions
from gpuwatch.report import local, prometheus
from gpuwatch.report.build import build_report
from gpuwatch.report.model import GPU_STATES, TOKEN_KINDS
from gpuwatch.report.result import Report
from tests.report_agreement.conftest import DAYS, INSTANCE, TICK_SECONDS, Run

CENT = 0.005  # "to the cent": rounded to cents, both print the same figure
BUSY_RATIO_TOLERANCE = 2 * TICK_SECONDS / (DAYS * 86400)
"""One tick per edge of the period, as a share of each GPU's period."""
USD_PER_MILLION_RELATIVE = 2e-3
"""Two ticks of tokens (one per edge) over two days, at up to ~1.8x the mean rate."""


@pytest.fixture(scope="module")
def reports(demo_run: Run) -> tuple[Report, Report]:
    here = build_report(local.load(demo_run.config, demo_run.period))
    options = PrometheusOptions(demo_run.prometheus_url)
    fleet = build_report(prometheus.load(options, demo_run.period))
    return here, fleet


def test_the_run_is_long_enough_to_matter(reports: tuple[Report, Report]) -> None:
    here, fleet = reports
    assert here.totals.gpu_days == fleet.totals.gpu_days == 4 * DAYS
    assert here.coverage_ratio == pytest.approx(1.0)
    assert fleet.coverage_ratio == pytest.approx(1.0)
    # every state of the demo is there: busy (trainer, vLLM), idle and held GPUs
    for name in ("busy", "idle", "held"):
        assert here.totals.class_seconds[name] > 0


def test_costs_agree_to_the_cent(reports: tuple[Report, Report]) -> None:
    here, fleet = reports
    assert here.totals.cost_usd > 1000
    assert here.totals.cost_usd == pytest.approx(fleet.totals.cost_usd, abs=CENT)
    assert here.totals.idle_cost_usd == pytest.approx(fleet.totals.idle_cost_usd, abs=CENT)
    assert here.totals.held_cost_usd == pytest.approx(fleet.totals.held_cost_usd, abs=CENT)
    assert here.totals.held_cost_usd > 0
    assert here.totals.held_cost_usd < here.totals.idle_cost_usd
    fleet_gpus = {g.uuid: g for g in fleet.gpus}
    assert {g.uuid for g in here.gpus} == set(fleet_gpus)
    for gpu in here.gpus:
        other = fleet_gpus[gpu.uuid].totals
        assert gpu.totals.cost_usd == pytest.approx(other.cost_usd, abs=CENT), gpu.uuid
        assert gpu.totals.idle_cost_usd == pytest.approx(other.idle_cost_usd, abs=CENT)
        assert gpu.totals.held_cost_usd == pytest.approx(other.held_cost_usd, abs=CENT)
    for mine, theirs in zip(here.days, fleet.days, strict=True):
        assert mine.day == theirs.day
        assert mine.totals.cost_usd == pytest.approx(theirs.totals.cost_usd, abs=CENT)
        assert mine.totals.idle_cost_usd == pytest.approx(theirs.totals.idle_cost_usd, abs=CENT)


def test_busy_ratios_agree(reports: tuple[Report, Report]) -> None:
    here, fleet = reports
    assert here.totals.busy_ratio is not None
    assert fleet.totals.busy_ratio is not None
    assert here.totals.busy_ratio == pytest.approx(
        fleet.totals.busy_ratio, abs=BUSY_RATIO_TOLERANCE
    )
    fleet_gpus = {g.uuid: g.totals.busy_ratio for g in fleet.gpus}
    for gpu in here.gpus:
        assert gpu.totals.busy_ratio is not None
        assert gpu.totals.busy_ratio == pytest.approx(
            fleet_gpus[gpu.uuid], abs=BUSY_RATIO_TOLERANCE
        ), gpu.uuid


def test_tokens_differ_by_the_ticks_at_the_edges(
    demo_run: Run, reports: tuple[Report, Report]
) -> None:
    here, fleet = reports
    start, end = demo_run.period.start_epoch, demo_run.period.end_epoch

    def tick_tokens(t: float, kind: int) -> float:
        return demo_run.tokens[t][kind] - demo_run.tokens[t - TICK_SECONDS][kind]

    assert here.tokens.cost_usd == pytest.approx(fleet.tokens.cost_usd, abs=CENT)
    for i, kind in enumerate(TOKEN_KINDS):
        edge = tick_tokens(start, i) - tick_tokens(end, i)
        assert edge != 0.0  # the vLLM traffic varies: the edges do show
        assert here.tokens.tokens[kind] == pytest.approx(
            fleet.tokens.tokens[kind] + edge, rel=1e-9
        ), kind
        mine, theirs = here.tokens.usd_per_million(kind), fleet.tokens.usd_per_million(kind)
        assert mine is not None
        assert theirs is not None
        assert mine == pytest.approx(theirs, rel=USD_PER_MILLION_RELATIVE), kind


def test_rent_vs_buy_agrees_with_the_live_agent(
    demo_run: Run, reports: tuple[Report, Report]
) -> None:
    """The live agent's host delta (its status and /metrics) at the period's end, the
    local report's (from the history) and the Prometheus report's (the agent's gauge)."""
    here, fleet = reports
    live = demo_run.rent_vs_buy[demo_run.period.end_epoch]
    assert live is not None
    assert fleet.rent_vs_buy_monthly_delta_usd == pytest.approx(live, abs=CENT)
    assert here.rent_vs_buy_monthly_delta_usd is not None
    # the history's hours end one tick before the agent's window (the tick at the end
    # opens the next hour): under a dollar a month on four GPUs
    assert here.rent_vs_buy_monthly_delta_usd == pytest.approx(live, abs=1.0)


def test_rent_vs_buy_at_mean_activity_agrees(reports: tuple[Report, Report]) -> None:
    here, fleet = reports
    mine = here.rent_vs_buy_activity_monthly_delta_usd
    theirs = fleet.rent_vs_buy_activity_monthly_delta_usd
    assert mine is not None
    assert theirs is not None
    assert mine == pytest.approx(theirs, abs=1.0)
    # the vLLM GPU counts as busy at the busy fraction, at its ~20 % at mean activity
    assert here.rent_vs_buy_monthly_delta_usd is not None
    assert mine < here.rent_vs_buy_monthly_delta_usd - 500


def test_states_and_activity_agree(reports: tuple[Report, Report]) -> None:
    here, fleet = reports
    fleet_gpus = {g.uuid: g.totals for g in fleet.gpus}
    for gpu in here.gpus:
        mine, theirs = gpu.totals, fleet_gpus[gpu.uuid]
        for state in GPU_STATES:
            assert mine.state_seconds[state] == pytest.approx(
                theirs.state_seconds[state], abs=2 * TICK_SECONDS
            ), (gpu.uuid, state)
        assert mine.no_state_seconds == pytest.approx(theirs.no_state_seconds, abs=2 * TICK_SECONDS)
        assert mine.mean_activity_ratio is not None
        assert theirs.mean_activity_ratio is not None
        assert mine.mean_activity_ratio == pytest.approx(theirs.mean_activity_ratio, abs=2e-3)
    vllm = next(g for g in here.gpus if g.gpu_index == 3)
    assert vllm.totals.state_seconds["underutilized"] > 0.9 * DAYS * 86400
    assert vllm.totals.mean_activity_ratio is not None
    assert 0.15 < vllm.totals.mean_activity_ratio < 0.25
    assert vllm.totals.busy_ratio == pytest.approx(1.0)  # the busy fraction counts it busy


def test_the_three_agree_through_the_cli(
    demo_run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gpuwatch report` on the history and on Prometheus, as a user runs them: the
    rent-vs-buy position of both is the live agent's at the period's end (its /status and
    gauge), and both show the vLLM GPU underutilized at the same mean activity."""
    config = tmp_path / "gpuwatch.toml"
    state_dir = json.dumps(str(demo_run.config.agent.state_dir))
    config.write_text(f"[agent]\nstate_dir = {state_dir}\n\n[history]\nenabled = true\n")
    period = ["--from", "2026-01-01", "--to", "2026-01-02", "--format", "json"]
    documents = []
    for source in (["--config", str(config)], ["--prometheus", demo_run.prometheus_url]):
        assert main(["report", *source, *period]) == 0
        documents.append(json.loads(capsys.readouterr().out))
    here, fleet = documents
    live = demo_run.rent_vs_buy[demo_run.period.end_epoch]
    assert live is not None
    assert fleet["rent_vs_buy_monthly_delta_usd"] == pytest.approx(live, abs=CENT)
    assert here["rent_vs_buy_monthly_delta_usd"] == pytest.approx(live, abs=1.0)
    assert here["rent_vs_buy_activity_monthly_delta_usd"] == pytest.approx(
        fleet["rent_vs_buy_activity_monthly_delta_usd"], abs=1.0
    )
    for document in documents:
        vllm = next(g for g in document["gpus"] if g["gpu_index"] == 3)
        assert vllm["analysis_state_seconds"]["underutilized"] > 0.9 * DAYS * 86400
        assert 0.15 < vllm["mean_activity_ratio"] < 0.25


def test_rent_vs_buy_per_gpu_agrees_and_adds_up(reports: tuple[Report, Report]) -> None:
    """The per-GPU lines behind the two sums: the same rent, owned cost, owning inputs,
    busy fraction and mean activity from both sources; each delta is rent x 730 h x u -
    owned / 12 and the lines add up to the headline figures."""
    here, fleet = reports
    assert len(here.rent_vs_buy_gpus) == len(fleet.rent_vs_buy_gpus) == 4
    theirs = {g.uuid: g for g in fleet.rent_vs_buy_gpus}
    for mine in here.rent_vs_buy_gpus:
        other = theirs[mine.uuid]
        assert mine.host == other.host == INSTANCE
        assert mine.gpu_index == other.gpu_index
        assert mine.rent_usd_per_hour == pytest.approx(other.rent_usd_per_hour)
        assert mine.owned_usd_per_year == pytest.approx(other.owned_usd_per_year)
        assert mine.inputs is not None
        assert mine.inputs == other.inputs  # the history's config, the agent's labels
        assert (mine.inputs.life_years, mine.inputs.facility) == (3.0, "colocation")
        assert mine.busy_ratio is not None
        assert other.busy_ratio is not None
        assert mine.busy_ratio == pytest.approx(other.busy_ratio, abs=BUSY_RATIO_TOLERANCE)
        assert mine.activity_ratio is not None
        assert other.activity_ratio is not None
        assert mine.activity_ratio == pytest.approx(other.activity_ratio, abs=2e-3)
        for line in (mine, other):
            assert line.busy_ratio is not None
            assert line.activity_ratio is not None
            for u, delta in (
                (line.busy_ratio, line.monthly_delta_usd),
                (line.activity_ratio, line.activity_monthly_delta_usd),
            ):
                by_hand = line.rent_usd_per_hour * 730 * u - line.owned_usd_per_year / 12
                assert delta == pytest.approx(by_hand, abs=CENT)
    for report in (here, fleet):
        assert report.rent_vs_buy_monthly_delta_usd == pytest.approx(
            sum(g.monthly_delta_usd or 0.0 for g in report.rent_vs_buy_gpus), abs=CENT
        )
        assert report.rent_vs_buy_activity_monthly_delta_usd == pytest.approx(
            sum(g.activity_monthly_delta_usd or 0.0 for g in report.rent_vs_buy_gpus), abs=CENT
        )


def test_recommendations_and_their_need_basis_agree(reports: tuple[Report, Report]) -> None:
    """The demo's GPU 3 is sized on the need measured from its vLLM server, both ways."""
    here, fleet = reports
    for name, report in (("local", here), ("prometheus", fleet)):
        found = {g.gpu_index: (g.need_basis, g.recommended_gpu) for g in report.gpus}
        assert found[3][0] == "measured", name
        assert found[3][1] is not None, name
        assert {found[i][0] for i in (0, 1, 2)} == {"observed"}, name
    assert [(g.need_basis, g.recommended_gpu) for g in here.gpus] == [
        (g.need_basis, g.recommended_gpu) for g in fleet.gpus
    ]
