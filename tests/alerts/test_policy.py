"""The news/dedup/cooldown policy on literal verdicts (pure, no I/O)."""

from __future__ import annotations

from gpuwatch.alerts.policy import AlertMemory, Decision, alertable_condition, decide
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.verdict import GpuVerdict, Recommendation
from tests.alerts.conftest import START, snapshot, uuid_of, verdict

STATES = ("idle", "held", "overprovisioned")
REC = Recommendation("L4-24GB", rent_usd_per_hour=0.8, savings_usd_per_hour=3.2)


def run(
    clock: ManualClock,
    verdicts: list[GpuVerdict],
    memory: dict[str, AlertMemory] | None = None,
    *,
    resolve: bool = True,
) -> Decision:
    return decide(
        snapshot(clock, verdicts),
        memory or {},
        states=STATES,
        cooldown_seconds=3600.0,
        resolve=resolve,
    )


def test_condition_prefers_the_waste_state_then_overprovisioned() -> None:
    assert alertable_condition(verdict(0, "idle", START, overprovisioned=True), STATES) == "idle"
    assert (
        alertable_condition(verdict(0, "busy", START, overprovisioned=True), STATES)
        == "overprovisioned"
    )
    assert alertable_condition(verdict(0, "busy", START), STATES) is None
    assert alertable_condition(verdict(0, "underutilized", START), STATES) is None
    assert alertable_condition(verdict(0, "underutilized", START), ("underutilized",)) == (
        "underutilized"
    )
    assert alertable_condition(verdict(0, "busy", START, overprovisioned=True), ("idle",)) is None


def test_new_condition_is_news_and_remembered() -> None:
    clock = ManualClock(START)
    decision = run(clock, [verdict(0, "idle", START - 1800)])
    assert [(e.kind, e.condition) for e in decision.events] == [("new", "idle")]
    assert decision.updates == {uuid_of(0): AlertMemory("idle", START)}


def test_same_condition_waits_for_the_cooldown_then_reminds() -> None:
    clock = ManualClock(START)
    memory = {uuid_of(0): AlertMemory("idle", START)}
    clock.advance(3599)
    assert run(clock, [verdict(0, "idle", START)], memory).events == ()
    clock.advance(1)
    decision = run(clock, [verdict(0, "idle", START)], memory)
    assert [e.kind for e in decision.events] == ["reminder"]
    assert decision.updates[uuid_of(0)] == AlertMemory("idle", START + 3600)


def test_change_of_condition_is_news_at_once() -> None:
    clock = ManualClock(START + 10)
    memory = {uuid_of(0): AlertMemory("idle", START)}
    decision = run(clock, [verdict(0, "held", START + 5)], memory)
    assert [(e.kind, e.condition, e.previous) for e in decision.events] == [
        ("changed", "held", "idle")
    ]


def test_busy_again_resolves_once_and_forgets() -> None:
    clock = ManualClock(START + 10)
    memory = {uuid_of(0): AlertMemory("held", START)}
    decision = run(clock, [verdict(0, "busy", START + 5)], memory)
    assert [(e.kind, e.condition) for e in decision.events] == [("resolved", "held")]
    assert decision.updates == {uuid_of(0): None}
    assert run(clock, [verdict(0, "busy", START + 5)], {}).events == ()


def test_resolve_off_forgets_silently() -> None:
    clock = ManualClock(START)
    memory = {uuid_of(0): AlertMemory("idle", START)}
    decision = run(clock, [verdict(0, "busy", START)], memory, resolve=False)
    assert decision.events == ()
    assert decision.updates == {uuid_of(0): None}


def test_busy_but_overprovisioned_is_not_resolved() -> None:
    clock = ManualClock(START)
    memory = {uuid_of(0): AlertMemory("idle", START - 60)}
    decision = run(
        clock, [verdict(0, "busy", START, overprovisioned=True, recommendation=REC)], memory
    )
    assert [(e.kind, e.condition) for e in decision.events] == [("changed", "overprovisioned")]


def test_gpus_without_a_verdict_keep_their_memory() -> None:
    clock = ManualClock(START + 7200)
    memory = {uuid_of(0): AlertMemory("idle", START), uuid_of(1): AlertMemory("idle", START)}
    decision = run(clock, [verdict(1, "idle", START)], memory)
    assert [e.verdict.gpu_index for e in decision.events] == [1]
    assert uuid_of(0) not in decision.updates


def test_events_are_ordered_by_gpu_index() -> None:
    clock = ManualClock(START)
    decision = run(clock, [verdict(3, "idle", START), verdict(1, "held", START)])
    assert [e.verdict.gpu_index for e in decision.events] == [1, 3]


def test_pending_after_a_restart_neither_resolves_nor_alerts() -> None:
    clock = ManualClock(START + 10)
    memory = {uuid_of(0): AlertMemory("idle", START)}
    decision = run(clock, [verdict(0, "pending", START + 5, overprovisioned=None)], memory)
    assert decision.events == (), "no evidence yet: the idle alert is not resolved"
    assert decision.updates == {}, "and its memory is kept"
