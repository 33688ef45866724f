"""ModelSpec's mixture-of-experts fields: routed expert and active parameter counts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpuwatch.sizing.models import ModelCatalogEntry, ModelSpec

# mistralai/Mixtral-8x7B-v0.1 config.json: 32 layers, hidden 4096, intermediate 14336,
# num_local_experts 8, num_experts_per_tok 2, vocab 32000, 8 KV heads; the model card
# and the Mixtral paper (arXiv:2401.04088) give 46.7B total and 12.9B active parameters;
# the safetensors index totals 46,702,792,704.
MIXTRAL = ModelSpec(
    name="mixtral-8x7b",
    parameters=46_702_792_704,
    layers=32,
    hidden_size=4096,
    attention_heads=32,
    kv_heads=8,
    head_dim=128,
    intermediate_size=14336,
    vocab_size=32000,
    experts=8,
    experts_per_token=2,
)


def test_mixtral_expert_and_active_parameters() -> None:
    assert MIXTRAL.expert_parameters == 32 * 8 * 3 * 4096 * 14336
    assert MIXTRAL.active_parameters == pytest.approx(12.9e9, rel=0.01)
    assert MIXTRAL.router_parameters == 32 * 4096 * 8


def test_dense_model_is_all_active() -> None:
    dense = ModelSpec(
        name="d",
        parameters=8_030_261_248,
        layers=32,
        hidden_size=4096,
        attention_heads=32,
        kv_heads=8,
        head_dim=128,
    )
    assert dense.expert_parameters == 0
    assert dense.active_parameters == dense.parameters


def test_dense_layers_and_moe_width() -> None:
    spec = ModelSpec(
        name="m",
        parameters=10**10,
        layers=4,
        hidden_size=8,
        attention_heads=1,
        kv_heads=1,
        head_dim=8,
        intermediate_size=64,
        experts=4,
        experts_per_token=1,
        moe_intermediate_size=16,
        dense_layers=1,
    )
    assert spec.moe_layers == 3
    assert spec.expert_parameters == 3 * 4 * 3 * 8 * 16
    assert spec.active_parameters == 10**10 - 3 * 3 * 3 * 8 * 16


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"experts": 8, "experts_per_token": 9}, "experts_per_token"),
        ({"experts": 8, "experts_per_token": 0}, "experts_per_token"),
        ({"experts_per_token": 2}, "experts_per_token"),
        ({"experts": 8, "experts_per_token": 2, "dense_layers": 32}, "dense_layers"),
        ({"experts": -1}, "experts"),
        ({"kv_lora_rank": 512}, "kv_lora_rank"),
        ({"layer_types": ["full_attention"]}, "layer_types"),
        ({"layer_types": ["full_attention"] * 31 + ["sliding_attention"]}, "sliding_window"),
        ({"layer_types": ["global"] * 32}, "layer_types"),
    ],
)
def test_bad_moe_and_attention_fields_are_named(fields: dict[str, object], named: str) -> None:
    base = {
        "name": "x",
        "parameters": 10**9,
        "layers": 32,
        "hidden_size": 4096,
        "attention_heads": 32,
    }
    with pytest.raises(ValidationError, match=named):
        ModelCatalogEntry.model_validate(base | fields)


def test_entry_carries_moe_fields_to_spec() -> None:
    entry = ModelCatalogEntry(
        name="x",
        parameters=10**9,
        layers=2,
        hidden_size=64,
        attention_heads=4,
        experts=4,
        experts_per_token=2,
        shared_experts=1,
        moe_intermediate_size=32,
        layer_types=("sliding_attention", "full_attention"),
        sliding_window=128,
    )
    spec = entry.to_spec()
    assert (spec.experts, spec.experts_per_token, spec.shared_experts) == (4, 2, 1)
    assert spec.layer_types == ("sliding_attention", "full_attention")
