"""Quantized checkpoints: weight bytes by component against published checkpoint sizes."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from gpuwatch.cli.size import add_size_parser, run_size
from gpuwatch.sizing import (
    Mode,
    ModelSpec,
    Precision,
    Workload,
    build_gpu_catalog,
    build_model_catalog,
    fits,
    memory_requirement,
)
from gpuwatch.sizing.quantization import (
    AWQ_INT4,
    BNB_INT8,
    FP8,
    GPTQ_INT4,
    INT8,
    MXFP4,
    NF4,
    NVFP4,
    QuantizationConfigError,
    QuantizationScheme,
    parameter_split,
    weight_bytes_by_component,
)
from gpuwatch.sizing.quantization_config import scheme_from_quantization_config
from gpuwatch.sizing.throughput import (
    compute_bound_tokens_per_second,
    decode_tokens_per_second,
    decode_weight_bytes,
    math_peak_flops_per_second,
)
from gpuwatch.workloads import WorkloadDeclaration, declared_workload

GB = 10**9
GIB = 2**30
CONFIGS = Path(__file__).parent / "configs"

# openai/gpt-oss-120b and gpt-oss-20b config.json (huggingface.co/openai/gpt-oss-120b):
# hidden_size 2880, intermediate_size 2880, num_attention_heads 64, num_key_value_heads 8,
# head_dim 64, vocab_size 201088, num_local_experts 128 / 32, num_experts_per_tok 4,
# num_hidden_layers 36 / 24, untied head; quantization_config quant_method "mxfp4" with
# modules_to_not_convert self_attn, router, embed_tokens, lm_head. Total parameters from the
# gpt-oss model card (arXiv 2508.10925, table 1): 116.83B and 20.91B.
GPT_OSS_120B = ModelSpec(
    name="gpt-oss-120b",
    parameters=116_829_156_672,
    layers=36,
    hidden_size=2880,
    attention_heads=64,
    kv_heads=8,
    head_dim=64,
    intermediate_size=2880,
    vocab_size=201088,
    experts=128,
    experts_per_token=4,
)
GPT_OSS_20B = ModelSpec(
    name="gpt-oss-20b",
    parameters=20_914_757_184,
    layers=24,
    hidden_size=2880,
    attention_heads=64,
    kv_heads=8,
    head_dim=64,
    intermediate_size=2880,
    vocab_size=201088,
    experts=32,
    experts_per_token=4,
)
GPT_OSS_QUANTIZATION_CONFIG = {
    "quant_method": "mxfp4",
    "modules_to_not_convert": [
        "model.layers.*.self_attn",
        "model.layers.*.mlp.router",
        "model.embed_tokens",
        "lm_head",
    ],
}


def _total(model: str | ModelSpec, scheme: QuantizationScheme | None) -> int:
    spec = build_model_catalog().get(model) if isinstance(model, str) else model
    return weight_bytes_by_component(spec, scheme).total


def test_llama_31_8b_awq_int4_is_the_checkpoint_size() -> None:
    """hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4: safetensors total 5.73 GB
    (GEMM, group 128, zero point; embed_tokens and lm_head bf16)."""
    assert _total("llama-3.1-8b", AWQ_INT4) == pytest.approx(5.73 * GB, rel=0.05)


def test_llama_31_70b_awq_int4_is_39_8_gb() -> None:
    """hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4: ~39.8 GB by the same layout
    (issue 17's figure; the repo's file listing was not read, so this checks the layout
    carries over, not an independent size); 35.3 GB flat would fit a 48 GB card with
    headroom, this does not."""
    total = _total("llama-3.1-70b", AWQ_INT4)
    assert total == pytest.approx(39.8 * GB, rel=0.05)
    assert total > 39 * GB


def test_gptq_int4_adds_g_idx_to_the_awq_layout() -> None:
    """GPTQ (AutoGPTQ/GPTQModel): qweight int4, scales fp16 and qzeros int4 per group of
    128, a g_idx int32 per input channel: the AWQ layout plus a few MB. The checkpoint's
    own size is checked in `test_checkpoint_size_against_its_published_file_listing`."""
    awq = _total("llama-3.1-8b", AWQ_INT4)
    gptq = _total("llama-3.1-8b", GPTQ_INT4)
    assert 0 < gptq - awq < 0.01 * GB


# Published checkpoint sizes: the safetensors files of each repository as its Hugging Face
# "Files and versions" page lists them (decimal GB, three significant digits). Llama 3 8B
# has Llama 3.1 8B's shape (vocabulary 128,256, 8,030,261,248 parameters).
PUBLISHED_CHECKPOINTS = [
    pytest.param(
        "llama-3.1-8b",
        FP8,
        5.0 + 4.08,
        "nvidia/Llama-3.1-8B-Instruct-FP8 (main, ModelOpt): model-00001-of-00002 5 GB + "
        "model-00002-of-00002 4.08 GB",
        id="fp8-8b",
    ),
    pytest.param(
        "llama-3.1-8b",
        GPTQ_INT4,
        4.97 + 0.764,
        "hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4 (main): model-00001-of-00002 "
        "4.97 GB + model-00002-of-00002 764 MB",
        id="gptq-int4-8b",
    ),
    pytest.param(
        "llama-3.1-8b",
        INT8,
        5.0 + 4.08,
        "neuralmagic (RedHatAI)/Meta-Llama-3.1-8B-Instruct-quantized.w8a8 (1343a1c): "
        "model-00001-of-00002 5 GB + model-00002-of-00002 4.08 GB",
        id="int8-w8a8-8b",
    ),
    pytest.param(
        "llama-3.1-70b",
        INT8,
        72.7,
        "RedHatAI/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 (c1e6631): repository 72.7 GB "
        "(15 safetensors files; tokenizer and configs add 9 MB)",
        id="int8-w8a8-70b",
    ),
    pytest.param(
        "llama-3.1-8b",
        NF4,
        5.7,
        "unsloth/Meta-Llama-3.1-8B-bnb-4bit (bf24e63): model.safetensors 5.7 GB "
        "(bitsandbytes NF4, double quantization); the Instruct one lists 5.7 GB too",
        id="bnb-nf4-8b",
    ),
    pytest.param(
        "llama-3.1-8b",
        BNB_INT8,
        5.0 + 4.09,
        "alokabhishek/Meta-Llama-3-8B-Instruct-bnb-8bit (eb7a952): model-00001-of-00002 "
        "5 GB + model-00002-of-00002 4.09 GB (EkmekE/Llama3-8B-Instruct-BNB-8bit and "
        "pkalbhor/Meta-Llama-3-8B-Instruct-8bit list the same)",
        id="bnb-int8-8b",
    ),
    pytest.param(
        "llama-3.1-8b",
        NVFP4,
        4.98 + 1.05,
        "weiweiz1/llama3.1-8b-nvfp (compressed-tensors, ef1b0a1): model-00001-of-00002 "
        "4.98 GB + model-00002-of-00002 1.05 GB; a third-party upload without a model card "
        "(NVIDIA's nvidia/Llama-3.1-8B-Instruct-FP4 file sizes were not found)",
        id="nvfp4-8b",
    ),
]


@pytest.mark.parametrize(("model", "scheme", "published_gb", "source"), PUBLISHED_CHECKPOINTS)
def test_checkpoint_size_against_its_published_file_listing(
    model: str, scheme: QuantizationScheme, published_gb: float, source: str
) -> None:
    """Each layout's weight bytes within 5 % of a real checkpoint's files (issue 17); all
    of these are within 0.2 %."""
    assert source
    assert _total(model, scheme) == pytest.approx(published_gb * GB, rel=0.05)
    assert _total(model, scheme) == pytest.approx(published_gb * GB, rel=0.002)


def test_llama_31_8b_fp8_keeps_embeddings_and_head_16_bit() -> None:
    """neuralmagic (RedHatAI) Meta-Llama-3.1-8B-Instruct-FP8: ~9.1 GB of safetensors, the
    linear layers FP8, embed_tokens and lm_head (ignore: ["lm_head"]) bf16. JongYeop/
    Llama-3.1-8B-Instruct-FP8-W8A8-Dynamic-Per-Token lists "~8.5GB" (GiB: 9.1 GB)."""
    total = _total("llama-3.1-8b", FP8)
    assert total == pytest.approx(9.1 * GB, rel=0.05)
    assert total == pytest.approx(8.5 * GIB, rel=0.05)
    parts = weight_bytes_by_component(build_model_catalog().get("llama-3.1-8b"), FP8)
    assert parts.embeddings == parts.lm_head == 128256 * 4096 * 2


def test_gpt_oss_120b_mxfp4_experts_is_the_checkpoint_size() -> None:
    """gpt-oss model card (arXiv 2508.10925, table 1): checkpoint 60.8 GiB; expert weights
    MXFP4 (4.25 bits), attention, router, embeddings and head bf16."""
    scheme = scheme_from_quantization_config(GPT_OSS_QUANTIZATION_CONFIG)
    assert scheme.covers == "experts"
    total = _total(GPT_OSS_120B, scheme)
    assert total == pytest.approx(60.8 * GIB, rel=0.05)
    assert total < 80 * GB  # "fits a single 80 GB GPU"


def test_gpt_oss_20b_mxfp4_experts_is_the_checkpoint_size() -> None:
    """gpt-oss model card: gpt-oss-20b checkpoint 12.8 GiB; runs within 16 GB."""
    scheme = scheme_from_quantization_config(GPT_OSS_QUANTIZATION_CONFIG)
    total = _total(GPT_OSS_20B, scheme)
    assert total == pytest.approx(12.8 * GIB, rel=0.05)
    assert total < 16 * GB


def test_mxfp4_by_name_on_a_mixture_of_experts_is_the_gpt_oss_checkpoint_layout() -> None:
    """MXFP4 by name covers the routed experts of an MoE model, as gpt-oss's checkpoint
    does (attention, router, embeddings and head bf16): the same bytes as its config.json.
    Quantizing attention too (covers linear) would shrink it: the covers field is read."""
    checkpoint = scheme_from_quantization_config(GPT_OSS_QUANTIZATION_CONFIG)
    for model in (GPT_OSS_20B, GPT_OSS_120B):
        assert MXFP4.for_model(model).covers == "experts"
        assert _total(model, MXFP4) == _total(model, checkpoint)
        assert _total(model, replace(MXFP4, covers="linear")) < _total(model, checkpoint)
    assert _total(GPT_OSS_20B, MXFP4) == pytest.approx(12.8 * GIB, rel=0.005)


@pytest.mark.parametrize("scheme", [MXFP4, NVFP4], ids=["mxfp4", "nvfp4"])
def test_fp4_by_name_covers_every_linear_layer_of_a_dense_model(
    scheme: QuantizationScheme,
) -> None:
    """On a dense model the FP4 formats quantize every linear layer but the head (NVIDIA's
    dense FP4 checkpoints: "only the weights and activations of the linear operators within
    transformers blocks are quantized", nvidia/Llama-3.1-405B-Instruct-FP4)."""
    llama = build_model_catalog().get("llama-3.1-8b")
    assert scheme.for_model(llama).covers == "linear"
    parts = weight_bytes_by_component(llama, scheme)
    split = parameter_split(llama)
    assert parts.linear < split.linear  # quantized: under 1 byte per weight
    assert parts.embeddings == split.embeddings * 2


def test_nvfp4_by_name_on_a_mixture_of_experts_keeps_attention_16_bit() -> None:
    """nvidia/DeepSeek-R1-0528-NVFP4 hf_quant_config.json excludes lm_head and every
    layer's self_attn: NVFP4 by name on an MoE model covers the experts only."""
    deepseek = build_model_catalog().get("deepseek-v3")
    parts = weight_bytes_by_component(deepseek, NVFP4)
    split = parameter_split(deepseek)
    assert parts.linear == split.linear * 2
    assert parts.experts < split.experts


def test_cli_mxfp4_by_name_and_the_config_json_agree(capsys: pytest.CaptureFixture[str]) -> None:
    """`size gpt-oss-20b --precision mxfp4` and `size --config-json` (its checkpoint's own
    quantization_config) give the same weights: the model card's 12.8 GiB."""
    code, out, err = _size(capsys, "gpt-oss-20b", "--precision", "mxfp4", "--json")
    assert code == 0, err
    by_name = json.loads(out)
    config = str(CONFIGS / "gpt-oss-20b.json")
    code, out, err = _size(capsys, "--config-json", config, "--json")
    assert code == 0, err
    from_config = json.loads(out)
    assert by_name["weights_bytes"] == from_config["weights_bytes"]
    assert by_name["weights_bytes"] == pytest.approx(12.8 * GIB, rel=0.005)
    assert by_name["quantization"]["covers"] == "experts"


def test_block_format_bits_per_weight() -> None:
    """OCP Microscaling spec v1.0: MXFP4 = E2M1 + one E8M0 per 32 = 4.25 bits; NVIDIA
    NVFP4 (Blackwell): E2M1 + one E4M3 per 16 = 4.5 bits (plus fp32 per tensor); QLoRA paper
    (Dettmers et al. 2023, 3.1): double quantization cuts the constants from 32/64 = 0.5 to
    8/64 + 32/(64 x 256) = 0.127 bits per parameter; AWQ 4 + (16 + 4)/128."""
    assert MXFP4.bits_per_weight == 4.25
    assert NVFP4.bits_per_weight == 4.5
    assert NF4.bits_per_weight - 4 == pytest.approx(0.127, abs=0.0005)
    assert AWQ_INT4.bits_per_weight == pytest.approx(4.15625)


def test_llama_31_70b_nvfp4_is_about_40_gib() -> None:
    """JongYeop/Llama-3.1-70B-Instruct-NVFP4-W4A4 (llm-compressor, lm_head ignored):
    "~40GB", the card's GB being GiB as its FP8 sibling's are."""
    assert _total("llama-3.1-70b", NVFP4) == pytest.approx(40 * GIB, rel=0.05)


def test_bnb_nf4_8b_from_its_layout() -> None:
    """bitsandbytes NF4 with double quantization (QLoRA paper: 4 + 0.127 bits) on the
    linear layers; embeddings (not nn.Linear) and lm_head (transformers'
    get_keys_to_not_convert) stay 16-bit: 6.98B linear x 4.127 bits + 1.05B x 2 x 2 B,
    the 5.7 GB of unsloth/Meta-Llama-3.1-8B-bnb-4bit (PUBLISHED_CHECKPOINTS)."""
    config = {
        "quant_method": "bitsandbytes",
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True,
    }
    scheme = scheme_from_quantization_config(config)
    assert scheme.bits_per_weight == NF4.bits_per_weight
    split = parameter_split(build_model_catalog().get("llama-3.1-8b"))
    expected = (
        split.linear * (4 + 8 / 64 + 32 / (64 * 256)) / 8
        + (split.embeddings + split.lm_head + split.norms) * 2
    )
    assert _total("llama-3.1-8b", scheme) == pytest.approx(expected, rel=1e-6)
    assert _total("llama-3.1-8b", scheme) == pytest.approx(5.70 * GB, rel=0.005)


def test_parameter_split_sums_to_the_parameters() -> None:
    spec = build_model_catalog().get("llama-3.1-8b")
    split = parameter_split(spec)
    assert (
        split.embeddings + split.lm_head + split.norms + split.linear + split.experts
        == spec.parameters
    )
    assert split.experts == 0
    moe = parameter_split(GPT_OSS_120B)
    assert moe.experts == 36 * 128 * 3 * 2880 * 2880


def test_unquantized_is_two_bytes_per_parameter() -> None:
    spec = build_model_catalog().get("llama-3.1-8b")
    assert weight_bytes_by_component(spec, None).total == spec.parameters * 2


@pytest.mark.parametrize(
    ("config", "name", "bits", "group"),
    [
        # hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4 config.json
        (
            {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
            "awq-int4",
            4,
            128,
        ),
        # hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4 config.json
        (
            {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True},
            "gptq-int4",
            4,
            128,
        ),
        # deepseek-ai/DeepSeek-V3 config.json: fp8, e4m3, weight_block_size [128, 128]
        (
            {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
            "fp8",
            8,
            128 * 128,
        ),
        # nvidia/Llama-3.1-8B-Instruct-FP4 (ModelOpt) quantization_config
        (
            {"quant_method": "modelopt", "quant_algo": "NVFP4", "exclude_modules": ["lm_head"]},
            "nvfp4",
            4,
            16,
        ),
        # neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8 (compressed-tensors, per-tensor)
        (
            {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
                    }
                },
                "ignore": ["lm_head"],
            },
            "fp8",
            8,
            None,
        ),
    ],
)
def test_scheme_from_quantization_config(
    config: dict[str, object], name: str, bits: int, group: int | None
) -> None:
    scheme = scheme_from_quantization_config(config)
    assert (scheme.name, scheme.bits, scheme.group_size) == (name, bits, group)


def test_fp8_compute_and_weight_only_compute() -> None:
    assert FP8.compute == "fp8"
    assert AWQ_INT4.compute == "bf16"
    assert scheme_from_quantization_config({"quant_method": "fp8"}).compute == "fp8"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"quant_method": "eetq"}, "quant_method"),
        ({}, "quant_method"),
        ({"quant_method": "awq", "bits": 3}, "bits"),
        ({"quant_method": "gptq", "bits": "four"}, "bits"),
        ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size"),
        ({"quant_method": "modelopt", "quant_algo": "W8A8_SQ_PER_CHANNEL"}, "quant_algo"),
        ({"quant_method": "bitsandbytes"}, "load_in_4bit"),
        ({"quant_method": "awq", "modules_to_not_convert": "lm_head"}, "modules_to_not_convert"),
        ({"quant_method": "compressed-tensors"}, "config_groups"),
    ],
)
def test_bad_quantization_config_names_the_field(config: dict[str, object], field: str) -> None:
    with pytest.raises(QuantizationConfigError, match=field):
        scheme_from_quantization_config(config)


