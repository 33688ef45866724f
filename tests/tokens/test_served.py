"""A server's /v1/models: which model each served name is (gpuwatch.tokens.served), on
literal answers shaped as vLLM's."""

from __future__ import annotations

import json

import pytest

from gpuwatch.tokens.served import MAX_NAME_CHARS, model_roots, models_url


def test_the_models_url_sits_beside_the_metrics_url() -> None:
    assert models_url("http://10.0.0.5:8000/metrics") == "http://10.0.0.5:8000/v1/models"
    assert models_url("https://vllm.svc:443/x/metrics?a=1") == "https://vllm.svc:443/x/v1/models"
    assert models_url("http://h:8000/stats") == "http://h:8000/v1/models"


def test_base_model_cards_map_served_names_to_roots_and_adapters_are_skipped() -> None:
    body = json.dumps(
        {
            "object": "list",
            "data": [
                {"id": "chat", "object": "model", "root": "/models/Llama-3.1-8B-Instruct"},
                {"id": "sql", "root": "/adapters/sql", "parent": "chat"},
                {"id": "", "root": "x"},
                {"id": "long", "root": "r" * (MAX_NAME_CHARS + 1)},
                {"id": 3, "root": "x"},
                "not a card",
            ],
        }
    ).encode()
    assert model_roots(body) == {"chat": "/models/Llama-3.1-8B-Instruct"}


@pytest.mark.parametrize(
    "body", [b"", b"not json", b"[]", b'{"data": 1}', b"# HELP vllm:x a metrics page\n"]
)
def test_anything_else_resolves_nothing(body: bytes) -> None:
    assert model_roots(body) == {}
