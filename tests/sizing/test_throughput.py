"""The throughput model against seed 001's bandwidth tables and roofline arithmetic."""

from __future__ import annotations

import pytest

from gpuwatch.sizing import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    GpuCatalog,
    Mode,
    Precision,
    Workload,
    build_gpu_catalog,
    build_model_catalog,
    decode_tokens_per_second,
    ridge_point_flops_per_byte,
    tokens_per_second,
    training_tokens_per_second,
)
from gpuwatch.sizing.throughput import (
    bandwidth_bound_tokens_per_second,
    compute_bound_tokens_per_second,
    decode_arithmetic_intensity,
    peak_flops_per_second,
)

B = 10**9

# Seed 001's tables divide bandwidth by the weights alone, the short-context limit: the
# bare counts below take a one-token context, whose KV cache (0.5 MB for the derived
# LLaMA-7B shape) is below the seeds' rounding; a bare count's KV cache at a real
# context is counted (test_kv_cache_reads_slow_decoding, tests/sizing/test_memory.py).


@pytest.fixture(scope="module")
def catalog() -> GpuCatalog:
    return build_gpu_catalog()


def test_default_efficiency_is_seed_001s() -> None:
    assert DEFAULT_BANDWIDTH_EFFICIENCY == 0.7


@pytest.mark.parametrize(
    ("gpu_id", "seven_b", "seventy_b"),
    [
        ("H100-SXM-80GB", 240, 24),
        ("A100-SXM-80GB", 143, 14),
        ("RTX-4090-24GB", 71, 7),
        ("RTX-3090-24GB", 67, None),
    ],
)
def test_seed_001_bandwidth_table_at_full_efficiency(
    catalog: GpuCatalog, gpu_id: str, seven_b: int, seventy_b: int | None
) -> None:
    gpu = catalog.get(gpu_id)
    assert decode_tokens_per_second(
        gpu, Workload(7 * B, context_tokens=1), efficiency=1.0
    ) == pytest.approx(
        seven_b,
        abs=1,  # the seed rounds 239.3 to "~240"
    )
    if seventy_b is not None:
        assert decode_tokens_per_second(
            gpu, Workload(70 * B, context_tokens=1), efficiency=1.0
        ) == pytest.approx(seventy_b, abs=0.5)


def test_h100_7b_fp16_is_3_35_tb_s_over_14_gb(catalog: GpuCatalog) -> None:
    h100 = catalog.get("H100-SXM-80GB")
    assert decode_tokens_per_second(h100, Workload(7 * B, context_tokens=1), 1.0) == pytest.approx(
        3.35e12 / 14e9, rel=1e-4
    )
    assert decode_tokens_per_second(h100, Workload(7 * B, context_tokens=1)) == pytest.approx(
        167.5, rel=1e-4
    )


def test_rtx_4090_7b_at_70_percent_is_20_ms_per_token(catalog: GpuCatalog) -> None:
    """Seed 001 Q3: ~14 GB / (1 TB/s x 0.7) = 20 ms. Throughput: ~50 tokens/sec."""
    tokens = decode_tokens_per_second(
        catalog.get("RTX-4090-24GB"), Workload(7 * B, context_tokens=1)
    )
    assert tokens == pytest.approx(50.0, rel=1e-4)
    assert 1000 / tokens == pytest.approx(20.0, rel=1e-4)


def test_h100_is_3_35_times_an_rtx_4090_at_18_75_times_the_price(catalog: GpuCatalog) -> None:
    """Seed 001: "3.4x faster but 18.75x more expensive" (it divides 239 by a rounded 70)."""
    h100, rtx = catalog.get("H100-SXM-80GB"), catalog.get("RTX-4090-24GB")
    speedup = decode_tokens_per_second(
        h100, Workload(7 * B, context_tokens=1)
    ) / decode_tokens_per_second(rtx, Workload(7 * B, context_tokens=1))
    assert speedup == pytest.approx(3.35)
    assert h100.purchase_usd / rtx.purchase_usd == 18.75


@pytest.mark.parametrize(
    ("gpu_id", "gb_per_s_per_kusd"),
    [("RTX-4090-24GB", 625), ("RTX-3090-24GB", 1337), ("H100-SXM-80GB", 112), ("L40S-48GB", 96)],
)
def test_bandwidth_per_thousand_dollars(
    catalog: GpuCatalog, gpu_id: str, gb_per_s_per_kusd: int
) -> None:
    """Seed 001's inference table, Bandwidth/$k column."""
    gpu = catalog.get(gpu_id)
    ratio = gpu.memory_bandwidth_bytes_per_second / 1e9 / (gpu.purchase_usd / 1000)
    assert ratio == pytest.approx(gb_per_s_per_kusd, abs=1)


def test_a100_ridge_point_is_156_flops_per_byte(catalog: GpuCatalog) -> None:
    """Seed 001 Q5: 312e12 / 2e12 = 156 FLOPs/byte."""
    assert ridge_point_flops_per_byte(catalog.get("A100-SXM-80GB")) == pytest.approx(156)


