"""The fleet report counts tokens as the agent's live windows do: over charged time.

An agent exports, per token source, its raw token and cost counters and the same over
the scrape-to-scrape spans in which every GPU of the source was charged in full
(`gpuwatch_token_source_charged_*`). Tokens served while the agent stalled are in the
raw counter only. The report reads the charged counters where a source's agent exports
them, and falls back to the raw ones (with a note) for agents that do not.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from gpuwatch.report.prometheus import _token_rows
from gpuwatch.report.prometheus_queries import _Day

DAY = _Day(
    date(2026, 1, 1),
    datetime(2026, 1, 1, tzinfo=UTC).timestamp(),
    datetime(2026, 1, 2, tzinfo=UTC).timestamp(),
)


def labels(**pairs: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(pairs.items()))


def test_a_stall_s_tokens_are_left_out_where_the_agent_exports_charged_counters() -> None:
    # host a stalled for two of its six hours: 6 h of tokens raw, 4 h charged; its
    # cost is the same (a stall charges nothing). Host b runs an older agent.
    deltas = {
        ("tokens", 0): {
            labels(instance="a", source="vllm", kind="prompt"): 600.0,
            labels(instance="a", source="vllm", kind="generation"): 60.0,
            labels(instance="b", source="tgi", kind="generation"): 50.0,
        },
        ("token_cost", 0): {
            labels(instance="a", source="vllm"): 40.0,
            labels(instance="b", source="tgi"): 10.0,
        },
        ("charged_tokens", 0): {
            labels(instance="a", source="vllm", kind="prompt"): 400.0,
            labels(instance="a", source="vllm", kind="generation"): 40.0,
        },
        ("charged_token_cost", 0): {labels(instance="a", source="vllm"): 40.0},
    }
    rows, raw_days = _token_rows([DAY], deltas)
    by_source = {(r.host, r.source): r for r in rows}
    charged = by_source[("a", "vllm")]
    assert dict(charged.tokens) == {"prompt": 400.0, "generation": 40.0}
    assert charged.cost_usd == pytest.approx(40.0)  # $1.00 per generated token, not $0.67
    older = by_source[("b", "tgi")]
    assert dict(older.tokens) == {"generation": 50.0}
    assert older.cost_usd == pytest.approx(10.0)
    assert raw_days == 1  # the load adds a note naming how many source-days were raw
