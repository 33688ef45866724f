"""`gpuwatch.report.local.load` turns the stored hours into report rows."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuwatch.clock import ManualClock
from gpuwatch.report.local import HistoryMissingError, load
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