# --- through the memory model, the roofline and the CLI ---------------------------------


def test_int4_with_a_model_is_the_awq_layout_and_a_bare_count_stays_flat() -> None:
    """Issue 17: `size llama-3.1-8b --precision int4` gave 4.02 GB; the AWQ layout 5.73."""
    spec = build_model_catalog().get("llama-3.1-8b")
    served = memory_requirement(Workload(spec, precision=Precision.INT4))
    assert served.weights_bytes == weight_bytes_by_component(spec, AWQ_INT4).total
    assert dict(served.parts)["weights_embeddings_bytes"] == 128256 * 4096 * 2
    assert any("awq-int4" in note for note in served.notes)
    bare = memory_requirement(Workload(8 * GB, precision=Precision.INT4))
    assert bare.weights_bytes == 4 * GB  # seed 001's table: 0.5 B/param


def test_explicit_scheme_sets_the_storage_precision() -> None:
    spec = build_model_catalog().get("llama-3.1-8b")
    nf4 = Workload(spec, quantization=NF4)
    assert nf4.weight_precision is Precision.INT4
    assert Workload(spec, quantization=FP8).weight_precision is Precision.FP8
    assert memory_requirement(nf4).weights_bytes == pytest.approx(5.70 * GB, rel=0.01)


def test_quantization_is_inference_only() -> None:
    spec = build_model_catalog().get("llama-3.1-8b")
    with pytest.raises(ValueError, match="inference mode only"):
        Workload(spec, mode=Mode.QLORA, quantization=NF4)


