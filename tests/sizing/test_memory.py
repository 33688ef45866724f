"""The memory model against the seeds' worked examples (seed 001 above all), on literals."""

from __future__ import annotations

import math

import pytest

from gpuwatch.sizing import (
    GIB,
    MemoryAssumptions,
    Mode,
    ModelSpec,
    Precision,
    Workload,
    build_gpu_catalog,
    build_model_catalog,
    fits,
    gpus_needed,
    kv_cache_bytes,
    memory_requirement,
)

B = 10**9
GB = 10**9

SEED_70B = ModelSpec(
    name="seed-70b",
    parameters=70 * B,
    layers=80,
    hidden_size=8192,
    attention_heads=64,
    kv_heads=8,
    head_dim=128,
)


def gib(n_bytes: int) -> float:
    return round(n_bytes / GIB, 1)


@pytest.mark.parametrize(
    ("precision", "bytes_per_value"),
    [("fp32", 4), ("fp16", 2), ("bf16", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5)],
)
def test_bytes_per_value(precision: str, bytes_per_value: float) -> None:
    assert Precision(precision).bytes_per_value == bytes_per_value


# --- inference --------------------------------------------------------------------------


def test_7b_at_fp16_is_14_gb_of_weights() -> None:
    breakdown = memory_requirement(Workload(7 * B, precision=Precision.FP16))
    assert breakdown.weights_bytes == 14 * GB


def test_7b_fp16_plans_16_to_18_gb_with_overhead() -> None:
    """Seed 000: "for a 7B model at FP16, plan on roughly 16-18 GB including overhead"."""
    breakdown = memory_requirement(Workload(7 * B))
    assert breakdown.overhead_bytes == round(2.8 * GB)
    assert breakdown.total_bytes == round(16.8 * GB)
    assert breakdown.kv_cache_bytes == 0
    assert any("KV cache not computed" in note for note in breakdown.notes)


def test_7b_at_int4_drops_under_8_gb() -> None:
    """Seed 000: "Quantize to 4-bit and the same model drops under 8 GB"."""
    breakdown = memory_requirement(Workload(7 * B, precision=Precision.INT4))
    assert breakdown.weights_bytes == round(3.5 * GB)
    assert breakdown.total_bytes < 8 * GB


def test_13b_fp16_does_not_fit_24_gb_but_fits_48_gb() -> None:
    """Seed 000: 13B at FP16 is ~26 GB: a 24 GB card will not hold it, a 48 GB card will."""
    catalog = build_gpu_catalog()
    breakdown = memory_requirement(Workload(13 * B, precision=Precision.FP16))
    assert breakdown.weights_bytes == 26 * GB
    for gpu_id in ("RTX-4090-24GB", "RTX-3090-24GB", "A10G-24GB", "L4-24GB"):
        assert not fits(catalog.get(gpu_id), breakdown)
    for gpu_id in ("L40S-48GB", "RTX-A6000-48GB"):
        assert fits(catalog.get(gpu_id), breakdown)


def test_13b_int4_is_about_7_gb() -> None:
    """Seed 000: the 13B model quantized to 4-bit drops to roughly 7 GB."""
    assert memory_requirement(Workload(13 * B, precision=Precision.INT4)).weights_bytes == 6.5 * GB


def test_70b_int4_is_35_gb_and_fits_an_a100_80gb() -> None:
    """Seed 001: a 70B INT4 model fits one A100 80GB with room for a reasonable KV cache."""
    a100 = build_gpu_catalog().get("A100-SXM-80GB")
    bare = memory_requirement(Workload(70 * B, precision=Precision.INT4))
    assert bare.weights_bytes == 35 * GB
    assert fits(a100, bare)
    llama = build_model_catalog().get("llama-2-70b")
    served = memory_requirement(
        Workload(llama, precision=Precision.INT4, context_tokens=4096, batch=4)
    )
    assert served.kv_cache_bytes == pytest.approx(5.4 * GB, rel=0.01)  # 16-bit KV cache
    assert fits(a100, served)


