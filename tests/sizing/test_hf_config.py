"""The config.json loader against published checkpoints (fixtures in configs/, sources in
configs/SOURCES.md): parameter counts within 1-2 % of the published totals (and active
counts for MoE), KV bytes per token exactly from the config."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.sizing import build_model_catalog
from gpuwatch.sizing.hf_config import ConfigJsonError, load_config_json, model_from_config

CONFIGS = Path(__file__).parent / "configs"

# (file, published total, published active or None, tolerance, KV bytes/token at bf16 over
# all layers = layers x 2 x kv_heads x head_dim x 2 B, MLA layers x (rank + rope) x 2 B)
PUBLISHED: list[tuple[str, float, float | None, float, int]] = [
    # meta-llama/Llama-3.1-8B: safetensors total 8,030,261,248
    ("llama-3.1-8b.json", 8_030_261_248, None, 0.0001, 32 * 2 * 8 * 128 * 2),
    # meta-llama/Llama-3.1-70B: safetensors total 70,553,706,496
    ("llama-3.1-70b.json", 70_553_706_496, None, 0.0001, 80 * 2 * 8 * 128 * 2),
    # meta-llama/Llama-4-Scout-17B-16E model card: 109B total (vision encoder included,
    # not counted here), 17B active
    ("llama-4-scout.json", 109e9, 17e9, 0.02, 48 * 2 * 8 * 128 * 2),
    # Qwen/Qwen3-8B model card: 8.2B parameters
    ("qwen3-8b.json", 8.2e9, None, 0.01, 36 * 2 * 8 * 128 * 2),
    # Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated
    ("qwen3-30b-a3b.json", 30.5e9, 3.3e9, 0.02, 48 * 2 * 4 * 128 * 2),
    # DeepSeek-V3 technical report (arXiv:2412.19437): 671B total, 37B activated
    # (the 14B multi-token-prediction module excluded, as here)
    ("deepseek-v3.json", 671e9, 37e9, 0.02, 61 * (512 + 64) * 2),
    # Mixtral paper (arXiv:2401.04088): 46.7B total, 12.9B active (13B)
    ("mixtral-8x7b.json", 46.7e9, 12.9e9, 0.01, 32 * 2 * 8 * 128 * 2),
    # google/gemma-3-27b-it: safetensors 27.4B (the 0.4B SigLIP encoder not counted)
    ("gemma-3-27b.json", 27.4e9, None, 0.02, 62 * 2 * 16 * 128 * 2),
    # mistralai/Mistral-Small-3.1-24B-Instruct-2503: 24B (Pixtral encoder not counted)
    ("mistral-small-3.1-24b.json", 24.0e9, None, 0.02, 40 * 2 * 8 * 128 * 2),
    # the quantized checkpoints keep their base model's architecture and count
    ("llama-3.1-8b-instruct-awq-int4.json", 8_030_261_248, None, 0.0001, 32 * 2 * 8 * 128 * 2),
    ("qwen3-8b-fp8.json", 8.2e9, None, 0.01, 36 * 2 * 8 * 128 * 2),
]


@pytest.mark.parametrize(("file", "total", "active", "tolerance", "kv"), PUBLISHED)
def test_parameters_and_kv_match_published(
    file: str, total: float, active: float | None, tolerance: float, kv: int
) -> None:
    spec = load_config_json(CONFIGS / file).spec
    assert spec.parameters == pytest.approx(total, rel=tolerance)
    if active is not None:
        assert spec.is_moe
        assert spec.active_parameters == pytest.approx(active, rel=tolerance)
    else:
        assert spec.active_parameters == spec.parameters
    assert spec.kv_cache_bytes_per_token(2.0) == kv


@pytest.mark.parametrize(
    ("file", "total", "active_without_embedding", "layers"),
    [
        # OpenAI gpt-oss model card (arXiv:2508.10925) Table 1: gpt-oss-20b 20.91B total,
        # 3.61B active; gpt-oss-120b 116.83B total, 5.13B active. Its active count
        # leaves out the input embedding (a lookup), hence the subtraction.
        ("gpt-oss-20b.json", 20.91e9, 3.61e9, 24),
        ("gpt-oss-120b.json", 116.83e9, 5.13e9, 36),
    ],
)
def test_gpt_oss(file: str, total: float, active_without_embedding: float, layers: int) -> None:
    loaded = load_config_json(CONFIGS / file)
    spec = loaded.spec
    assert spec.parameters == pytest.approx(total, rel=0.002)
    embedding = spec.vocabulary * spec.hidden_size
    assert spec.active_parameters - embedding == pytest.approx(active_without_embedding, rel=0.01)
    assert (spec.sliding_layers, spec.full_layers, spec.sliding_window) == (
        layers // 2,
        layers // 2,
        128,
    )
    # at 8192 tokens: half the layers cache 8192 tokens, half 128
    per_layer_token = 2 * 8 * 64 * 2
    assert spec.kv_cache_bytes_per_sequence(8192, 2.0) == per_layer_token * (layers // 2) * (
        8192 + 128
    )
    assert loaded.quantization is not None
    assert loaded.quantization.method == "mxfp4"


def test_gemma3_five_local_one_global() -> None:
    spec = load_config_json(CONFIGS / "gemma-3-27b.json").spec
    # every 6th of 62 layers is global: layers 6, 12, ..., 60 -> 10 global, 52 local
    assert (spec.full_layers, spec.sliding_layers, spec.sliding_window) == (10, 52, 1024)
    assert spec.tied_embeddings
    assert spec.vocabulary == 262_208
    assert spec.kv_cache_bytes_per_sequence(32768, 2.0) == 4096 * 2 * (10 * 32768 + 52 * 1024)


def test_llama4_chunked_layers_cache_one_chunk() -> None:
    spec = load_config_json(CONFIGS / "llama-4-scout.json").spec
    assert (spec.full_layers, spec.sliding_layers, spec.sliding_window) == (12, 36, 8192)
    assert (spec.experts, spec.experts_per_token, spec.shared_experts) == (16, 1, 1)


def test_deepseek_mla_and_quantization() -> None:
    loaded = load_config_json(CONFIGS / "deepseek-v3.json")
    assert (loaded.spec.kv_lora_rank, loaded.spec.qk_rope_head_dim) == (512, 64)
    assert (loaded.spec.dense_layers, loaded.spec.moe_layers) == (3, 58)
    assert loaded.quantization is not None
    assert loaded.quantization.method == "fp8"
    assert any("num_nextn_predict_layers" in note for note in loaded.notes)


def test_quantized_checkpoints_carry_their_scheme() -> None:
    awq = load_config_json(CONFIGS / "llama-3.1-8b-instruct-awq-int4.json").quantization
    fp8 = load_config_json(CONFIGS / "qwen3-8b-fp8.json").quantization
    assert awq is not None
    assert (awq.method, awq.bits, awq.group_size) == ("awq", 4, 128)
    assert fp8 is not None
    assert (fp8.method, fp8.bits) == ("fp8", 8)
    assert load_config_json(CONFIGS / "qwen3-8b.json").quantization is None


def _base() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    return data


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"num_hidden_layers": -1}, "num_hidden_layers"),
        ({"hidden_size": "4096"}, "hidden_size"),
        ({"num_key_value_heads": 7}, "num_key_value_heads"),
        ({"hidden_size": 4100}, "head_dim"),
        ({"num_local_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok"),
        ({"num_local_experts": 8}, "num_experts_per_tok"),
        (
            {"num_local_experts": 8, "num_experts_per_tok": 2, "first_k_dense_replace": 32},
            "first_k_dense_replace",
        ),
        ({"model_type": "mamba"}, "model_type"),
        ({"cross_attention_layers": [3, 8]}, "cross_attention_layers"),
        ({"mlp_bias": True}, "mlp_bias"),
        ({"layer_types": ["linear_attention"] * 32}, "layer_types"),
        ({"layer_types": ["full_attention"] * 31}, "layer_types"),
        ({"layer_types": ["sliding_attention"] * 32}, "sliding_window"),
        ({"kv_lora_rank": 512}, "qk_rope_head_dim"),
        ({"quantization_config": {"quant_method": "hqq"}}, "quant"),
        ({"vocab_size": None}, "vocab_size"),
    ],
)
def test_bad_fields_are_named(change: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        model_from_config(_base() | change, name="x")


def test_irrelevant_fields_are_ignored() -> None:
    plain = model_from_config(_base(), name="x").spec
    noisy = model_from_config(_base() | {"rope_theta": 1.0, "bos_token_id": 7}, name="x").spec
    assert plain == noisy


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigJsonError, match=r"config\.json: not JSON"):
        load_config_json(bad)
    with pytest.raises(ConfigJsonError, match=r"missing\.json"):
        load_config_json(tmp_path / "missing.json")


def test_mla_head_dim_is_the_value_head() -> None:
    # DeepSeek-V3: v_head_dim 128, not hidden / heads = 56
    assert load_config_json(CONFIGS / "deepseek-v3.json").spec.head_dim == 128


@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("llama-3.1-8b", "llama-3.1-8b.json"),
        ("llama-3.1-70b", "llama-3.1-70b.json"),
        ("llama-4-scout", "llama-4-scout.json"),
        ("qwen3-8b", "qwen3-8b.json"),
        ("qwen3-30b-a3b", "qwen3-30b-a3b.json"),
        ("deepseek-v3", "deepseek-v3.json"),
        ("gpt-oss-20b", "gpt-oss-20b.json"),
        ("gpt-oss-120b", "gpt-oss-120b.json"),
        ("mixtral-8x7b", "mixtral-8x7b.json"),
        ("gemma-3-27b", "gemma-3-27b.json"),
        ("mistral-small-3.1-24b", "mistral-small-3.1-24b.json"),
    ],
)
def test_catalog_entry_is_its_config_json(name: str, file: str) -> None:
    """models.toml's entry is what the loader reads from the published config."""
    catalog = build_model_catalog().get(name)
    loaded = load_config_json(CONFIGS / file, name=name).spec
    assert replace(catalog, source="") == replace(loaded, source="")