def test_decode_streams_the_real_bytes() -> None:
    """Batch-1 decode is bandwidth-bound: tokens/s scale with 1 / (weights + KV), so the
    AWQ checkpoint's 5.73 GB (not 4.02) sets the speed."""
    h100 = build_gpu_catalog().get("H100-SXM-80GB")
    spec = build_model_catalog().get("llama-3.1-8b")
    workload = Workload(spec, precision=Precision.INT4)
    kv = memory_requirement(workload).kv_cache_bytes
    expected = h100.memory_bandwidth_bytes_per_second * 0.7 / (5_727_854_592 + kv)
    assert decode_tokens_per_second(h100, workload) == pytest.approx(expected, rel=1e-3)


def test_compute_ceiling_fp8_math_for_w8a8_bf16_for_weight_only() -> None:
    h100 = build_gpu_catalog().get("H100-SXM-80GB")
    spec = build_model_catalog().get("llama-3.1-8b")
    fp8 = Workload(spec, quantization=FP8, batch=256)
    awq = Workload(spec, quantization=AWQ_INT4, batch=256)
    assert h100.fp8_flops_per_second is not None
    assert math_peak_flops_per_second(h100, fp8) == h100.fp8_flops_per_second
    assert math_peak_flops_per_second(h100, awq) == h100.bf16_flops_per_second
    ratio = compute_bound_tokens_per_second(h100, fp8) / compute_bound_tokens_per_second(h100, awq)
    assert ratio == pytest.approx(h100.fp8_flops_per_second / h100.bf16_flops_per_second)


