"""Caches that are not a plain KV cache (gpuwatch.sizing.state_families): hybrid linear
attention, DeepSeek sparse attention, Mamba hybrids and heterogeneous blocks, read from
their vendored config.json files (configs/SOURCES.md), through the loader, the memory
model, the CLI and the measured need."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.analysis.measured import served_model
from gpuwatch.cli import main as gpuwatch_main
from gpuwatch.sizing import build_model_catalog
from gpuwatch.sizing.hf_config import (
    ConfigJsonError,
    catalog_entry_data,
    load_config_json,
    model_from_config,
)
from gpuwatch.sizing.memory import kv_cache_bytes
from gpuwatch.sizing.models import ModelCatalogEntry

CONFIGS = Path(__file__).parent / "configs"


def _config(slug: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / slug / "config.json").read_text("utf-8"))
    return data


def test_qwen3_next_caches_kv_on_the_attention_layers_and_a_state_on_the_rest() -> None:
    spec = load_config_json(CONFIGS / "qwen3-next-80b-a3b" / "config.json").spec
    assert (spec.kv_layer_count, spec.state_layers) == (12, 36)
    assert spec.kv_cache_bytes_per_token(2.0) == 12 * 2 * 2 * 256 * 2
    state = 36 * ((4 - 1) * (2 * 16 * 128 + 32 * 128) + 32 * 128 * 128) * 2
    assert spec.state_bytes_per_sequence(2.0) == state == 39_518_208
    # The state does not grow with the context; the attention layers' cache does.
    short = kv_cache_bytes(spec, 1_000, 1, 2.0)
    long = kv_cache_bytes(spec, 101_000, 1, 2.0)
    assert long - short == 100_000 * 24_576
    assert short == 1_000 * 24_576 + state
    # Far below the 48 layers the old model charged at every context.
    assert kv_cache_bytes(spec, 32_768, 8, 2.0) == 6_758_596_608
    assert 48 * 2 * 2 * 256 * 2 * 32_768 * 8 > 3 * 6_758_596_608


def test_qwen3_next_parameters_by_hand() -> None:
    spec = load_config_json(CONFIGS / "qwen3-next-80b-a3b" / "config.json").spec
    hidden, vocab = 2048, 151_936
    attention = 2 * hidden * 16 * 256 + 2 * hidden * 2 * 256 + 16 * 256 * hidden + 2 * 256
    delta_net = hidden * (2 * 2048 + 2 * 4096) + hidden * 64 + 8192 * 4 + 64 + 128 + 4096 * hidden
    moe = 512 * 3 * hidden * 512 + hidden * 512 + 3 * hidden * 512 + hidden
    total = 2 * vocab * hidden + 12 * attention + 36 * delta_net + 48 * moe + 97 * hidden
    assert spec.parameters == total == 79_674_391_296
    unused = 48 * (512 - 10) * 3 * hidden * 512
    assert spec.active_parameters == total - unused


def test_the_state_stays_in_the_model_dtype_under_an_fp8_kv_cache() -> None:
    spec = load_config_json(CONFIGS / "qwen3-next-80b-a3b" / "config.json").spec
    fp8 = kv_cache_bytes(spec, 32_768, 8, 1.0, state_bytes_per_value=2.0)
    assert fp8 == 8 * (32_768 * 12_288 + 39_518_208) == 3_537_371_136


def test_deepseek_v32_adds_the_indexer_keys_and_weights_to_v3() -> None:
    v3 = load_config_json(CONFIGS / "deepseek-v3.json").spec
    loaded = load_config_json(CONFIGS / "deepseek-v3.2-exp" / "config.json")
    spec = loaded.spec
    assert spec.indexer_bytes_per_token == 128 + 4
    assert spec.kv_cache_bytes_per_token(2.0) == 61 * (576 * 2 + 132) == 78_324
    # The indexer's 132 B are FP8 keys and FP32 scales: an fp8 cache halves the latent only.
    assert spec.kv_cache_bytes_per_token(1.0) == 61 * (576 + 132)
    indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert spec.parameters == v3.parameters + 61 * indexer
    assert loaded.quantization is not None  # the FP8 checkpoint, as V3's
    assert spec.name == "deepseek-v3.2-exp"


def test_nemotron_h_mamba_state_matches_vllm_shapes() -> None:
    spec = load_config_json(CONFIGS / "nemotron-h-8b" / "config.json").spec
    assert (spec.layers, spec.kv_layer_count, spec.state_layers) == (52, 4, 24)
    assert spec.conv_state_values == 3 * (128 * 64 + 2 * 8 * 128)
    assert spec.recurrent_state_values == 128 * 64 * 128
    assert spec.state_bytes_per_sequence(2.0) == 51_806_208
    assert kv_cache_bytes(spec, 8192, 1, 2.0) == 8192 * 4 * 2 * 8 * 128 * 2 + 51_806_208
    assert not spec.gated_mlp


def test_nemotron_h_ssm_state_in_float32_when_the_config_says_so() -> None:
    config = _config("nemotron-h-8b") | {"mamba_ssm_cache_dtype": "float32"}
    spec = model_from_config(config, name="nano").spec
    assert spec.state_bytes_per_sequence(2.0) == 24 * (30_720 * 2 + 1_048_576 * 4)


def test_nemotron_super_counts_only_its_attention_blocks() -> None:
    spec = load_config_json(CONFIGS / "llama-3.3-nemotron-super-49b" / "config.json").spec
    assert (spec.kv_layer_count, spec.kv_heads, spec.state_layers) == (49, 8, 0)
    assert spec.kv_cache_bytes_per_token(2.0) == 49 * 2 * 8 * 128 * 2
    assert spec.parameters == pytest.approx(49e9, rel=0.02)


@pytest.mark.parametrize(
    ("slug", "change", "key"),
    [
        ("nemotron-h-8b", {"hybrid_override_pattern": "M*-"}, "hybrid_override_pattern"),
        ("nemotron-h-8b", {"hybrid_override_pattern": "X" * 52}, "hybrid_override_pattern"),
        ("nemotron-h-8b", {"mamba_ssm_cache_dtype": "int3"}, "mamba_ssm_cache_dtype"),
        ("nemotron-h-8b", {"mamba_num_heads": None}, "mamba_num_heads"),
        ("qwen3-next-80b-a3b", {"layer_types": ["mamba"] * 48}, "layer_types"),
        ("qwen3-next-80b-a3b", {"linear_num_value_heads": -1}, "linear_num_value_heads"),
        ("deepseek-v3.2-exp", {"index_head_dim": None}, "index_head_dim"),
        ("deepseek-v3.2-exp", {"q_lora_rank": None}, "q_lora_rank"),
    ],
)
def test_unmodelled_values_are_refused_naming_the_key(
    slug: str, change: dict[str, object], key: str
) -> None:
    with pytest.raises(ConfigJsonError, match=key):
        model_from_config(_config(slug) | change, name="x")


def test_heterogeneous_blocks_refuse_what_is_not_modelled() -> None:
    config = _config("llama-3.3-nemotron-super-49b")
    blocks = [dict(block) for block in config["block_configs"]]
    blocks[3] = {**blocks[3], "ffn": {**blocks[3]["ffn"], "replace_with_linear": True}}
    with pytest.raises(ConfigJsonError, match=r"block_configs\[3\]\.ffn\.replace_with_linear"):
        model_from_config(config | {"block_configs": blocks}, name="x")
    blocks = [dict(block) for block in config["block_configs"]]
    blocks[0] = {**blocks[0], "attention": {**blocks[0]["attention"], "n_heads_in_group": 4}}
    with pytest.raises(ConfigJsonError, match="n_heads_in_group differs"):
        model_from_config(config | {"block_configs": blocks}, name="x")


def test_the_cli_refuses_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config("nemotron-h-8b") | {"hybrid_override_pattern": "M"}))
    assert gpuwatch_main(["size", "--config-json", str(path)]) == 2
    assert "hybrid_override_pattern" in capsys.readouterr().err


def test_the_json_architecture_names_the_cache_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert gpuwatch_main(["size", "qwen3-next-80b-a3b", "--context", "1000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    architecture = report["architecture"]
    assert (architecture["kv_layers"], architecture["state_layers"]) == (12, 36)
    assert architecture["recurrent_state_values_per_layer"] == 32 * 128 * 128
    assert report["kv_cache_bytes"] == 1000 * 24_576 + 39_518_208
    assert any("fixed state" in note for note in report["notes"])


def test_catalog_entries_match_their_configs() -> None:
    catalog = build_model_catalog()
    for name, slug in (
        ("qwen3-next-80b-a3b", "qwen3-next-80b-a3b/config.json"),
        ("deepseek-v3.2", "deepseek-v3.2-exp/config.json"),
        ("nemotron-h-8b", "nemotron-h-8b/config.json"),
        ("llama-3.3-nemotron-super-49b", "llama-3.3-nemotron-super-49b/config.json"),
        ("nvidia-nemotron-3-nano-30b-a3b", "nemotron-3-nano-30b-a3b/config.json"),
    ):
        entry, loaded = catalog.get(name), load_config_json(CONFIGS / slug).spec
        assert entry.parameters == loaded.parameters, name
        assert entry.active_parameters == loaded.active_parameters, name
        assert entry.kv_cache_bytes_per_sequence(100, 2.0) == pytest.approx(
            loaded.kv_cache_bytes_per_sequence(100, 2.0)
        ), name


def test_catalog_entry_validation_names_the_cache_fields() -> None:
    base = {"name": "m", "parameters": 1, "layers": 4, "hidden_size": 8, "attention_heads": 1}
    with pytest.raises(ValueError, match="exceed layers"):
        ModelCatalogEntry.model_validate(base | {"kv_layers": 3, "state_layers": 2})
    with pytest.raises(ValueError, match="come together"):
        ModelCatalogEntry.model_validate(base | {"kv_layers": 1, "state_layers": 2})


def test_the_measured_need_charges_only_the_attention_layers_per_token() -> None:
    spec = build_model_catalog().get("qwen3-next-80b-a3b")
    model = served_model(spec, None, "auto")
    assert model is not None
    assert model.kv_bytes_per_token == 12 * 2 * 2 * 256 * 2


def test_nemotron_3_moe_layers_and_float32_ssm_state() -> None:
    spec = load_config_json(CONFIGS / "nemotron-3-nano-30b-a3b" / "config.json").spec
    assert (spec.kv_layer_count, spec.state_layers, spec.moe_layers) == (6, 23, 23)
    assert spec.recurrent_state_bytes == 4.0
    assert spec.state_bytes_per_sequence(2.0) == 23 * (3 * 6144 * 2 + 64 * 64 * 128 * 4)
    # Squared-ReLU experts: up and down only, so 2 x hidden x width each.
    assert spec.parameters_per_expert == 2 * 2688 * 1856
    assert spec.active_parameters == spec.parameters - 23 * (128 - 6) * 2 * 2688 * 1856


def test_qwen3_5_moe_reads_its_text_config_as_qwen3_next() -> None:
    loaded = load_config_json(CONFIGS / "qwen3.5-397b-a17b" / "config.json")
    spec = loaded.spec
    assert (spec.kv_layer_count, spec.state_layers, spec.intermediate_size) == (15, 45, None)
    assert (
        spec.state_bytes_per_sequence(2.0)
        == 45 * (3 * (2 * 16 * 128 + 64 * 128) + 64 * 128 * 128) * 2
    )
    assert any("vision_config" in note for note in loaded.notes)
    with pytest.raises(ConfigJsonError, match="text_config"):
        model_from_config(_config("qwen3.5-397b-a17b") | {"text_config": 3}, name="x")


def test_an_agent_config_catalog_entry_from_config_json_keeps_the_state() -> None:
    data = catalog_entry_data(
        {"config_json": str(CONFIGS / "nemotron-3-nano-30b-a3b" / "config.json")}
    )
    spec = ModelCatalogEntry.model_validate(data).to_spec()
    assert spec.kv_cache_bytes_per_sequence(10, 2.0) == 10 * 6144 + 49_082_368
