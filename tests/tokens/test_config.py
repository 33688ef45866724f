"""gpuwatch.tokens.config: [[token_sources]] validation."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from gpuwatch.tokens import COUNTER_NAMES, TokenSourceConfig, TokenSources


class Holder(BaseModel):
    """How the lead embeds the list in Config."""

    token_sources: TokenSources = []


def test_defaults() -> None:
    source = TokenSourceConfig(name="llama", url="http://10.0.0.5:8000/metrics")
    assert source.kind == "vllm"
    assert source.counter_names() == COUNTER_NAMES["vllm"]
    assert (source.interval_seconds, source.timeout_seconds) == (15.0, 2.0)
    assert source.gpus == []
    assert source.label_matchers == {}


def test_custom_names_its_counters() -> None:
    source = TokenSourceConfig(
        name="mine",
        url="https://infer.example/metrics",
        kind="custom",
        prompt_metric="my:prompt_tokens_total",
        generation_metric="my_generated_total",
        gpus=[0, "GPU-8a3f2c1e-0000-4000-8000-000000000001"],
        label_matchers={"model_name": "llama"},
    )
    assert source.counter_names() == ("my:prompt_tokens_total", "my_generated_total")


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"url": "ftp://host/metrics"}, "url"),
        ({"url": "http:///metrics"}, "url"),
        ({"url": "http://user:pw@host/metrics"}, "url"),
        ({"kind": "triton"}, "kind"),
        ({"kind": "custom"}, ""),
        ({"kind": "custom", "prompt_metric": "a_total", "generation_metric": "a_total"}, ""),
        ({"prompt_metric": "a_total"}, ""),
        (
            {"kind": "custom", "prompt_metric": "bad name", "generation_metric": "b"},
            "prompt_metric",
        ),
        ({"gpus": [-1]}, "gpus"),
        ({"gpus": ["gpu3"]}, "gpus"),
        ({"gpus": [1, 1]}, "gpus"),
        ({"label_matchers": {"bad-label": "x"}}, "label_matchers"),
        ({"interval_seconds": 0.1}, "interval_seconds"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"interval_seconds": 2, "timeout_seconds": 5}, ""),
        ({"name": ""}, "name"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_invalid_entries_name_the_field(fields: dict[str, Any], where: str) -> None:
    raw = {"name": "s", "url": "http://127.0.0.1:8000/metrics", **fields}
    with pytest.raises(ValidationError) as info:
        TokenSourceConfig.model_validate(raw)
    locations = [".".join(str(p) for p in e["loc"]) for e in info.value.errors()]
    assert any(loc.startswith(where) for loc in locations), locations


def test_names_must_be_unique() -> None:
    entry = {"name": "a", "url": "http://127.0.0.1:1/metrics"}
    with pytest.raises(ValidationError) as info:
        Holder.model_validate({"token_sources": [entry, entry]})
    assert info.value.errors()[0]["loc"] == ("token_sources",)
    assert len(Holder.model_validate({"token_sources": [entry]}).token_sources) == 1


def test_frozen() -> None:
    source = TokenSourceConfig(name="s", url="http://127.0.0.1:1/metrics")
    with pytest.raises(ValidationError):
        source.name = "t"
