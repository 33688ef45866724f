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


def test_mla_caches_latent_and_rope_key_without_kv_heads() -> None:
    # deepseek-ai/DeepSeek-V3 config.json: 61 layers, kv_lora_rank 512,
    # qk_rope_head_dim 64, 128 heads: 576 values per layer per token, 70,272 B at bf16.
    spec = ModelSpec(
        name="dsv3",
        parameters=671 * 10**9,
        layers=61,
        hidden_size=7168,
        attention_heads=128,
        kv_heads=128,
        head_dim=128,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
    )
    assert spec.kv_values_per_layer == 576
    assert spec.kv_cache_bytes_per_token(2.0) == 61 * 576 * 2 == 70_272


def test_hybrid_layers_cache_per_layer_type() -> None:
    # openai/gpt-oss-20b config.json: 24 layers alternating sliding_attention (window 128)
    # and full_attention, 8 KV heads x head_dim 64.
    spec = ModelSpec(
        name="gpt-oss-20b",
        parameters=20_914_757_184,
        layers=24,
        hidden_size=2880,
        attention_heads=64,
        kv_heads=8,
        head_dim=64,
        sliding_window=128,
        layer_types=("sliding_attention", "full_attention") * 12,
    )
    per_layer_token = 2 * 8 * 64 * 2  # bytes at bf16
    assert (spec.sliding_layers, spec.full_layers) == (12, 12)
    assert spec.kv_cache_bytes_per_sequence(8192, 2.0) == per_layer_token * (12 * 8192 + 12 * 128)
    # below the window every layer caches the whole context
    assert spec.kv_cache_bytes_per_sequence(100, 2.0) == per_layer_token * 24 * 100
    assert spec.kv_cache_tokens(8192) == 8192


def test_uniform_window_still_caps_every_layer() -> None:
    # mistralai/Mistral-7B-v0.1 config.json: sliding_window 4096 on all 32 layers.
    spec = ModelSpec(
        name="mistral-7b",
        parameters=7_241_732_096,
        layers=32,
        hidden_size=4096,
        attention_heads=32,
        kv_heads=8,
        head_dim=128,
        sliding_window=4096,
    )
    assert spec.kv_cache_tokens(32768) == 4096
    assert spec.kv_cache_bytes_per_sequence(32768, 2.0) == 32 * 2 * 8 * 128 * 2 * 4096
