"""The collector table: each entry names a real class, and names what the agent reports."""

from __future__ import annotations

import importlib

import pytest

from gpuwatch.collectors.registry import SOURCES, Source, Switches, sources_on
from tests.conftest import make_agent


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.name)
def test_each_entry_names_a_class_that_exists(source: Source) -> None:
    module, _, name = source.cls.partition(":")
    assert isinstance(getattr(importlib.import_module(module), name), type)


def test_names_are_unique() -> None:
    names = [s.name for s in SOURCES]
    assert len(names) == len(set(names))


def test_the_switches_turn_the_optional_sources_on() -> None:
    default = {s.name for s in SOURCES if s.on_by_default}
    assert sources_on(Switches(kubernetes_enabled=False, token_sources=0)) == default
    both = sources_on(Switches(kubernetes_enabled=True, token_sources=2))
    assert both == default | {"attribution", "tokens"}


def test_every_collector_result_of_a_tick_is_a_source_or_a_stage() -> None:
    agent, clock = make_agent("demo")
    try:
        clock.advance(1.0)
        snapshot = agent.tick()
    finally:
        agent.stop()
    stages = {stage.name for stage in agent.pipeline.stages}
    names = {result.name for result in snapshot.collectors}
    assert names <= {s.name for s in SOURCES} | stages
    assert agent.parts.sources >= {"nvml", "nvml_slow", "xid", "billing"}
