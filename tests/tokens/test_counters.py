"""gpuwatch.tokens.counters: reset correction like PromQL increase(), on literals."""

from __future__ import annotations

from gpuwatch.tokens.counters import GroupedCounter, ResetCorrectedCounter
from gpuwatch.tokens.parse import LabelSet

A: LabelSet = (("model_name", "a"),)
B: LabelSet = (("model_name", "b"),)


def test_first_observation_is_the_baseline() -> None:
    counter = ResetCorrectedCounter()
    assert not counter.primed
    assert counter.observe({A: 1000.0}) == 0.0
    assert counter.primed
    assert counter.observe({A: 1250.0}) == 250.0
    assert counter.total == 250.0


def test_a_drop_counts_the_new_value_as_the_increase() -> None:
    counter = ResetCorrectedCounter()
    counter.observe({A: 1000.0})
    counter.observe({A: 1100.0})  # +100
    assert counter.observe({A: 30.0}) == 30.0  # restarted: 30 tokens since
    assert counter.observe({A: 80.0}) == 50.0
    assert counter.total == 180.0
    assert counter.resets == 1


def test_series_are_corrected_independently() -> None:
    counter = ResetCorrectedCounter()
    counter.observe({A: 1000.0, B: 500.0})
    assert counter.observe({A: 10.0, B: 600.0}) == 10.0 + 100.0
    assert counter.resets == 1


def test_new_series_after_the_baseline_count_in_full() -> None:
    counter = ResetCorrectedCounter()
    counter.observe({A: 1000.0})
    assert counter.observe({A: 1000.0, B: 70.0}) == 70.0


def test_a_series_that_vanishes_keeps_its_last_value() -> None:
    counter = ResetCorrectedCounter()
    counter.observe({A: 1000.0, B: 500.0})
    assert counter.observe({A: 1010.0}) == 10.0  # B missing from this scrape
    assert counter.observe({A: 1010.0, B: 520.0}) == 20.0
    assert counter.observe({A: 1010.0, B: 5.0}) == 5.0


def test_total_never_decreases() -> None:
    counter = ResetCorrectedCounter()
    previous = 0.0
    for value in (5.0, 9.0, 0.0, 3.0, 3.0, 1.0, 100.0):
        counter.observe({A: value})
        assert counter.total >= previous
        previous = counter.total
    assert counter.total == 4.0 + 0.0 + 3.0 + 0.0 + 1.0 + 99.0


def test_grouped_counter_totals_increases_by_one_label() -> None:
    compute: LabelSet = (("engine", "0"), ("source", "local_compute"))
    cache: LabelSet = (("engine", "0"), ("source", "local_cache_hit"))
    other_engine: LabelSet = (("engine", "1"), ("source", "local_compute"))
    counter = GroupedCounter("source")
    counter.observe({compute: 700.0, cache: 300.0, other_engine: 50.0})
    assert counter.totals == {"local_compute": 0.0, "local_cache_hit": 0.0}  # the baseline
    counter.observe({compute: 770.0, cache: 330.0, other_engine: 60.0})
    assert counter.totals == {"local_compute": 80.0, "local_cache_hit": 30.0}
    counter.observe({compute: 5.0, cache: 340.0, other_engine: 70.0})  # engine 0 restarted?
    assert counter.totals == {"local_compute": 80.0 + 5.0 + 10.0, "local_cache_hit": 40.0}
    external: LabelSet = (("engine", "0"), ("source", "external_kv_transfer"))
    counter.observe({compute: 5.0, cache: 340.0, other_engine: 70.0, external: 12.0})
    assert counter.totals["external_kv_transfer"] == 12.0, "a new series counts in full"


def test_grouped_counter_keeps_a_bounded_number_of_groups() -> None:
    counter = GroupedCounter("source", max_groups=2)
    series: dict[LabelSet, float] = {(("source", f"s{i}"),): 1.0 for i in range(5)}
    counter.observe(series)
    counter.observe(dict.fromkeys(series, 2.0))
    assert counter.totals == {"s0": 1.0, "s1": 1.0}


def test_pending_is_what_observe_would_add_and_forget_starts_a_new_baseline() -> None:
    counter = ResetCorrectedCounter()
    assert counter.pending({A: 1000.0}) == 0.0  # before a baseline nothing counts
    counter.observe({A: 1000.0})
    assert counter.pending({A: 1e300, B: 5.0}) == 1e300 - 1000.0 + 5.0
    assert counter.pending({A: 10.0}) == 10.0  # a reset counts in full
    assert (counter.total, counter.resets) == (0.0, 0), "pending takes nothing"
    counter.observe({A: 1100.0})
    counter.forget()
    assert not counter.primed
    assert counter.observe({A: 1e300}) == 0.0  # the next observation is a baseline
    assert counter.total == 100.0
    grouped = GroupedCounter("source")
    grouped.observe({A: 1.0})
    grouped.forget()
    assert grouped.pending({A: 50.0}) == 0.0