# --- FP4 math: the catalog's fp4_tflops ---------------------------------------------------


def test_nvfp4_w4a4_runs_at_the_fp4_peak_on_a_gpu_with_fp4_tensor_cores() -> None:
    """NVFP4 from ModelOpt quantizes weights and activations ("the weights and activations
    of the linear operators", nvidia/Llama-3.1-405B-Instruct-FP4): on a B200 (NVIDIA HGX
    B200 datasheet: FP4 18 PFLOPS with sparsity = 9,000 dense) the compute ceiling is the
    FP4 peak, 4x BF16; on an H100 (no FP4 tensor cores; vLLM runs NVFP4 weight-only through
    its FP4 Marlin kernel) BF16."""
    catalog = build_gpu_catalog()
    b200, h100 = catalog.get("B200-180GB"), catalog.get("H100-SXM-80GB")
    spec = build_model_catalog().get("llama-3.1-8b")
    nvfp4 = Workload(spec, quantization=NVFP4, batch=512)
    assert b200.fp4_flops_per_second == 9000e12
    assert math_peak_flops_per_second(b200, nvfp4) == 9000e12
    assert compute_bound_tokens_per_second(b200, nvfp4) == pytest.approx(
        9000e12 * 0.7 / (2 * spec.parameters)
    )
    assert h100.fp4_flops_per_second is None
    assert math_peak_flops_per_second(h100, nvfp4) == h100.bf16_flops_per_second


