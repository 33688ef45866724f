"""Mixture-of-experts sizing, checked against the published counts and configs.

The models are declared as `[[sizing.models]]` in a config written here from their
published Hugging Face config.json (so the tests hold whether or not the built-in catalog
has them; an entry of the same name replaces a built-in one) and sized through
`gpuwatch size --config F --json`. Each `parameters` is recomputed from the config
(attention, experts, routers, norms, embeddings, biases where the config has them) and
agrees with the total the model card or paper states; the active counts are what the
sizing model derives, compared with the published ones.

Sources:
- Mixtral 8x7B: mistralai/Mixtral-8x7B-v0.1 config.json (32 layers, hidden 4096, 8 local
  experts, 2 per token, intermediate 14336, 8 KV heads, vocab 32000); "Mixtral of Experts"
  (Jiang et al. 2024, arXiv:2401.04088): 47B total, 13B active; model card / Mistral's
  release post: 46.7B total, 12.9B active.
- DeepSeek-V3: deepseek-ai/DeepSeek-V3 config.json (61 layers, hidden 7168,
  n_routed_experts 256, num_experts_per_tok 8, n_shared_experts 1, moe_intermediate_size
  2048, first_k_dense_replace 3, intermediate 18432, q_lora_rank 1536, kv_lora_rank 512,
  qk_rope_head_dim 64, vocab 129280); DeepSeek-V3 technical report (arXiv:2412.19437):
  671B total, 37B activated per token (the 14B multi-token-prediction module excluded).
- gpt-oss-20b / gpt-oss-120b: openai/gpt-oss-20b and -120b config.json (24 / 36 layers,
  hidden 2880, 32 / 128 local experts, 4 per token, intermediate 2880, 64 heads, 8 KV
  heads, head_dim 64, vocab 201088, sliding_window 128 on alternate layers); the gpt-oss
  model card (OpenAI, Aug 2025, arXiv:2508.10925) table 1: 20.91B total, 3.61B active;
  116.83B total, 5.13B active, where "active" leaves out the input embedding table (its
  embedding + unembedding row is 1.16B, and 3.61 = MLP 19.12 x 4/32 + attention 0.64 +
  unembedding 0.58).
- Qwen3-30B-A3B: Qwen/Qwen3-30B-A3B config.json (48 layers, hidden 2048, 128 experts, 8
  per token, moe_intermediate_size 768, 32 heads, 4 KV heads, head_dim 128, vocab 151936,
  untied); model card: 30.5B total, 3.3B activated, 29.9B non-embedding.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.cli import main
from gpuwatch.sizing import (
    ModelCatalogEntry,
    ModelSpec,
    build_gpu_catalog,
    build_model_catalog,
)
from gpuwatch.sizing.moe import activation_factor, expected_distinct_experts
from gpuwatch.sizing.quantization import MXFP4
from gpuwatch.sizing.throughput import (
    compute_bound_tokens_per_second,
    decode_bytes_per_step,
    decode_weight_bytes,
    training_tokens_per_second,
)
from gpuwatch.sizing.workload import Mode, Precision, Workload

GPT_OSS_LAYER_TYPES = ["sliding_attention", "full_attention"]

MODELS_TOML = f"""
[[sizing.models]]
name = "mixtral-8x7b"
parameters = 46_702_792_704
layers = 32
hidden_size = 4096
attention_heads = 32
kv_heads = 8
head_dim = 128
intermediate_size = 14336
vocab_size = 32000
experts = 8
experts_per_token = 2
source = "mistralai/Mixtral-8x7B-v0.1 config.json"

[[sizing.models]]
name = "deepseek-v3"
parameters = 671_026_404_352
layers = 61
hidden_size = 7168
attention_heads = 128
kv_heads = 128
head_dim = 128
intermediate_size = 18432
vocab_size = 129280
experts = 256
experts_per_token = 8
moe_intermediate_size = 2048
shared_experts = 1
dense_layers = 3
kv_lora_rank = 512
qk_rope_head_dim = 64
source = "deepseek-ai/DeepSeek-V3 config.json"

[[sizing.models]]
name = "gpt-oss-20b"
parameters = 20_914_757_184
layers = 24
hidden_size = 2880
attention_heads = 64
kv_heads = 8
head_dim = 64
intermediate_size = 2880
vocab_size = 201088
experts = 32
experts_per_token = 4
sliding_window = 128
layer_types = {json.dumps(GPT_OSS_LAYER_TYPES * 12)}
source = "openai/gpt-oss-20b config.json"