def test_batch_1_fp16_decode_is_1_flop_per_byte() -> None:
    """Seed 001: batch-1 decoding has an arithmetic intensity of ~1 FLOP/byte."""
    assert decode_arithmetic_intensity(Workload(7 * B, context_tokens=1)) == pytest.approx(
        1.0, rel=1e-4
    )
    assert decode_arithmetic_intensity(
        Workload(7 * B, batch=32, context_tokens=1)
    ) == pytest.approx(32.0, rel=1e-2)


def test_kv_cache_reads_slow_decoding(catalog: GpuCatalog) -> None:
    """With an architecture, each step also reads the batch's KV cache at full context."""
    h100 = catalog.get("H100-SXM-80GB")
    llama = build_model_catalog().get("llama-2-7b")
    weights = llama.parameters * 2
    kv = 2 * 32 * 32 * 128 * 2 * 4096
    expected = 3.35e12 / (weights + kv)
    assert decode_tokens_per_second(h100, Workload(llama), 1.0) == pytest.approx(expected)
    assert decode_tokens_per_second(
        h100, Workload(llama, context_tokens=128), 1.0
    ) > decode_tokens_per_second(h100, Workload(llama), 1.0)


def test_large_batches_hit_the_compute_ceiling(catalog: GpuCatalog) -> None:
    a100 = catalog.get("A100-SXM-80GB")
    ceiling = compute_bound_tokens_per_second(a100, Workload(7 * B, context_tokens=1), 1.0)
    assert ceiling == pytest.approx(312e12 / (2 * 7e9))
    batch_1 = Workload(7 * B, context_tokens=1)
    batch_1024 = Workload(7 * B, batch=1024, context_tokens=1)
    assert decode_tokens_per_second(a100, batch_1, 1.0) == bandwidth_bound_tokens_per_second(
        a100, batch_1, 1.0
    )
    # within 1 %: the batch's one-token KV caches and attention add a little
    assert decode_tokens_per_second(a100, batch_1024, 1.0) == pytest.approx(ceiling, rel=1e-2)
    # the crossover batch is the ridge point divided by batch-1 intensity (1 FLOP/byte)
    assert bandwidth_bound_tokens_per_second(
        a100, Workload(7 * B, batch=156, context_tokens=1), 1.0
    ) == pytest.approx(ceiling, rel=1e-2)


def test_fp8_uses_the_fp8_peak_where_the_part_has_it(catalog: GpuCatalog) -> None:
    h100, a100 = catalog.get("H100-SXM-80GB"), catalog.get("A100-SXM-80GB")
    assert peak_flops_per_second(h100, Precision.FP8) == 1979e12
    assert peak_flops_per_second(h100, Precision.BF16) == 989e12
    assert peak_flops_per_second(a100, Precision.FP8) == 312e12
    assert peak_flops_per_second(h100, Precision.INT4) == 989e12


def test_training_throughput_is_compute_bound(catalog: GpuCatalog) -> None:
    h100 = catalog.get("H100-SXM-80GB")
    full = training_tokens_per_second(h100, Workload(7 * B, Mode.TRAIN), mfu=1.0)
    lora = training_tokens_per_second(h100, Workload(7 * B, Mode.LORA), mfu=1.0)
    assert full == pytest.approx(989e12 / (6 * 7e9))
    assert lora == pytest.approx(989e12 / (4 * 7e9))
    assert tokens_per_second(h100, Workload(7 * B, Mode.TRAIN)) == pytest.approx(0.4 * full)
    assert tokens_per_second(h100, Workload(7 * B, context_tokens=1)) == pytest.approx(
        167.5, rel=1e-4
    )


@pytest.mark.parametrize("efficiency", [0.0, -0.1, 1.5])
def test_efficiency_must_be_a_fraction(catalog: GpuCatalog, efficiency: float) -> None:
    with pytest.raises(ValueError, match="efficiency"):
        decode_tokens_per_second(
            catalog.get("L4-24GB"), Workload(7 * B, context_tokens=1), efficiency
        )


def test_a_sliding_window_caps_the_kv_cache_read_per_decoding_step(catalog: GpuCatalog) -> None:
    """Mistral-7B reads at most 4096 tokens of KV cache per step, whatever the context."""
    mistral = build_model_catalog().get("mistral-7b")
    h100 = catalog.get("H100-SXM-80GB")
    window = decode_tokens_per_second(h100, Workload(mistral, context_tokens=4096, batch=8))
    longer = decode_tokens_per_second(h100, Workload(mistral, context_tokens=32768, batch=8))
    assert longer == window
    llama = build_model_catalog().get("llama-3.1-8b")
    assert decode_tokens_per_second(
        h100, Workload(llama, context_tokens=32768, batch=8)
    ) < decode_tokens_per_second(h100, Workload(llama, context_tokens=4096, batch=8))
