"""`gpuwatch report` on a history the simulated demo agent wrote: figures that do not
depend on when gpuwatch was installed, coverage that is observed / expected (never above
1, a gap in the first hour included), and $/1M tokens over charged time only, as the
agent's live windows count them.

The demo fleet is steady: GPU 0 trains, GPU 1 is idle, GPU 2 is held, GPU 3 serves the
simulated vLLM; every GPU costs $6.88/h.
"""

from __future__ import annotations

import io
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.cli import _parser
from gpuwatch.cli.report import run_report
from gpuwatch.core.clock import ManualClock
from gpuwatch.history.store import HISTORY_FILE
from tests.history.demo import HistoryRun, history_config

PRICE = 6.88
STEP = 60.0
SOURCE = "simulated-vllm-gpu3"


def report(state_dir: Path, now: datetime, *argv: str) -> dict[str, Any]:
    """The JSON report of `gpuwatch report ARGV` (production loader, local history)."""
    out, err = io.StringIO(), io.StringIO()
    args = _parser().parse_args(["report", *argv])
    code = run_report(args, history_config(state_dir), now=now, stdout=out, stderr=err, environ={})
    assert code == 0, err.getvalue()
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


@pytest.fixture(scope="module")
def steady(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo fleet from 2026-01-01 00:00 UTC to 2026-01-04 11:59, a tick a minute."""
    state_dir = tmp_path_factory.mktemp("steady")
    run = HistoryRun(state_dir, ManualClock())
    run.run(3.5 * 86400 - STEP, step=STEP)
    run.close()
    return state_dir


def _actions(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["uuid"]: i for i in document["top_waste"]}


def test_saves_per_month_is_the_same_over_1_3_and_31_days(steady: Path) -> None:
    """Installed on the 1st, reported on the 2nd, the 4th or at the end of the month:
    the idle and the held GPU save the same per month (to the cent per hour), $6.88 x
    730 h each, not the idle cost spread over the period."""
    feb = datetime(2026, 2, 1, tzinfo=UTC)
    one = report(steady, feb, "--from", "2026-01-01", "--to", "2026-01-01")
    three = report(steady, feb, "--from", "2026-01-01", "--to", "2026-01-03")
    month = report(steady, feb, "--month", "2026-01")
    assert month["period"]["seconds"] == 31 * 86400  # 3.5 days of data in a 31-day month
    per_gpu = [_actions(d) for d in (one, three, month)]
    released = {u: i for u, i in per_gpu[0].items() if i["action"].startswith("release")}
    assert {i["action"] for i in released.values()} == {"release idle", "release held"}
    for uuid in released:
        rates = [actions[uuid]["action_usd_per_month"] / 730 for actions in per_gpu]
        for rate in rates:
            assert rate == pytest.approx(PRICE, abs=0.005)  # $/h, to the cent
    # the headline adds idle, held and right-sizing, and shows each part
    for document in (one, three, month):
        parts = document["savings"]
        assert parts["idle_usd_per_month"] == pytest.approx(PRICE * 730, abs=0.5)
        assert parts["held_usd_per_month"] == pytest.approx(PRICE * 730, abs=0.5)
        assert document["savings_usd_per_month"] == pytest.approx(
            parts["idle_usd_per_month"]
            + parts["held_usd_per_month"]
            + parts["rightsizing_usd_per_month"]
        )
        assert document["savings_usd_per_month"] == pytest.approx(
            sum(h["savings_usd_per_month"] or 0.0 for h in document["hosts"])
        )


def test_coverage_never_exceeds_one_when_a_tick_spans_the_period_start(steady: Path) -> None:
    """The tick at 2026-01-04 00:00 samples the minute before midnight and is booked to
    the 4th: the expected span of a report of the 4th starts there too (it used to
    start at midnight: 43,200 s observed of 43,140 s expected, 100.14 %)."""
    last = datetime(2026, 1, 4, 11, 59, tzinfo=UTC)  # the run's last tick
    document = report(steady, last, "--from", "2026-01-04", "--to", "2026-01-04")
    assert document["observed_gpu_seconds"] == pytest.approx(4 * 12 * 3600)
    assert document["expected_gpu_seconds"] == pytest.approx(document["observed_gpu_seconds"])
    assert document["coverage_ratio"] == pytest.approx(1.0)
    assert document["coverage_ratio"] <= 1.0


def test_a_gap_in_the_first_hour_lowers_coverage(tmp_path: Path) -> None:
    """Up 00:00-00:10, down 20 minutes, up again 00:30-01:20: the 20 minutes (less the
    first tick's minute each run never samples) are missing, first hour included."""
    clock = ManualClock()
    first = HistoryRun(tmp_path, clock)
    first.run(600.0, step=STEP)
    first.close()
    clock.advance(1200.0)
    second = HistoryRun(tmp_path, clock)
    second.run(3000.0, step=STEP)
    second.close()
    now = datetime(2026, 1, 1, 1, 20, tzinfo=UTC)
    document = report(tmp_path, now, "--from", "2026-01-01", "--to", "2026-01-01")
    observed = 4 * (540.0 + 2940.0)  # each run's first tick samples no time
    expected = 4 * (4800.0 - 60.0)  # from the first sample (00:01) to the end (01:20)
    assert document["observed_gpu_seconds"] == pytest.approx(observed)
    assert document["expected_gpu_seconds"] == pytest.approx(expected)
    assert document["coverage_ratio"] == pytest.approx(observed / expected)  # 73.4 %


def test_tokens_served_during_a_stall_count_in_no_figure(tmp_path: Path) -> None:
    """The agent stalls for two hours while vLLM keeps serving: the ledger charges no
    cost for them, so neither the live 24 h window nor the report counts their tokens."""
    clock = ManualClock()
    run = HistoryRun(tmp_path, clock)
    run.run(2 * 3600.0, step=STEP)
    clock.advance(2 * 3600.0)  # no tick: a stalled agent
    last = run.run(2 * 3600.0, step=STEP)
    run.close()
    live = {w.kind: w for w in last.cost.tokens if w.source == SOURCE and w.window == "24h"}
    document = report(
        tmp_path, datetime(2026, 1, 2, tzinfo=UTC), "--from", "2026-01-01", "--to", "2026-01-01"
    )
    (source,) = document["token_sources"]
    assert source["tokens"]["generation"] == pytest.approx(live["generation"].tokens)
    assert source["cost_usd"] == pytest.approx(live["generation"].cost_usd)
    for kind in ("prompt", "generation", "all"):
        assert source["usd_per_million_tokens"][kind] == pytest.approx(
            live[kind].usd_per_million_tokens
        )
    # the server did serve tokens during the stall: the history's raw count is larger
    with sqlite3.connect(tmp_path / HISTORY_FILE) as conn:
        ((raw, charged),) = conn.execute(
            "SELECT sum(generation_tokens), sum(charged_generation_tokens) FROM token_hours"
        )
    assert charged == pytest.approx(source["tokens"]["generation"])
    assert raw > 1.4 * charged  # two stalled hours' tokens on top of four charged ones