[[sizing.models]]
name = "gpt-oss-120b"
parameters = 116_829_156_672
layers = 36
hidden_size = 2880
attention_heads = 64
kv_heads = 8
head_dim = 64
intermediate_size = 2880
vocab_size = 201088
experts = 128
experts_per_token = 4
sliding_window = 128
layer_types = {json.dumps(GPT_OSS_LAYER_TYPES * 18)}
source = "openai/gpt-oss-120b config.json"

[[sizing.models]]
name = "qwen3-30b-a3b"
parameters = 30_532_122_624
layers = 48
hidden_size = 2048
attention_heads = 32
kv_heads = 4
head_dim = 128
intermediate_size = 6144
vocab_size = 151936
experts = 128
experts_per_token = 8
moe_intermediate_size = 768
source = "Qwen/Qwen3-30B-A3B config.json"
"""

# name: (published total, published active, whether the published active count leaves
# out the input embedding table)
PUBLISHED = {
    "mixtral-8x7b": (46.7e9, 12.9e9, False),
    "deepseek-v3": (671e9, 37e9, False),
    "gpt-oss-20b": (20.91e9, 3.61e9, True),
    "gpt-oss-120b": (116.83e9, 5.13e9, True),
    "qwen3-30b-a3b": (30.5e9, 3.3e9, False),
}

H100 = build_gpu_catalog().get("H100-SXM-80GB")
EFFICIENCY = 0.7


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "gpuwatch.toml"
    path.write_text(MODELS_TOML, encoding="utf-8")
    return path


def size_json(capsys: pytest.CaptureFixture[str], config: Path, *argv: str) -> dict[str, Any]:
    code = main(["size", *argv, "--config", str(config), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report: dict[str, Any] = json.loads(captured.out)
    return report


def gpu_row(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(row for row in report["gpus"] if row["name"] == name)


def spec(name: str) -> ModelSpec:
    entries = [
        ModelCatalogEntry.model_validate(entry)
        for entry in tomllib.loads(MODELS_TOML)["sizing"]["models"]
    ]
    return build_model_catalog(entries).get(name)


# --- counts -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", PUBLISHED)
def test_total_and_active_parameters_match_the_published_counts(
    capsys: pytest.CaptureFixture[str], config_file: Path, name: str
) -> None:
    total, active, without_embedding = PUBLISHED[name]
    report = size_json(capsys, config_file, name)
    moe = report["moe"]
    assert report["parameters"] == pytest.approx(total, rel=0.005)
    derived = moe["active_parameters"]
    if without_embedding:  # gpt-oss counts what a token multiplies: no input embedding
        derived -= report["architecture"]["vocab_size"] * report["architecture"]["hidden_size"]
    assert derived == pytest.approx(active, rel=0.02), f"{name}: {derived / 1e9:.3f}B active"
    assert moe["active_parameters"] < report["parameters"] / 3, "most weights sit idle"


def test_every_expert_is_resident_weights_are_all_parameters(
    capsys: pytest.CaptureFixture[str], config_file: Path
) -> None:
    report = size_json(capsys, config_file, "mixtral-8x7b")
    assert report["weights_bytes"] == 2 * 46_702_792_704, "fp16: all 46.7B, not the 12.9B active"
    assert gpu_row(report, "H100-SXM-80GB")["fits"] is False, "93.4 GB of weights"


# --- decode -----------------------------------------------------------------------------


def test_mixtral_batch_one_decode_on_an_h100_is_about_90_tokens_per_second(
    capsys: pytest.CaptureFixture[str], config_file: Path
) -> None:
    """Issue 17's table: ≈ 90 tok/s from the active parameters (it printed 25 before)."""
    report = size_json(capsys, config_file, "mixtral-8x7b")
    h100 = gpu_row(report, "H100-SXM-80GB")
    # a step reads the 12.88B active parameters at 2 B plus 4,096 tokens of 128 KiB of KV
    active_bytes = 2 * 12_879_925_248
    kv_bytes = 4096 * 2 * 32 * 8 * 128 * 2
    expected = 3.35e12 * EFFICIENCY / (active_bytes + kv_bytes)
    assert report["moe"]["decode_weight_bytes_per_step"] == active_bytes
    assert report["moe"]["distinct_experts_per_step"] == 2
    assert h100["tokens_per_second"] == pytest.approx(expected, rel=1e-6)
    assert h100["tokens_per_second"] == pytest.approx(90, rel=0.05)


