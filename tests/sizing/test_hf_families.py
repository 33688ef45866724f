"""The family table of the config.json loader (`gpuwatch.sizing.hf_families`): each
family's layout rule changes the count by exactly the weights it names, aliases are read
by their architectures' layout, and what is not modelled is refused naming the key.
Configs under configs/<slug>/config.json (sources in configs/SOURCES.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.cli import main as gpuwatch_main
from gpuwatch.sizing import build_model_catalog
from gpuwatch.sizing.hf_config import (
    ConfigJsonError,
    catalog_entry_data,
    load_config_json,
    model_from_config,
)
from gpuwatch.sizing.models import ModelCatalogEntry
from gpuwatch.sizing.moe import activation_factor, mlp_adapter_parameters
from gpuwatch.sizing.quantization import FP8, weight_bytes_by_component
from gpuwatch.sizing.served_names import match_served_model
from tests.sizing.checkpoints import size_json

CONFIGS = Path(__file__).parent / "configs"


def _config(slug: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / slug / "config.json").read_text("utf-8"))
    return data


def _count(config: dict[str, Any]) -> int:
    return model_from_config(config, name="x").spec.parameters


def test_kimi_k2_is_read_by_its_architecture_under_its_own_name() -> None:
    kimi = _config("kimi-k2-instruct")
    loaded = model_from_config(kimi, name="kimi")
    assert any("kimi_k2" in note and "DeepseekV3ForCausalLM" in note for note in loaded.notes)
    as_deepseek = model_from_config(kimi | {"model_type": "deepseek_v3"}, name="kimi").spec
    assert loaded.spec == as_deepseek
    assert (loaded.spec.experts, loaded.spec.dense_layers, loaded.spec.kv_lora_rank) == (
        384,
        1,
        512,
    )


def test_an_alias_needs_its_listed_architecture() -> None:
    kimi = _config("kimi-k2-instruct") | {"architectures": ["LlamaForCausalLM"]}
    with pytest.raises(ConfigJsonError, match="model_type 'kimi_k2'"):
        model_from_config(kimi, name="x")


def test_qwen3_coder_zero_shared_expert_is_none() -> None:
    coder = _config("qwen3-coder-480b-a35b")
    spec = model_from_config(coder, name="x").spec
    assert spec.shared_experts == 0
    assert spec.parameters == _count(coder | {"shared_expert_intermediate_size": None})
    with pytest.raises(ConfigJsonError, match="shared_expert_intermediate_size"):
        model_from_config(coder | {"shared_expert_intermediate_size": 2560}, name="x")


def test_qwen2_moe_shared_expert_has_its_own_width_and_a_gate() -> None:
    config = _config("qwen1.5-moe-a2.7b")
    spec = model_from_config(config, name="x").spec
    assert (spec.shared_experts, spec.shared_expert_size, spec.expert_size) == (1, 5632, 1408)
    without = _count(config | {"shared_expert_intermediate_size": 0})
    # per layer: the shared MLP (3 x hidden x 5632) and its gate (hidden x 1)
    assert spec.parameters - without == 24 * (3 * 2048 * 5632 + 2048)
    # a token's MoE path: 4 experts of 1408 and the shared 5632
    assert activation_factor(spec, 34.0) == pytest.approx(
        34.0 + 16.0 * ((4 * 1408 + 5632) / (4 * 2048) - 1)
    )
    assert mlp_adapter_parameters(spec, 8, "up") == 24 * (
        60 * 8 * (2048 + 1408) + 8 * (2048 + 5632)
    )


def test_decoder_sparse_step_makes_every_other_layer_moe() -> None:
    config = _config("qwen1.5-moe-a2.7b") | {"decoder_sparse_step": 2}
    spec = model_from_config(config, name="x").spec
    assert (spec.moe_layers, spec.dense_layers) == (12, 12)
    assert model_from_config(config | {"mlp_only_layers": [1, 3]}, name="x").spec.moe_layers == 10


def test_llama4_maverick_interleaves_moe_and_dense_layers() -> None:
    spec = load_config_json(CONFIGS / "llama-4-maverick" / "config.json").spec
    assert (spec.moe_layers, spec.dense_layers) == (24, 24)
    assert (spec.mlp_size, spec.expert_size, spec.shared_experts) == (16384, 8192, 1)
    scout = load_config_json(CONFIGS / "llama-4-scout.json").spec
    assert (scout.moe_layers, scout.dense_layers, scout.moe_intermediate_size) == (48, 0, None)


def test_glm4_moe_biases_on_qkv_only_and_mtp_noted() -> None:
    config = _config("glm-4.5-air")
    loaded = model_from_config(config, name="x")
    unbiased = _count(config | {"attention_bias": False})
    assert loaded.spec.parameters - unbiased == 46 * (96 * 128 + 2 * 8 * 128)
    assert _count(config | {"use_qk_norm": True}) - loaded.spec.parameters == 46 * 2 * 128
    assert any("num_nextn_predict_layers = 1" in note for note in loaded.notes)
    assert (loaded.spec.dense_layers, loaded.spec.shared_experts) == (1, 1)


def test_glm47_flash_is_deepseek_v3s_layout_to_the_parameter() -> None:
    """GLM-4.7-Flash (glm4_moe_lite) is MLA + DeepSeek-V3's MoE layout. A fine-tune of it
    with the same shapes (kepom/Huihui-GLM-4.7-Flash-abliterated) lists 31,221,488,576
    safetensors parameters: gpuwatch's count plus the one multi-token-prediction layer
    the checkpoint files hold (a decoder layer, eh_proj, three norms and its embedding
    and head copies: 1,278,094,592, the note's 1.28B) plus the routers'
    e_score_correction_bias (64 per MoE layer, 47 with the MTP layer's: 3,008), which
    gpuwatch does not count."""
    config = _config("glm-4.7-flash")
    spec = model_from_config(config, name="x").spec
    assert spec.parameters == 31_221_488_576 - 1_278_094_592 - 47 * 64
    assert (spec.kv_lora_rank, spec.qk_rope_head_dim, spec.dense_layers) == (512, 64, 1)
    loaded = model_from_config(config | {"num_nextn_predict_layers": 1}, name="x")
    assert any("about 1.28B parameters" in note for note in loaded.notes)


def test_minimax_m2_qk_norm_spans_the_projection() -> None:
    config = _config("minimax-m2.5")
    with_norm = _count(config)
    assert with_norm - _count(config | {"use_qk_norm": False}) == 62 * (48 * 128 + 8 * 128)
    with pytest.raises(ConfigJsonError, match="qk_norm_type"):
        model_from_config(config | {"qk_norm_type": "per_head"}, name="x")


def test_qwen3_vl_counts_its_vision_tower_and_keeps_it_16_bit() -> None:
    loaded = load_config_json(CONFIGS / "qwen3-vl-8b" / "config.json")
    spec = loaded.spec
    assert spec.vision_parameters == 576_388_336
    assert spec.parameters == 8_190_735_360 + 576_388_336  # Qwen3-8B's text model + tower
    assert spec.active_parameters == spec.parameters - spec.vision_parameters
    assert any("vision tower" in note for note in loaded.notes)
    assert weight_bytes_by_component(spec, FP8).vision == 2 * spec.vision_parameters
    text_only = {k: v for k, v in _config("qwen3-vl-8b").items() if k != "vision_config"}
    assert model_from_config(text_only, name="x").spec.vision_parameters == 0
    with pytest.raises(ConfigJsonError, match=r"vision_config\.intermediate_size"):
        model_from_config(
            _config("qwen3-vl-8b") | {"vision_config": {"hidden_size": 1152}}, name="x"
        )


def test_qwen2_5_vl_old_and_new_layouts_agree() -> None:
    """Older configs keep the text keys at the top (model_type qwen2_5_vl); newer ones
    nest them in text_config (qwen2_5_vl_text): the same count either way."""
    flat = _config("qwen2.5-vl-7b")
    spec = model_from_config(flat, name="x").spec
    assert spec.vision_parameters == 676_550_144
    assert spec.parameters - spec.vision_parameters == 7_615_616_512  # Qwen2.5-7B's text
    text_keys = {k: v for k, v in flat.items() if k not in ("vision_config", "architectures")}
    nested = {
        "model_type": "qwen2_5_vl",
        "architectures": flat["architectures"],
        "vision_config": flat["vision_config"],
        "text_config": text_keys | {"model_type": "qwen2_5_vl_text"},
    }
    assert model_from_config(nested, name="x").spec == spec


def test_phi3_and_smollm3_take_llama_weights_with_their_defaults() -> None:
    phi = _config("phi-4-mini")
    assert _count(phi) == _count(phi | {"model_type": "llama"})
    smol = _config("smollm3-3b")
    del smol["tie_word_embeddings"]
    spec = model_from_config(smol, name="x").spec
    assert spec.tied_embeddings  # SmolLM3Config's default


def test_granite_moe_shared_expert() -> None:
    config = _config("granite-3.1-3b-a800m")
    plain = model_from_config(config, name="x").spec
    assert (plain.tied_embeddings, plain.experts, plain.shared_experts) == (True, 40, 0)
    shared = model_from_config(
        config | {"model_type": "granitemoeshared", "shared_intermediate_size": 1024}, name="x"
    ).spec
    assert (shared.shared_experts, shared.shared_expert_size) == (1, 1024)
    assert shared.parameters - plain.parameters == 32 * 3 * 1536 * 1024
    with pytest.raises(ConfigJsonError, match="shared_intermediate_size"):
        model_from_config(config | {"shared_intermediate_size": 1024}, name="x")


def test_gemma4_global_layers_have_their_own_shape_and_cache() -> None:
    spec = load_config_json(CONFIGS / "gemma-4-31b" / "config.json").spec
    assert (spec.full_layers, spec.sliding_layers, spec.sliding_window) == (10, 50, 1024)
    # sliding: K and V of 16 heads x 256; global: K and V (V from K's projection) of 4 x 512
    assert (spec.kv_values_per_layer, spec.full_layer_kv_values) == (8192, 4096)
    assert spec.kv_cache_bytes_per_sequence(32768, 2.0) == 2 * (
        10 * 32768 * 4096 + 50 * 1024 * 8192
    )
    config = _config("gemma-4-31b")
    with_v = config | {"text_config": config["text_config"] | {"attention_k_eq_v": False}}
    assert _count(with_v) - spec.parameters == 10 * 5376 * 4 * 512  # the global v_proj
    moe = load_config_json(CONFIGS / "gemma-4-26b-a4b" / "config.json").spec
    assert (moe.experts, moe.experts_per_token, moe.expert_size) == (128, 8, 704)
    assert (moe.shared_experts, moe.shared_expert_size) == (1, 2112)  # the dense MLP


@pytest.mark.parametrize(
    ("key", "value"),
    [("hidden_size_per_layer_input", 256), ("num_kv_shared_layers", 20)],
)
def test_gemma4_per_layer_embeddings_and_shared_kv_are_refused(key: str, value: int) -> None:
    config = _config("gemma-4-31b")
    changed = config | {"text_config": config["text_config"] | {key: value}}
    with pytest.raises(ConfigJsonError, match=key):
        model_from_config(changed, name="x")


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("qwen3-coder-480b-a35b", "qwen3-coder-480b-a35b"),
        ("kimi-k2", "kimi-k2-instruct"),
        ("llama-4-maverick", "llama-4-maverick"),
        ("glm-4.5-air", "glm-4.5-air"),
        ("minimax-m2.5", "minimax-m2.5"),
        ("qwen1.5-moe-a2.7b", "qwen1.5-moe-a2.7b"),
        ("phi-4-mini", "phi-4-mini"),
        ("phi-3-mini-4k", "phi-3-mini-4k"),
        ("smollm3-3b", "smollm3-3b"),
        ("qwen3-vl-8b", "qwen3-vl-8b"),
        ("gemma-4-31b", "gemma-4-31b"),
        ("gemma-4-26b-a4b", "gemma-4-26b-a4b"),
        ("glm-4.5", "glm-4.7"),
        ("glm-4.6", "glm-4.7"),
        ("glm-4.7", "glm-4.7"),
        ("qwen2.5-vl-7b", "qwen2.5-vl-7b"),
        ("glm-4.7-flash", "glm-4.7-flash"),
        ("phi-4", "phi-4"),
    ],
)
def test_catalog_entry_is_its_config_json(name: str, slug: str) -> None:
    """models.toml's new entries are what the loader reads from the vendored configs."""
    catalog = build_model_catalog().get(name)
    loaded = load_config_json(CONFIGS / slug / "config.json", name=name).spec
    assert replace(catalog, source="") == replace(loaded, source="")


@pytest.mark.parametrize(
    ("served", "name"),
    [
        ("moonshotai/Kimi-K2-Instruct", "kimi-k2"),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "qwen3-coder-480b-a35b"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick"),
        ("zai-org/GLM-4.5-Air", "glm-4.5-air"),
        ("microsoft/Phi-4-mini-instruct", "phi-4-mini"),
        ("HuggingFaceTB/SmolLM3-3B", "smollm3-3b"),
        ("Qwen/Qwen3-VL-8B-Instruct", "qwen3-vl-8b"),
        ("google/gemma-4-31B-it", "gemma-4-31b"),
        ("zai-org/GLM-4.7-FP8", "glm-4.7"),
        ("zai-org/GLM-4.6", "glm-4.6"),
        ("zai-org/GLM-4.5-FP8", "glm-4.5"),
        ("zai-org/GLM-4.5-Air-FP8", "glm-4.5-air"),
        ("Qwen/Qwen2.5-VL-7B-Instruct-AWQ", "qwen2.5-vl-7b"),
        ("zai-org/GLM-4.7-Flash", "glm-4.7-flash"),
        ("microsoft/phi-4", "phi-4"),
    ],
)
def test_served_names_resolve_to_the_new_entries(served: str, name: str) -> None:
    match = match_served_model(served, build_model_catalog())
    assert match.status == "matched", match
    assert match.model is not None
    assert match.model.name == name


def test_size_command_says_vision_tower_and_global_cache(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe: no wrap (cli/console.py)
    assert gpuwatch_main(["size", "qwen3-vl-8b"]) == 0
    assert "vision tower 576M (counted, 16-bit)" in capsys.readouterr().out
    assert gpuwatch_main(["size", "gemma-4-31b"]) == 0
    assert "full layers cache 4096 values per token" in capsys.readouterr().out
    report = size_json(["--config-json", str(CONFIGS / "qwen3-vl-8b" / "config.json")])
    assert report["architecture"]["vision_parameters"] == 576_388_336
    assert "the vision tower (vision_config) is counted" in report["architecture"]["source"]


def test_mtp_note_sizes_the_layer_as_the_files_hold_it() -> None:
    """DeepSeek-V3: 671.03B served + the 13.46B MTP module (a decoder layer, eh_proj,
    norms, its embedding and head copies) = the 685B of its published files."""
    loaded = load_config_json(CONFIGS / "deepseek-v3.json")
    assert any("about 13.46B parameters" in note for note in loaded.notes)
    assert loaded.spec.parameters + 13.46e9 == pytest.approx(685e9, rel=0.001)


@pytest.mark.parametrize("slug", ["gemma-4-31b", "qwen3-vl-8b", "qwen1.5-moe-a2.7b"])
def test_agent_config_entries_keep_the_new_fields(slug: str) -> None:
    """A [[sizing.models]] entry giving config_json expands into the same spec, the
    global-layer cache, vision tower and shared-expert width included."""
    path = CONFIGS / slug / "config.json"
    data = catalog_entry_data({"name": "m", "config_json": str(path)})
    spec = ModelCatalogEntry.model_validate(data).to_spec()
    assert replace(spec, source="") == replace(load_config_json(path, name="m").spec, source="")


@pytest.mark.parametrize(
    ("slug", "published_active", "embeddings_left_out"),
    [
        # zai-org/GLM-4.5 README: GLM-4.5 (and the 4.6/4.7 layout) 32B active,
        # GLM-4.5-Air 12B active; MiniMaxAI/MiniMax-M2 card: 10B active (M2.5 keeps the
        # layout); ibm-granite/granite-3.1-3b-a800m-base card: 800M active. Their active
        # counts leave out the embeddings (both tables untied, the one table tied).
        ("glm-4.7", 32e9, 2),
        ("glm-4.5-air", 12e9, 2),
        ("minimax-m2.5", 10e9, 2),
        ("granite-3.1-3b-a800m", 0.8e9, 1),
    ],
)
def test_active_counts_published_without_the_embeddings(
    slug: str, published_active: float, embeddings_left_out: int
) -> None:
    spec = load_config_json(CONFIGS / slug / "config.json").spec
    embedding = spec.vocabulary * spec.hidden_size
    without = spec.active_parameters - embeddings_left_out * embedding
    assert without == pytest.approx(published_active, rel=0.03)
    assert spec.active_parameters > published_active * 1.03  # with them: 10 to 12 % above