def test_gpt_oss_mxfp4_runs_fp4_weights_with_fp8_activations() -> None:
    """gpt-oss's MXFP4 experts in vLLM: on Blackwell FlashInfer's MoE takes "MXFP8
    activations and packed MXFP4 weights" (flashinfer.fused_moe.cute_dsl_fused_moe_mxfp8_mxfp4),
    an MMA that runs at the FP8 rate (CUTLASS, Blackwell functionality: kind::mxf8f6f4
    "2x Hopper Fp8", kind::mxf4nvf4 "4x"), so the FP8 peak, not the FP4 one; on Hopper
    Triton's matmul_ogs unpacks the weights to BF16 math (vLLM blog, 2025-08-05), so BF16,
    not the H100's FP8 peak."""
    catalog = build_gpu_catalog()
    b200, h100 = catalog.get("B200-180GB"), catalog.get("H100-SXM-80GB")
    gpt_oss = Workload(build_model_catalog().get("gpt-oss-120b"), quantization=MXFP4, batch=256)
    assert math_peak_flops_per_second(b200, gpt_oss) == b200.fp8_flops_per_second == 4500e12
    assert math_peak_flops_per_second(h100, gpt_oss) == h100.bf16_flops_per_second
    config = scheme_from_quantization_config(GPT_OSS_QUANTIZATION_CONFIG)
    assert config.compute == MXFP4.compute == "fp4-fp8"