def test_expected_distinct_experts_at_batch_b() -> None:
    assert expected_distinct_experts(8, 2, 1) == 2
    assert expected_distinct_experts(8, 2, 4) == pytest.approx(8 * (1 - 0.75**4))  # 5.47
    assert expected_distinct_experts(8, 2, 64) == pytest.approx(8, rel=1e-6)
    # Qwen3-30B-A3B at batch 8: 128 x (1 - (15/16)^8) = 51.62 of 128 experts per layer
    assert expected_distinct_experts(128, 8, 8) == pytest.approx(51.62, abs=0.005)
    with pytest.raises(ValueError, match="experts_per_token"):
        expected_distinct_experts(8, 9, 1)
    with pytest.raises(ValueError, match="batch"):
        expected_distinct_experts(8, 2, 0)


def test_batch_decode_reads_the_distinct_experts_and_the_rest_once(
    capsys: pytest.CaptureFixture[str], config_file: Path
) -> None:
    report = size_json(capsys, config_file, "qwen3-30b-a3b", "--batch", "8", "--context", "1024")
    moe = report["moe"]
    total, experts = report["parameters"], moe["expert_parameters"]
    distinct = 128 * (1 - (1 - 8 / 128) ** 8)
    assert moe["distinct_experts_per_step"] == pytest.approx(distinct)
    read = 2 * (total - experts) + 2 * experts * distinct / 128
    assert moe["decode_weight_bytes_per_step"] == pytest.approx(read, abs=1)
    step = read + report["kv_cache_bytes"]
    h100 = gpu_row(report, "H100-SXM-80GB")
    assert h100["tokens_per_second"] == pytest.approx(8 * 3.35e12 * EFFICIENCY / step, rel=1e-6)
    # more than batch 1's reads, less than the whole model
    assert 2 * moe["active_parameters"] < read < report["weights_bytes"]


def test_compute_ceiling_counts_the_active_parameters() -> None:
    model = spec("gpt-oss-120b")
    workload = Workload(model=model, precision=Precision.FP8, batch=512, context_tokens=256)
    ceiling = compute_bound_tokens_per_second(H100, workload, EFFICIENCY)
    assert ceiling == pytest.approx(1979e12 * EFFICIENCY / (2 * model.active_parameters))
    dense_equivalent = 1979e12 * EFFICIENCY / (2 * model.parameters)
    assert ceiling > 20 * dense_equivalent, "5.7B active of 117B"


def test_decode_weight_bytes_of_a_dense_model_are_all_weights() -> None:
    dense = build_model_catalog().get("llama-3.1-8b")
    assert decode_weight_bytes(Workload(model=dense, batch=32)) == 2 * dense.parameters


# --- training, LoRA, QLoRA --------------------------------------------------------------


def test_full_training_keeps_gradients_and_adam_state_for_every_expert(
    capsys: pytest.CaptureFixture[str], config_file: Path
) -> None:
    report = size_json(capsys, config_file, "mixtral-8x7b", "--mode", "train")
    total = 46_702_792_704
    assert report["gradients_bytes"] == 4 * total
    assert report["optimizer_bytes"] == 12 * total, "fp32 master + m + v"
    assert report["trainable_parameters"] == total
    # training speed: 6 FLOPs per active parameter per token
    h100 = gpu_row(report, "H100-SXM-80GB")
    assert h100["tokens_per_second"] == pytest.approx(989e12 * 0.4 / (6 * 12_879_925_248), rel=1e-3)


def test_activations_follow_the_active_experts_width() -> None:
    """Korthikanti's 34 = 18 + 16 for a 4h MLP; Mixtral's token runs 2 x 14336 = 7h."""
    mixtral = spec("mixtral-8x7b")
    assert activation_factor(mixtral, 34.0) == pytest.approx(18 + 16 * 7 / 4)  # 46
    # DeepSeek-V3: 58 MoE layers of (8 + 1) x 2048 = 18432 wide, 3 dense layers
    deepseek = spec("deepseek-v3")
    moe_factor = 18 + 16 * (9 * 2048) / (4 * 7168)
    assert activation_factor(deepseek, 34.0) == pytest.approx((58 * moe_factor + 3 * 34) / 61)
    dense = build_model_catalog().get("llama-2-7b")
    assert activation_factor(dense, 34.0) == 34.0


def test_lora_adapts_every_expert_of_the_targeted_mlp_projections(
    capsys: pytest.CaptureFixture[str], config_file: Path
) -> None:
    report = size_json(capsys, config_file, "mixtral-8x7b", "--mode", "lora", "--lora-rank", "16")
    r, h, kv_width, width = 16, 4096, 8 * 128, 14336
    attention = r * ((h + h) + 2 * (h + kv_width) + (h + h))  # q, k, v, o
    experts = 8 * r * (2 * (h + width) + (width + h))  # gate, up, down of each expert
    assert report["trainable_parameters"] == 32 * (attention + experts)
    attention_only = size_json(
        capsys, config_file, "mixtral-8x7b", "--mode", "lora", "--lora-targets", "q,k,v,o"
    )
    assert attention_only["trainable_parameters"] == 32 * attention