# Qwen/Qwen2.5-7B config.json (the keys that size it): q/k/v biases by model type, a
# sliding_window that use_sliding_window turns off; safetensors total 7,615,616,512.
QWEN25_7B: dict[str, Any] = {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "tie_word_embeddings": False,
    "sliding_window": 131072,
    "use_sliding_window": False,
    "max_window_layers": 28,
}

# google/gemma-2-9b config.json: every other layer slides (4096), tied embeddings,
# four norms per layer; model card 9.24B parameters.
GEMMA2_9B: dict[str, Any] = {
    "model_type": "gemma2",
    "hidden_size": 3584,
    "intermediate_size": 14336,
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "vocab_size": 256000,
    "sliding_window": 4096,
    "query_pre_attn_scalar": 256,
}


def test_qwen2_biases_and_disabled_window() -> None:
    spec = model_from_config(QWEN25_7B, name="qwen2.5-7b").spec
    assert spec.parameters == 7_615_616_512
    assert spec.sliding_window is None
    assert spec == replace(build_model_catalog().get("qwen2.5-7b"), source=spec.source)


def test_gemma2_alternates_local_and_global() -> None:
    spec = model_from_config(GEMMA2_9B, name="gemma-2-9b").spec
    assert spec.parameters == pytest.approx(9.24e9, rel=0.005)
    assert (spec.sliding_layers, spec.full_layers, spec.sliding_window) == (21, 21, 4096)
    assert spec.layer_types is not None
    assert spec.layer_types[:2] == ("sliding_attention", "full_attention")


def test_null_kv_heads_means_multi_head() -> None:
    spec = model_from_config(_base() | {"num_key_value_heads": None}, name="x").spec
    assert spec.kv_heads == spec.attention_heads == 32