def test_compressed_tensors_weight_only_nvfp4_computes_in_bf16() -> None:
    """llm-compressor's NVFP4A16 (``input_activations: null``) is weight-only: no FP4 math
    even on a B200; its W4A4 sibling (input activations NVFP4) gets the FP4 peak."""
    b200 = build_gpu_catalog().get("B200-180GB")
    spec = build_model_catalog().get("llama-3.1-8b")
    weights = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}
    group: dict[str, object] = {"targets": ["Linear"], "weights": weights}
    config = {
        "quant_method": "compressed-tensors",
        "format": "nvfp4-pack-quantized",
        "config_groups": {"group_0": {**group, "input_activations": None}},
        "ignore": ["lm_head"],
    }
    a16 = scheme_from_quantization_config(config)
    assert a16.compute == "bf16"
    assert math_peak_flops_per_second(b200, Workload(spec, quantization=a16)) == 2250e12
    activations = {**weights, "dynamic": "local"}
    config["config_groups"] = {"group_0": {**group, "input_activations": activations}}
    w4a4 = scheme_from_quantization_config(config)
    assert w4a4.compute == "fp4"
    assert math_peak_flops_per_second(b200, Workload(spec, quantization=w4a4)) == 9000e12


def _size(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="gpuwatch")
    add_size_parser(parser.add_subparsers(dest="command"))
    code = run_size(parser.parse_args(["size", *argv]))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("name", "gb"),
    [("awq-int4", 5.73), ("gptq-int4", 5.73), ("fp8", 9.1), ("nf4", 5.7), ("int4", 5.73)],
)
def test_cli_precision_takes_a_checkpoint_layout(
    capsys: pytest.CaptureFixture[str], name: str, gb: float
) -> None:
    code, out, err = _size(capsys, "llama-3.1-8b", "--precision", name, "--json")
    assert code == 0, err
    assert json.loads(out)["weights_bytes"] == pytest.approx(gb * GB, rel=0.05)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--params", "8B", "--precision", "awq-int4"), "needs a MODEL"),
        (("llama-3.1-8b", "--mode", "train", "--precision", "nvfp4"), "inference only"),
    ],
)
def test_cli_scheme_misuse_exits_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, out, err = _size(capsys, *argv)
    assert code == 2
    assert out == ""
    assert message in err


