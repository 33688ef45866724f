"""The Slurm account and user rows from Prometheus answers: held $ is read from the agent's
held counter, and is unknown (None), not 0, where a cost counter grew without one beside it
(an agent older than `gpuwatch_slurm_*_held_cost_usd_total`)."""

from __future__ import annotations

from datetime import date

from gpuwatch.promapi.labels import LabelKey
from gpuwatch.report.prometheus_queries import _Day
from gpuwatch.report.prometheus_slurm import slurm_rows

DAY = _Day(date(2026, 11, 2), 1_793_577_600.0, 1_793_664_000.0)


def _labels(kind: str, name: str, host: str) -> LabelKey:
    return (("instance", host), (kind, name), ("job", "gpuwatch"))


def _deltas(*, held: bool) -> dict[tuple[str, int], dict[LabelKey, float]]:
    deltas: dict[tuple[str, int], dict[LabelKey, float]] = {}
    for kind, name in (("account", "physics"), ("user", "ann")):
        for role, value in (("cost", 12.0), ("idle_cost", 5.0), ("held_cost", 3.5)):
            if role == "held_cost" and not held:
                continue
            deltas[(f"slurm_{kind}_{role}", 0)] = {_labels(kind, name, "gpu-a"): value}
    return deltas


def test_held_cost_is_the_held_counters_growth() -> None:
    rows = slurm_rows([DAY], {}, _deltas(held=True), {"gpu-a": 15.0})
    by_kind = {r.kind: r for r in rows}
    assert by_kind.keys() == {"account", "user"}
    for row in rows:
        assert (row.cost_usd, row.idle_cost_usd, row.held_cost_usd) == (12.0, 5.0, 3.5)


def test_an_older_agents_rows_have_unknown_held_cost() -> None:
    rows = slurm_rows([DAY], {}, _deltas(held=False), {"gpu-a": 15.0})
    assert [r.held_cost_usd for r in rows] == [None, None]
    assert [r.cost_usd for r in rows] == [12.0, 12.0]


def test_a_row_with_no_cost_has_no_held_cost_to_miss() -> None:
    """A reclaim only (no cost series that day): nothing was charged, held $ is 0."""
    labels = (("account", "physics"), ("instance", "gpu-a"), ("user", "ann"))
    rows = slurm_rows([DAY], {}, {("slurm_reclaimed", 0): {labels: 2.0}}, {"gpu-a": 15.0})
    assert {(r.kind, r.reclaimed_usd, r.held_cost_usd) for r in rows} == {
        ("account", 2.0, 0.0),
        ("user", 2.0, 0.0),
    }