@pytest.mark.parametrize(
    ("precision", "weights_gb", "a100s"),
    [("fp32", 280, 4), ("fp16", 140, 2), ("int8", 70, 1), ("int4", 35, 1)],
)
def test_quantization_table_70b(precision: str, weights_gb: int, a100s: int) -> None:
    """Seed 001's quantization table: 70B model size and minimum A100 80GB count."""
    breakdown = memory_requirement(Workload(70 * B, precision=Precision(precision)))
    assert breakdown.weights_bytes == weights_gb * GB
    a100 = build_gpu_catalog().get("A100-SXM-80GB")
    assert gpus_needed(breakdown.weights_bytes, a100) == a100s


def test_kv_cache_70b_8192_context_batch_32_is_85_9_gb() -> None:
    """Seed 001: 32 x 8192 x 80 layers x 128 head dim x 2 (K+V) x 2 bytes (x 8 KV heads)."""
    assert kv_cache_bytes(SEED_70B, 8192, 32, 2.0) == 85_899_345_920
    assert kv_cache_bytes(SEED_70B, 4096, 32, 2.0) == pytest.approx(42.9 * GB, abs=0.1 * GB)


def test_kv_cache_counts_gqa_through_kv_heads() -> None:
    mha = ModelSpec("mha", 7 * B, 32, 4096, 32, 32, 128)
    gqa = ModelSpec("gqa", 7 * B, 32, 4096, 32, 8, 128)
    assert kv_cache_bytes(mha, 4096, 1) == 4 * kv_cache_bytes(gqa, 4096, 1)
    assert kv_cache_bytes(mha, 4096, 1) == 2 * 32 * 32 * 128 * 2 * 4096


def test_70b_fp16_serving_at_8192_needs_three_h100s() -> None:
    """Seed 001: 140 GB weights + ~84 GB KV cache = ~224 GB, requiring 3x H100 80GB."""
    workload = Workload(SEED_70B, context_tokens=8192, batch=32)
    no_overhead = MemoryAssumptions(inference_overhead_ratio=0.0)
    breakdown = memory_requirement(workload, no_overhead)
    assert breakdown.weights_bytes == 140 * GB
    assert breakdown.total_bytes == 140 * GB + 85_899_345_920
    h100 = build_gpu_catalog().get("H100-SXM-80GB")
    assert gpus_needed(breakdown.total_bytes, h100, headroom=0.0) == 3


def test_kv_cache_precision_defaults_to_16_bit_for_quantized_weights() -> None:
    int4 = Workload(SEED_70B, precision=Precision.INT4, context_tokens=1024)
    fp8_kv = Workload(
        SEED_70B, precision=Precision.INT4, context_tokens=1024, kv_cache_precision=Precision.FP8
    )
    fp32 = Workload(SEED_70B, precision=Precision.FP32, context_tokens=1024)
    sixteen = kv_cache_bytes(SEED_70B, 1024, 1, 2.0)
    assert memory_requirement(int4).kv_cache_bytes == sixteen
    assert memory_requirement(fp8_kv).kv_cache_bytes == sixteen // 2
    assert memory_requirement(fp32).kv_cache_bytes == sixteen * 2


def test_kv_cache_grows_with_context_and_batch() -> None:
    small = memory_requirement(Workload(SEED_70B, context_tokens=2048, batch=1))
    large = memory_requirement(Workload(SEED_70B, context_tokens=4096, batch=8))
    assert large.kv_cache_bytes == 16 * small.kv_cache_bytes
    assert large.weights_bytes == small.weights_bytes


def test_gpt2_xl_fp16_is_about_3_gb() -> None:
    """Seed 004: GPT-2 (1.5B) inference needs ~3 GB."""
    gpt2 = build_model_catalog().get("gpt2-xl")
    assert memory_requirement(Workload(gpt2)).weights_bytes == pytest.approx(3.1 * GB, rel=0.01)


