"""A token source's URL may carry a token in its query string: it never reaches a log."""

from __future__ import annotations

import logging

import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.tokens import TokenCollector, TokenSourceConfig


def refuse(url: str, timeout: float) -> bytes:
    raise ConnectionRefusedError("connection refused")


def test_query_string_of_a_down_source_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    source = TokenSourceConfig(
        name="vllm", url="http://127.0.0.1:9/metrics?api_key=s3cr3t-token", gpus=[0]
    )
    collector = TokenCollector([source], ManualClock(), fetch=refuse)
    with caplog.at_level(logging.DEBUG, logger="gpuwatch"):
        reading = collector.scrape("vllm")
    assert reading.up is False
    assert [r.levelno for r in caplog.records if r.levelno >= logging.WARNING] == [logging.WARNING]
    assert "s3cr3t-token" not in caplog.text


def test_a_source_name_cannot_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    name = 'vllm\n2026-01-01 00:00:00,000 INFO gpuwatch: "all good"'
    source = TokenSourceConfig(name=name, url="http://127.0.0.1:9/metrics", gpus=[0])
    collector = TokenCollector([source], ManualClock(), fetch=refuse)
    with caplog.at_level(logging.DEBUG, logger="gpuwatch"):
        collector.scrape(name)
        collector.scrape(name)
    assert len(caplog.records) == 2
    assert all("\n" not in record.getMessage() for record in caplog.records)