# --- declared [[workloads]] --------------------------------------------------------------


def test_declared_gpt_oss_in_mxfp4_is_its_checkpoint() -> None:
    """`precision = "mxfp4"` on gpt-oss-20b: MXFP4 experts, bf16 rest (12.8 GiB)."""
    declaration = WorkloadDeclaration(gpu_index=0, model="gpt-oss-20b", precision="mxfp4")
    workload = declared_workload(declaration, build_model_catalog())
    weights = memory_requirement(workload).weights_bytes
    assert weights == pytest.approx(12.8 * GIB, rel=0.005)
    checkpoint = scheme_from_quantization_config(GPT_OSS_QUANTIZATION_CONFIG)
    assert weights == _total(GPT_OSS_20B, checkpoint)


def test_declared_workload_takes_a_checkpoint_layout() -> None:
    declaration = WorkloadDeclaration(gpu_index=0, model="llama-3.1-8b", precision="awq-int4")
    workload = declared_workload(declaration, build_model_catalog())
    assert workload.quantization is AWQ_INT4
    assert memory_requirement(workload).weights_bytes == pytest.approx(5.73 * GB, rel=0.05)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"params": "8B", "precision": "nvfp4"}, "needs a model"),
        ({"model": "llama-3.1-8b", "precision": "nf4", "mode": "qlora"}, "mode inference"),
        ({"model": "llama-3.1-8b", "kv_cache_precision": "fp8", "mode": "lora"}, "no KV cache"),
        ({"model": "llama-3.1-8b", "kv_cache_precision": "int4"}, "kv_cache_precision"),
    ],
)
def test_declared_layout_misuse_names_precision(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        WorkloadDeclaration.model_validate({"gpu_index": 0, **fields})


def test_gpt_oss_120b_mxfp4_weights_fit_an_h100_and_decode_reads_mxfp4_experts() -> None:
    """gpt-oss model card: the 120b "fits a single 80 GB GPU" (H100) with MXFP4 experts.
    A batch-1 decode step reads the bf16 rest and 4 of 128 experts per layer at 4.25 bits."""
    scheme = scheme_from_quantization_config(GPT_OSS_QUANTIZATION_CONFIG)
    workload = Workload(GPT_OSS_120B, quantization=scheme, context_tokens=4096)
    h100 = build_gpu_catalog().get("H100-SXM-80GB")
    need = memory_requirement(workload)
    assert need.weights_bytes == pytest.approx(60.8 * GIB, rel=0.05)
    # weights, a 4k KV cache and vLLM's engine overhead (3.9 GB) fit the card with the 10 %
    # headroom: 69.3 GB x 1.1 = 76.2 of 80 (the 0.2 x weights rule said 78.6 GB of 72)
    assert need.weights_bytes + need.kv_cache_bytes < h100.memory_bytes
    assert fits(h100, need)
    parts = weight_bytes_by_component(GPT_OSS_120B, scheme)
    read = decode_weight_bytes(workload)
    assert read == pytest.approx(parts.total - parts.experts + parts.experts * 4 / 128, rel=1e-6)
    # the bf16-expert reading would be 3.76x the expert bytes: the layout reaches the roofline
    bf16 = decode_weight_bytes(Workload(GPT_OSS_120B, precision=Precision.BF16))
    assert read < 0.6 * bf16


def test_bnb_fp4_is_named_apart_from_mxfp4() -> None:
    config = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "fp4"}
    scheme = scheme_from_quantization_config(config)
    assert scheme.name == "bnb-fp4"
    assert scheme.bits_per_weight == 4 + 32 / 64  # no double quantization: fp32 absmax per 64


def test_cli_json_and_heading_name_the_layout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _size(capsys, "llama-3.1-8b", "--precision", "int4", "--json")
    assert code == 0, err
    layout = json.loads(out)["quantization"]
    assert (layout["scheme"], layout["group_size"], layout["from_precision"]) == (
        "awq-int4",
        128,
        True,
    )
    assert layout["bits_per_weight"] == pytest.approx(4.15625)
    code, out, err = _size(capsys, "llama-3.1-8b", "--precision", "fp16", "--json")
    assert json.loads(out)["quantization"] is None
    code, out, err = _size(capsys, "llama-3.1-8b", "--precision", "nvfp4")
    assert code == 0, err
    assert "inference, nvfp4, context" in " ".join(out.split())
