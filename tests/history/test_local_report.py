"""`gpuwatch.report.local.load` turns the stored hours into report rows."""

from __future__ import annotations

import csv
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuwatch.cli import main
from gpuwatch.core.clock import ManualClock
from gpuwatch.history.store import HistoryMissingError
from gpuwatch.report.local import load
from gpuwatch.report.model import Period
from tests.history.demo import HistoryRun, history_config

DAY = Period(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC), "2026-01-01")


def test_the_stored_hours_become_gpu_days_and_token_days(tmp_path: Path) -> None:
    run = HistoryRun(tmp_path, ManualClock())
    last = run.run(2 * 3600.0)
    run.close()
    data = load(history_config(tmp_path), DAY)
    assert len(data.gpu_days) == 4
    assert data.source == "local"
    for cost in last.cost.gpus:
        (day,) = [d for d in data.gpu_days if d.uuid == cost.uuid]
        assert day.host == "test-host"
        assert day.gpu_index == cost.gpu_index
        assert day.observed_seconds == pytest.approx(cost.observed_seconds_total)
        assert day.cost_usd == pytest.approx(cost.cost_usd_total)
        assert day.idle_cost_usd == pytest.approx(cost.idle_cost_usd_total)
        assert day.class_seconds["busy"] == pytest.approx(cost.busy_seconds_total)
        assert day.price_source == "static"
        assert day.energy_joules is not None
        assert day.energy_joules > 0
    (tokens,) = data.token_days
    assert tokens.tokens["prompt"] > 0
    assert tokens.tokens["generation"] > 0
    charged = next(s.cost_usd_total for s in last.cost.token_sources)
    assert tokens.cost_usd == pytest.approx(charged)
    # from each GPU's first sample (known to one tick: the first hour's last sample less
    # its observed seconds) to the end of the day
    assert data.expected_gpu_seconds is not None
    assert 4 * (86400.0 - 60.0) <= data.expected_gpu_seconds <= 4 * 86400.0


def test_no_history_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HistoryMissingError, match="no history at"):
        load(history_config(tmp_path), DAY)


def test_the_report_cli_shows_states_activity_and_the_agents_rent_vs_buy(
    tmp_path: Path,
) -> None:
    """Through `gpuwatch report`: the local report's rent vs buy is the live agent's, with
    the owning inputs behind its owned figure, and the underutilized vLLM GPU shows as
    such with its mean activity, in every format."""
    state = tmp_path / "state"
    run = HistoryRun(state, ManualClock())
    last = run.run(2 * 3600.0)
    run.close()
    live = last.cost.rent_vs_buy_host_monthly_delta_usd
    assert live is not None
    config = tmp_path / "gpuwatch.toml"
    config.write_text(f'[agent]\nstate_dir = "{state}"\n\n[history]\nenabled = true\n')
    out = tmp_path / "out"
    period = ["--from", "2026-01-01", "--to", "2026-01-01"]
    formats = ["--format", "html,md,csv,json,pdf", "--out", str(out)]
    code = main(["report", "--config", str(config), *period, *formats])
    assert code == 0
    document = json.loads(next(out.glob("*.json")).read_text())
    # the agent's 30-day window and the history's hold the same two hours
    assert document["rent_vs_buy_monthly_delta_usd"] == pytest.approx(live, abs=0.01)
    at_activity = document["rent_vs_buy_activity_monthly_delta_usd"]
    assert at_activity is not None
    assert at_activity < live  # the vLLM GPU is busy, at a fifth of its capacity
    # the owning inputs the agent priced each GPU with, as it exported them
    positions = {p.uuid: p for p in last.cost.rent_vs_buy}
    assert len(document["rent_vs_buy_gpus"]) == len(positions) == 4
    for line in document["rent_vs_buy_gpus"]:
        agent = positions[line["uuid"]]
        assert line["owned_inputs"] == {
            "capex_usd": agent.capex_usd,
            "host_share": agent.host_share,
            "life_years": agent.life_years,
            "cost_of_capital": agent.cost_of_capital,
            "ops_usd_per_year": agent.ops_usd_per_year,
            "facility": agent.facility,
            "pue_applied": agent.pue_applied,
            "hosting_usd_per_kw_month": agent.hosting_usd_per_kw_month,
            "it_power_watts": agent.it_power_watts,
        }
    # `gpuwatch tco --gpu H100-SXM-80GB`'s defaults: $42,600 with the host share, 3
    # years at 8 %, ops $462.50, colocation at $150/kW-month, 1,274 W (docs/tco.md)
    owning = (
        "| NVIDIA H100 80GB HBM3 | 4 | $42,600.00 (GPU + host share) | 3 years | 8 % | "
        "$462.50 | colocation (PUE not applied) | $150.00 | 1,274 W |"
    )
    vllm = next(g for g in document["gpus"] if g["gpu_index"] == 3)
    assert vllm["busy_ratio"] == pytest.approx(1.0)
    assert vllm["analysis_state_seconds"]["underutilized"] > 3600.0
    assert 0.1 < vllm["mean_activity_ratio"] < 0.25
    idle = next(g for g in document["gpus"] if g["gpu_index"] == 1)
    assert idle["analysis_state_seconds"]["idle"] > 3600.0
    assert idle["mean_activity_ratio"] == pytest.approx(0.0, abs=0.01)
    markdown = next(out.glob("*.md")).read_text()
    assert "## Time in each state" in markdown
    assert "| underutilized |" in markdown
    assert "## Rent vs buy" in markdown
    assert owning in markdown.splitlines()
    assert "What owning costs" in markdown
    assert "\\-" not in markdown  # prose is not escaped
    rows = list(csv.DictReader(next(out.glob("*.csv")).read_text().splitlines()))
    (row,) = [r for r in rows if r["gpu_index"] == "3"]
    assert float(row["underutilized_state_seconds"]) > 3600.0
    assert 0.1 < float(row["mean_activity"]) < 0.25
    page = next(out.glob("*.html")).read_text()
    assert "Time in each state" in page
    assert "underutilized" in page
    assert "<th>operations / GPU-year</th>" in page
    assert "colocation (PUE not applied)" in page
    assert "3\u00a0years" in page
    pdf = subprocess.run(
        ["pdftotext", "-layout", str(next(out.glob("*.pdf"))), "-"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.replace("\u00a0", " ")
    lines = pdf.splitlines()
    assert "underutilized" in pdf
    assert "GPU identities" in pdf
    assert "What owning costs" in pdf
    assert "$42,600.00" in pdf
    assert "1,274 W" in pdf
    for gpu in document["gpus"]:  # each whole UUID on one line, never wrapped
        assert any(gpu["uuid"] in line for line in lines), gpu["uuid"]
    assert not any(line.strip() in ("%", "h") for line in lines)