def test_qlora_of_an_moe_quantizes_all_experts_and_trains_adapters(
    capsys: pytest.CaptureFixture[str], config_file: Path
) -> None:
    report = size_json(capsys, config_file, "mixtral-8x7b", "--mode", "qlora", "--context", "2048")
    parts = report["parts"]
    kept = 2 * 32000 * 4096 + (2 * 32 + 1) * 4096  # embeddings, head, norms
    assert parts["base_quantized_weights_bytes"] == pytest.approx(
        (46_702_792_704 - kept) / 2, abs=1
    )
    assert report["gradients_bytes"] > 0
    assert report["total_bytes"] < 48e9, "QLoRA of Mixtral 8x7B fits a 48 GB card"
    assert gpu_row(report, "L40S-48GB")["fits"] is True


def test_a_workload_object_with_an_moe_model_trains_at_the_active_rate() -> None:
    model = spec("qwen3-30b-a3b")
    lora = Workload(model=model, mode=Mode.LORA, context_tokens=2048)
    assert training_tokens_per_second(H100, lora) == pytest.approx(
        989e12 * 0.4 / (4 * model.active_parameters)
    )


def test_text_output_says_active_of_total(
    capsys: pytest.CaptureFixture[str], config_file: Path
) -> None:
    code = main(["size", "deepseek-v3", "--config", str(config_file), "--batch", "4"])
    out = capsys.readouterr().out
    assert code == 0
    flat = " ".join(out.split())
    assert "256 experts + 1 shared, 8 per token, on 58 layers" in flat
    assert "37.6B of 671B parameters active per token" in flat


# --- a published measured decode figure -------------------------------------------------

RTX_PRO_6000_BLACKWELL_BANDWIDTH = 1792e9
"""NVIDIA RTX PRO 6000 Blackwell datasheet: 96 GB GDDR7, 1,792 GB/s."""


def test_gpt_oss_20b_mxfp4_single_request_decode_against_a_published_measurement() -> None:
    """Millstone AI, "gpt-oss-20b MXFP4 on 1x RTX Pro 6000 Blackwell" (vLLM, 2026-01-28,
    millstoneai.com/inference-benchmark/gpt-oss-20b-mxfp4-1x-rtx-pro-6000-blackwell):
    generation speed of a single request 250.0 tok/s at 1K context, 105.5 at 128K.

    MXFP4 by name lays gpt-oss out as its checkpoint does (MXFP4 experts, bf16 attention,
    router and embeddings: 12.8 GiB). A step at 1K reads 4.88 GB of weights (the bf16 rest
    and 4 of 32 experts per layer) and 28 MB of KV: the roofline at the default 0.7 of
    bandwidth gives 256 tok/s, +2.3 % (vLLM streams at about 0.68 of peak). At 128K the
    cache of the 12 full-attention layers (3.2 GB) dominates and the roofline (155) is 47 %
    above the measurement: attention over a long cache runs below the roofline.
    """
    model = spec("gpt-oss-20b")
    short = Workload(model=model, quantization=MXFP4, context_tokens=1024)
    predicted = RTX_PRO_6000_BLACKWELL_BANDWIDTH * EFFICIENCY / decode_bytes_per_step(short)
    assert predicted == pytest.approx(250.0, rel=0.05)
    long = Workload(model=model, quantization=MXFP4, context_tokens=131072)
    predicted_long = RTX_PRO_6000_BLACKWELL_BANDWIDTH * EFFICIENCY / decode_bytes_per_step(long)
    assert 105.5 < predicted_long < 105.5 * 1.5


# --- the built-in catalog ---------------------------------------------------------------


@pytest.mark.parametrize("name", PUBLISHED)
def test_the_built_in_catalog_entry_counts_as_the_published_config_does(name: str) -> None:
    """models.toml's MoE entries (SPEC's, from the same config.json files) agree with the
    entries written here: same total, experts and active parameters."""
    built_in = build_model_catalog().get(name)
    here = spec(name)
    assert built_in.parameters == here.parameters
    assert built_in.expert_parameters == here.expert_parameters
    assert built_in.active_parameters == here.active_parameters


def test_mixtral_from_the_built_in_catalog_through_the_cli(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["size", "mixtral-8x7b", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    assert report["moe"]["active_parameters"] == pytest.approx(12.9e9, rel=0.005)
    assert gpu_row(report, "H100-SXM-80GB")["tokens_per_second"] == pytest.approx(90, rel=0.05)