# --- full training ----------------------------------------------------------------------


def test_mixed_precision_adamw_is_18_bytes_per_parameter_plus_activations() -> None:
    breakdown = memory_requirement(Workload(1 * B, Mode.TRAIN))
    without_activations = breakdown.total_bytes - breakdown.activations_bytes
    assert without_activations == 18 * B
    assert breakdown.activations_bytes == 4 * B  # 2.0 x the bf16 weights


def test_7b_training_matches_seed_001_breakdown() -> None:
    """Seed 001's estimator output, printed in GiB and labelled GB."""
    breakdown = memory_requirement(Workload(7 * B, Mode.TRAIN))
    assert breakdown.weights_bytes == 14 * GB
    assert breakdown.gradients_bytes == 28 * GB
    assert breakdown.optimizer_bytes == 84 * GB
    assert breakdown.activations_bytes == 28 * GB
    assert breakdown.kv_cache_bytes == breakdown.overhead_bytes == 0
    assert breakdown.total_bytes - breakdown.activations_bytes == 126 * GB
    assert [
        gib(breakdown.weights_bytes),
        gib(breakdown.gradients_bytes),
        gib(breakdown.optimizer_bytes),
        gib(breakdown.activations_bytes),
        gib(breakdown.total_bytes),
    ] == [13.0, 26.1, 78.2, 26.1, 143.4]


def test_7b_training_does_not_fit_one_a100_80gb() -> None:
    catalog = build_gpu_catalog()
    breakdown = memory_requirement(Workload(7 * B, Mode.TRAIN))
    assert not fits(catalog.get("A100-SXM-80GB"), breakdown)
    assert not fits(catalog.get("RTX-4090-24GB"), breakdown)  # the "14 GB fits a 4090" trap
    assert fits(catalog.get("RTX-4090-24GB"), memory_requirement(Workload(7 * B)))


def test_13b_training_is_286_gb() -> None:
    """Seed 001 Q2: 26 + 52 + 156 + 52 = ~286 GB (its estimator prints 266.5 "GB")."""
    breakdown = memory_requirement(Workload(13 * B, Mode.TRAIN))
    assert (
        breakdown.weights_bytes,
        breakdown.gradients_bytes,
        breakdown.optimizer_bytes,
        breakdown.activations_bytes,
    ) == (26 * GB, 52 * GB, 156 * GB, 52 * GB)
    assert breakdown.total_bytes == 286 * GB
    assert gib(breakdown.total_bytes) == 266.4  # the seed's 266.5 is a rounding slip
    assert breakdown.total_bytes / 4 == pytest.approx(71.5 * GB)  # ZeRO-3 on 4 GPUs: ~72 GB


def test_70b_training_is_1540_gb() -> None:
    breakdown = memory_requirement(Workload(70 * B, Mode.TRAIN))
    assert breakdown.total_bytes == 1540 * GB
    assert gib(breakdown.total_bytes) == 1434.2  # the seed prints 1433.6


@pytest.mark.parametrize(("billions", "needed"), [(7, 2), (13, 4), (70, 20)])
def test_training_gpus_needed_matches_seed_001(billions: int, needed: int) -> None:
    """Seed 001 divides by 75 GiB (80.5 GB) per GPU; 80 GB decimal with no headroom agrees."""
    a100 = build_gpu_catalog().get("A100-SXM-80GB")
    breakdown = memory_requirement(Workload(billions * B, Mode.TRAIN))
    assert gpus_needed(breakdown.total_bytes, a100, headroom=0.0) == needed
    assert math.ceil(breakdown.total_bytes / GIB / 75) == needed


def test_fp32_training_has_no_master_copy() -> None:
    breakdown = memory_requirement(Workload(1 * B, Mode.TRAIN, Precision.FP32))
    assert breakdown.weights_bytes == 4 * B
    assert breakdown.gradients_bytes == 4 * B
    assert breakdown.optimizer_bytes == 8 * B
    assert breakdown.activations_bytes == 8 * B  # 2.0 x fp32 weights: seed's 4-8 B/param


