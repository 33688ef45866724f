"""Reclaim against the real one-node Slurm: an idle sbatch job (it holds its GRES, its
process names no GPU) and a busy one, the agent on the `slurm` scenario with
`reclaim_mode` dry-run or enforce, warn after 60 s and cancel after 120 s of
allocated-idle (after the 60 s window that makes it allocated-idle at all).

Dry-run logs and counts and changes nothing (both jobs RUNNING, no Comment); enforce
writes the warning into the idle job's Comment, then cancels it (CANCELLED), counts both
and the $ reclaimed re-derived from the GPU's price and the time left of the job's time
limit; the busy job is never touched. With the history on, that $ reaches the idle job's
`job_hours` row of the cancel's hour, and the local report's Slurm account and user
tables show it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pytest

from gpuwatch.agent import Agent
from gpuwatch.analysis.config import AnalysisConfig
from gpuwatch.cli import main
from gpuwatch.config import AgentConfig, Config, HistoryConfig
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.history.store import HISTORY_FILE
from gpuwatch.slurm.config import SlurmConfig
from gpuwatch.slurm.reclaim import RECLAIM_CREDIT_CAP_HOURS
from tests.conftest import scenario_agent, simulated
from tests.slurm.agent_helpers import Jobs, busy_and_idle_jobs, holds, job_rows, series, tick
from tests.slurm_cluster import SlurmCluster

WARN_S = 60.0
CANCEL_S = 120.0
TIME_LIMIT_MIN = 90  # the idle job's --time: 1.5 h left when it is cancelled, under the cap


@pytest.fixture
def jobs(slurm: SlurmCluster) -> Iterator[Jobs]:
    with busy_and_idle_jobs(slurm, idle_args=(f"--time={TIME_LIMIT_MIN}",)) as submitted:
        yield submitted


def reclaim_agent(
    slurm: SlurmCluster, mode: Literal["dry-run", "enforce"], state_dir: Path | None = None
) -> tuple[Agent, ManualClock]:
    """The agent on the `slurm` scenario; with `state_dir`, its history on there too."""
    nv, clock = simulated("slurm")
    config = Config(
        agent=AgentConfig(hostname="test-host", interval_seconds=10.0)
        if state_dir is None
        else AgentConfig(hostname="test-host", interval_seconds=10.0, state_dir=state_dir),
        history=HistoryConfig(enabled=state_dir is not None, write_interval_seconds=1.0),
        analysis=AnalysisConfig(window_seconds=60.0),
        slurm=SlurmConfig(
            enabled=True,
            list_interval_seconds=10.0,
            reclaim_mode=mode,
            reclaim_warn_after_seconds=WARN_S,
            reclaim_cancel_after_seconds=CANCEL_S,
        ),
    )
    agent = scenario_agent(config, nv, clock, environ=slurm.env)
    if state_dir is not None:
        assert agent.open_history()
    return agent, clock


def actions(agent: Agent) -> dict[tuple[str, str], float]:
    return {
        (s["action"], s["mode"]): v
        for s, v in series(agent).get("gpuwatch_slurm_reclaim_actions_total", [])
    }


def comment(slurm: SlurmCluster, job_id: str) -> str:
    match = re.search(r"Comment=(.*)$", slurm.show_job(job_id), flags=re.MULTILINE)
    return "" if match is None or match.group(1) == "(null)" else match.group(1)


def run_until(agent: Agent, clock: ManualClock, seconds: float) -> FleetSnapshot:
    snapshot = tick(agent, clock)
    for _ in range(int(seconds / 10.0)):
        snapshot = tick(agent, clock)
    return snapshot


def test_dry_run_logs_and_counts_and_changes_nothing(slurm: SlurmCluster, jobs: Jobs) -> None:
    agent, clock = reclaim_agent(slurm, "dry-run")
    try:
        # the 60 s window, then past the cancel time, plus two list intervals of slack
        run_until(agent, clock, 60.0 + CANCEL_S + 20.0)
        counted = actions(agent)
        assert counted[("warn", "dry-run")] == 1.0
        assert counted[("cancel", "dry-run")] == 1.0
        assert counted[("cancel_failed", "dry-run")] == 0.0
        assert "gpuwatch_slurm_reclaimed_usd_total" not in series(agent)
        for job in (jobs.busy, jobs.idle):
            assert slurm.job_state(job) == "RUNNING"
            assert comment(slurm, job) == ""
    finally:
        agent.stop()


def test_enforce_warns_then_cancels_the_idle_job_and_never_the_busy_one(
    slurm: SlurmCluster, jobs: Jobs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, clock = reclaim_agent(slurm, "enforce", tmp_path)
    try:
        # allocated-idle from the end of the first window; warned WARN_S later
        snapshot = run_until(agent, clock, 60.0 + WARN_S + 10.0)
        assert actions(agent)[("warn", "enforce")] == 1.0
        assert actions(agent)[("cancel", "enforce")] == 0.0
        assert comment(slurm, jobs.idle).startswith("gpuwatch: holds 1 GPU(s) and has run nothing")
        assert slurm.job_state(jobs.idle) == "RUNNING"
        end_time = next(
            j["end_time"]
            for j in json.loads(slurm.run(["squeue", "--json"]))["jobs"]
            if str(j["job_id"]) == jobs.idle
        )
        end_time = end_time["number"] if isinstance(end_time, dict) else end_time
        (idle_gpu,) = slurm.gres_indexes(jobs.idle)
        (idle_hold,) = holds(snapshot, jobs.idle)
        assert idle_hold.gres_index == idle_gpu
        idle_uuid = idle_hold.uuid
        price = next(
            g.price.usd_per_hour
            for g in snapshot.cost.gpus
            if g.uuid == idle_uuid and g.price is not None
        )
        before = time.time()
        run_until(agent, clock, CANCEL_S - WARN_S + 10.0)
        after = time.time()
        counted = actions(agent)
        assert counted[("warn", "enforce")] == 1.0
        assert counted[("cancel", "enforce")] == 1.0
        assert counted[("cancel_failed", "enforce")] == 0.0
        slurm.wait_ended(jobs.idle)
        assert slurm.job_state(jobs.idle) in {"CANCELLED", ""}
        # the busy job: running, no comment, never counted
        assert slurm.job_state(jobs.busy) == "RUNNING"
        assert comment(slurm, jobs.busy) == ""
        ((labels, usd),) = series(agent)["gpuwatch_slurm_reclaimed_usd_total"]
        assert labels == {"account": "chem", "user": "root"}
        hours = [min((end_time - t) / 3600.0, RECLAIM_CREDIT_CAP_HOURS) for t in (after, before)]
        assert price * hours[0] <= usd <= price * hours[1]
        assert 1.3 < hours[0] < 1.5  # the 90-minute limit, minus the few seconds run so far
        cancelled_at = snapshot.timestamp_seconds  # a lower bound of the reviewed snapshot's
        run_until(agent, clock, 20.0)  # snapshots after the cancel carry its credit
    finally:
        agent.stop()  # its last history write
    # the history: the idle job's one GPU, the hour of the cancel, the counter's $
    rows = job_rows(tmp_path / HISTORY_FILE, jobs.idle)
    credited = [r for r in rows if r["reclaimed_usd"] != 0]
    (row,) = credited
    assert row["reclaimed_usd"] == pytest.approx(usd, rel=1e-12)
    assert row["uuid"] == idle_uuid  # the GPU of the GRES index Slurm gave it
    assert (row["account"], row["user"]) == ("chem", "root")
    assert int(cancelled_at // 3600) * 3600 <= row["hour_start"] <= clock.time()
    assert all(r["reclaimed_usd"] == 0 for r in job_rows(tmp_path / HISTORY_FILE, jobs.busy))
    # the local report from that history: chem's and root's $ reclaimed are that $,
    # physics' (the busy job's account) 0
    config = tmp_path / "gpuwatch.toml"
    config.write_text(f'[agent]\nstate_dir = "{tmp_path}"\n')
    day = datetime.fromtimestamp(row["hour_start"], UTC).strftime("%Y-%m-%d")
    period = ["--from", day, "--to", day, "--config", str(config)]
    assert main(["report", *period, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    accounts = {a["name"]: a["reclaimed_usd"] for a in report["slurm_accounts"]}
    assert accounts["chem"] == pytest.approx(usd, rel=1e-12)
    assert accounts["physics"] == 0.0
    users = {u["name"]: u["reclaimed_usd"] for u in report["slurm_users"]}
    assert users["root"] == pytest.approx(usd, rel=1e-12)
    assert report["slurm_reclaimed_usd"] == pytest.approx(usd, rel=1e-12)
    out = tmp_path / "reports"
    assert main(["report", *period, "--format", "md", "--out", str(out)]) == 0
    capsys.readouterr()
    (markdown,) = out.glob("*.md")
    text = markdown.read_text()
    assert "$ reclaimed" in text
    chem = next(line for line in text.splitlines() if line.startswith("| chem |"))
    assert chem.rstrip(" |").endswith(f"${usd:,.2f}")
    assert f"$ reclaimed in the period: ${usd:,.2f}" in text