def test_training_ignores_context_and_batch() -> None:
    short = memory_requirement(Workload(SEED_70B, Mode.TRAIN, context_tokens=512))
    long = memory_requirement(Workload(SEED_70B, Mode.TRAIN, context_tokens=32768, batch=8))
    assert short == long
    assert short.kv_cache_bytes == 0


# --- LoRA and QLoRA ---------------------------------------------------------------------


def test_qlora_7b_is_about_35_gb() -> None:
    """Seed 001: QLoRA needs 4-6 bytes per base parameter, about 35 GB for 7B."""
    breakdown = memory_requirement(Workload(7 * B, Mode.QLORA))
    assert breakdown.weights_bytes == round(3.5 * GB) + 70_000_000 * 2  # int4 base + adapter
    assert breakdown.gradients_bytes == 70_000_000 * 4
    assert breakdown.optimizer_bytes == 70_000_000 * 12
    assert breakdown.activations_bytes == 28 * GB
    assert breakdown.total_bytes == 32_760_000_000
    assert 4 * 7 * B <= breakdown.total_bytes <= 6 * 7 * B


def test_qlora_7b_fits_two_rtx_4090_not_one() -> None:
    """Seed 001: "fits on two RTX 4090s, or barely on one with careful sequence length"."""
    rtx4090 = build_gpu_catalog().get("RTX-4090-24GB")
    breakdown = memory_requirement(Workload(7 * B, Mode.QLORA))
    assert not fits(rtx4090, breakdown)
    assert gpus_needed(breakdown.total_bytes, rtx4090) == 2


def test_lora_keeps_16_bit_base_weights() -> None:
    lora = memory_requirement(Workload(7 * B, Mode.LORA))
    qlora = memory_requirement(Workload(7 * B, Mode.QLORA))
    assert lora.weights_bytes - qlora.weights_bytes == 14 * GB - round(3.5 * GB)
    assert lora.gradients_bytes == qlora.gradients_bytes
    assert lora.optimizer_bytes == qlora.optimizer_bytes
    assert lora.total_bytes == 43_260_000_000


def test_adapter_fraction_is_an_assumption() -> None:
    bigger = MemoryAssumptions(adapter_fraction=0.05)
    breakdown = memory_requirement(Workload(1 * B, Mode.QLORA), bigger)
    assert breakdown.optimizer_bytes == 50_000_000 * 12


# --- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "precision"),
    [
        (Mode.TRAIN, Precision.INT4),
        (Mode.TRAIN, Precision.FP8),
        (Mode.LORA, Precision.INT8),
        (Mode.QLORA, Precision.BF16),
    ],
)
def test_mode_rejects_precisions_it_cannot_use(mode: Mode, precision: Precision) -> None:
    with pytest.raises(ValueError, match=f"{mode} mode takes precision"):
        Workload(7 * B, mode, precision)


@pytest.mark.parametrize(
    ("mode", "precision"),
    [
        (Mode.INFERENCE, Precision.FP16),
        (Mode.TRAIN, Precision.BF16),
        (Mode.LORA, Precision.BF16),
        (Mode.QLORA, Precision.INT4),
    ],
)
def test_mode_default_precision(mode: Mode, precision: Precision) -> None:
    assert Workload(7 * B, mode).weight_precision is precision


@pytest.mark.parametrize(
    "kwargs",
    [{"model": 0}, {"model": 7 * B, "context_tokens": 0}, {"model": 7 * B, "batch": 0}],
)
def test_workload_rejects_non_positive_sizes(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        Workload(**kwargs)  # type: ignore[arg-type]


def test_assumptions_are_validated() -> None:
    with pytest.raises(ValueError, match="adapter_fraction"):
        MemoryAssumptions(adapter_fraction=0.0)
    with pytest.raises(ValueError, match="inference_overhead_ratio"):
        MemoryAssumptions(inference_overhead_ratio=-0.1)
