"""The memory need measured from an inference server's KV cache use: the arithmetic by
hand, the model resolution, the per-GPU split, and the lookback's quantiles."""

from __future__ import annotations

import logging

import pytest

from gpuwatch.analysis.measured import (
    MeasuredNeeds,
    kv_bytes_per_value,
    measured_need_bytes,
    served_model,
)
from gpuwatch.analysis.rolling import BucketedQuantiles, QuantileSketch
from gpuwatch.core.snapshot import GpuIdentity, GpuSample
from gpuwatch.sizing import build_model_catalog
from gpuwatch.tokens import TokenReading, TokenSourceConfig
from gpuwatch.tokens.kv import KvCacheReading

CATALOG = build_model_catalog()
NOW = 1_767_225_600.0
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_llama_3_1_8b_in_bf16_by_hand() -> None:
    """meta-llama/Llama-3.1-8B config.json: 32 layers, 8 KV heads of 128; the model card's
    8.03B parameters (8,030,261,248 in the safetensors index)."""
    model = served_model(CATALOG.get("llama-3.1-8b"), None, "auto")
    assert model is not None
    assert model.weights_bytes == 8_030_261_248 * 2 == 16_060_522_496  # 16.06 GB
    assert model.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2 == 131_072
    # vLLM's profile at its defaults: activation peak (256 x 128,256 logits x 38.3 B +
    # 2,048 x 4,096 x 2 B of hidden states), CUDA context, non-torch, CUDA graphs
    engine = 1_274_301_645 + 654_982_513 + 139_586_437 + 1_073_741_824
    assert model.overhead_bytes == engine == 3_142_612_419
    assert measured_need_bytes(model, 10_000) == 20_513_854_915
    # tensor parallel 2: half the weights and tokens, a whole engine overhead, on each GPU
    assert measured_need_bytes(model, 10_000, gpus=2) == 11_828_233_667
    assert 11_828_233_667 == (16_060_522_496 + 10_000 * 131_072) / 2 + 3_142_612_419
    assert measured_need_bytes(model, 0) == 16_060_522_496 + 3_142_612_419
    with pytest.raises(ValueError, match="one GPU"):
        measured_need_bytes(model, 1, gpus=0)


def test_an_fp8_cache_halves_a_16_bit_one() -> None:
    spec = CATALOG.get("llama-3.1-8b")
    for dtype in ("fp8", "fp8_e4m3", "fp8_e5m2", "FP8"):
        model = served_model(spec, None, dtype)
        assert model is not None
        assert model.kv_bytes_per_token == 65_536
    fp8_weights = served_model(spec, "fp8", "auto")
    assert fp8_weights is not None
    assert fp8_weights.kv_bytes_per_token == 131_072, "auto: the 16-bit compute precision"
    assert fp8_weights.weights_bytes < 0.6 * 16_060_522_496
    assert served_model(spec, None, "int3") is None, "a cache dtype not known here"
    assert kv_bytes_per_value(None, 2.0) == kv_bytes_per_value("auto", 2.0) == 2.0
    assert kv_bytes_per_value("float32", 2.0) == 4.0
    assert kv_bytes_per_value("half", 4.0) == 2.0


def test_latent_attention_and_published_layouts() -> None:
    """DeepSeek-V3 caches kv_lora_rank + qk_rope_head_dim = 576 values per layer (61
    layers) and is published in FP8; gpt-oss-120b's experts are MXFP4 (it fits one 80 GB
    GPU, OpenAI's model card) and it caches 8 KV heads of 64 on each of 36 layers."""
    deepseek = served_model(CATALOG.get("deepseek-v3"), None, "auto")
    assert deepseek is not None
    assert deepseek.kv_bytes_per_token == 61 * 576 * 2
    assert 600e9 < deepseek.weights_bytes < 800e9, "about 1 B per parameter, not 2"
    oss = served_model(CATALOG.get("gpt-oss-120b"), None, "auto")
    assert oss is not None
    assert oss.kv_bytes_per_token == 36 * 2 * 8 * 64 * 2
    assert oss.weights_bytes < 80e9
    bf16 = served_model(CATALOG.get("gpt-oss-120b"), "bf16", "auto")
    assert bf16 is not None
    assert bf16.weights_bytes > 200e9, "a configured precision wins over the layout"


H100_BYTES = 81_559 * 2**20  # NVML's total of an H100 80GB HBM3 (85,520,809,984 B)


def gpu(index: int, memory_total_bytes: int | None = H100_BYTES) -> GpuSample:
    identity = GpuIdentity(
        index,
        f"GPU-0000000{index}-0000",
        "NVIDIA H100 80GB HBM3",
        None,
        "0",
        memory_total_bytes,
        None,
        True,
    )
    return GpuSample(identity=identity, up=True)


def source(name: str, gpus: list[int | str], **fields: object) -> TokenSourceConfig:
    return TokenSourceConfig.model_validate(
        {"name": name, "url": "http://127.0.0.1:1/metrics", "gpus": gpus, **fields}
    )


def reading(
    name: str,
    used: float | None,
    *,
    models: tuple[str, ...] = (LLAMA,),
    dtype: str | None = "auto",
    at: float = NOW,
    up: bool = True,
    engines: int = 1,
) -> TokenReading:
    kv = KvCacheReading(used, None if used is None else 436_432.0, models, dtype, engines)
    return TokenReading(name, up, 0.0, 0.0, at, None, (), kv)


def test_a_source_on_two_gpus_splits_its_need() -> None:
    needs = MeasuredNeeds([source("tp2", [0, "GPU-00000001-0000"])], CATALOG)
    result = needs.per_gpu(NOW, [gpu(0), gpu(1), gpu(2)], [reading("tp2", 10_000)])
    assert set(result) == {"GPU-00000000-0000", "GPU-00000001-0000"}
    for sample in result.values():
        assert sample.need_bytes == 11_828_233_667  # each GPU's worker has its own overhead
        assert sample.model == "llama-3.1-8b"
        assert sample.sources == ("tp2",)
    assert needs.statuses()["tp2"].status == "measured"


def test_two_servers_on_one_gpu_add_up() -> None:
    needs = MeasuredNeeds([source("a", [0]), source("b", [0])], CATALOG)
    result = needs.per_gpu(NOW, [gpu(0)], [reading("a", 10_000), reading("b", 0)])
    assert result["GPU-00000000-0000"].need_bytes == 20_513_854_915 + 19_203_134_915
    only_one = needs.per_gpu(NOW, [gpu(0)], [reading("a", 10_000), reading("b", None)])
    assert only_one == {}, "half the GPU's servers measured is no measured need"


def test_a_configured_model_wins_over_the_name() -> None:
    needs = MeasuredNeeds([source("ft", [0], model="llama-3.1-8b")], CATALOG)
    result = needs.per_gpu(NOW, [gpu(0)], [reading("ft", 10_000, models=("our/finetune-v7",))])
    assert result["GPU-00000000-0000"].need_bytes == 20_513_854_915
    status = needs.statuses()["ft"]
    assert (status.served_model, status.model) == ("our/finetune-v7", "llama-3.1-8b")


def test_an_unknown_model_gives_no_need_one_log_line_and_a_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    needs = MeasuredNeeds([source("ft", [0])], CATALOG)
    caplog.set_level(logging.INFO, "gpuwatch.analysis.measured")
    for _ in range(3):
        result = needs.per_gpu(NOW, [gpu(0)], [reading("ft", 10_000, models=("our/ft-v7",))])
        assert result == {}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert "'our/ft-v7'" in lines[0]
    assert "set `model`" in lines[0]
    (family,) = needs.families()
    (sample,) = family.samples
    assert family.name == "gpuwatch_token_source_need_info"
    assert sample.labels == {
        "source": "ft",
        "served_model": "our/ft-v7",
        "model": "",
        "status": "unknown_model",
    }


@pytest.mark.parametrize(
    ("config", "read", "status"),
    [
        ({}, reading("s", 10_000, at=NOW - 46.0), "down"),  # older than 3 x 15 s
        ({}, reading("s", 10_000, up=False), "down"),
        ({"gpus": []}, reading("s", 10_000), "no_gpus"),
        ({}, reading("s", None), "no_kv_cache"),
        ({}, reading("s", 10_000, models=()), "no_model_name"),
        ({}, reading("s", 10_000, models=(LLAMA, "other")), "several_models"),
        ({}, reading("s", 10_000, dtype="int3"), "unknown_cache_dtype"),
        ({"config_json": "/nonexistent/config.json"}, reading("s", 10_000), "invalid_model"),
        ({}, reading("s", 10_000, at=NOW - 45.0), "measured"),
    ],
)
def test_why_a_source_gives_no_need(
    config: dict[str, object], read: TokenReading, status: str
) -> None:
    fields: dict[str, object] = {"gpus": [0], **config}
    needs = MeasuredNeeds([source("s", **fields)], CATALOG)  # type: ignore[arg-type]
    result = needs.per_gpu(NOW, [gpu(0)], [read])
    assert needs.statuses()["s"].status == status
    assert bool(result) == (status == "measured")


def test_sources_without_a_kv_cache_are_left_out() -> None:
    needs = MeasuredNeeds([source("t", [0], kind="tgi")], CATALOG)
    assert not needs.enabled
    assert needs.per_gpu(NOW, [gpu(0)], [reading("t", 1.0)]) == {}
    assert list(needs.families()) == []


# --- what a server may claim ---------------------------------------------------------


def test_data_parallel_engines_each_hold_the_weights() -> None:
    """Llama-3.1-8B, two data-parallel vLLM engines on GPUs 0 and 1 (one engine per GPU),
    20,000 tokens in use in all. By hand, each GPU holds one copy of the weights and of
    the overhead and half the tokens: 16,060,522,496 + 3,142,612,419 + 10,000 x 131,072
    = 20,513,854,915 B, as one engine alone on one GPU with 10,000 tokens. Counting the
    weights once gave (19,203,134,915 + 20,000 x 131,072) / 2 = 10,912,287,457.5 B, 47 %
    low. Two engines of tensor parallel 2 on four GPUs: half the weights and tokens of
    one engine and a whole overhead on each: (16,060,522,496 + 1,310,720,000) / 2 +
    3,142,612,419 = 11,828,233,667 B."""
    by_hand = 16_060_522_496 + 3_142_612_419 + 10_000 * 131_072
    assert by_hand == 20_513_854_915
    needs = MeasuredNeeds([source("dp2", [0, 1])], CATALOG)
    result = needs.per_gpu(NOW, [gpu(0), gpu(1)], [reading("dp2", 20_000, engines=2)])
    assert {s.need_bytes for s in result.values()} == {by_hand}
    assert needs.statuses()["dp2"].need_bytes == 2 * by_hand
    needs = MeasuredNeeds([source("dp2tp2", [0, 1, 2, 3])], CATALOG)
    four = [gpu(i) for i in range(4)]
    result = needs.per_gpu(NOW, four, [reading("dp2tp2", 20_000, engines=2)])
    assert len(result) == 4
    assert {s.need_bytes for s in result.values()} == {11_828_233_667}


def test_more_engines_than_gpus_is_implausible(caplog: pytest.LogCaptureFixture) -> None:
    needs = MeasuredNeeds([source("s", [0])], CATALOG)
    caplog.set_level(logging.INFO, "gpuwatch.analysis.measured")
    assert needs.per_gpu(NOW, [gpu(0)], [reading("s", 10_000, engines=2)]) == {}
    assert needs.statuses()["s"].status == "implausible_need"
    (line,) = [r.getMessage() for r in caplog.records]
    assert "2 engines on the 1 GPU(s)" in line


def test_a_need_above_the_gpus_memory_is_no_need(caplog: pytest.LogCaptureFixture) -> None:
    """A pool the hardware cannot hold: 1,000,000 tokens of Llama-3.1-8B are 131 GB of
    KV cache, more than an H100's 85.5 GB; on two H100s (75.2 GB each) it fits.
    The need of a GPU never exceeds its memory, and a GPU whose memory is unknown gets
    none (nothing bounds it)."""
    caplog.set_level(logging.INFO, "gpuwatch.analysis.measured")
    needs = MeasuredNeeds([source("s", [0])], CATALOG)
    for _ in range(3):
        assert needs.per_gpu(NOW, [gpu(0)], [reading("s", 1_000_000)]) == {}
    assert needs.statuses()["s"].status == "implausible_need"
    (line,) = [r.getMessage() for r in caplog.records]
    assert "beyond its GPUs" in line
    assert str(H100_BYTES) in line
    two = MeasuredNeeds([source("s", [0, 1])], CATALOG)
    result = two.per_gpu(NOW, [gpu(0), gpu(1)], [reading("s", 1_000_000)])
    assert all(s.need_bytes <= H100_BYTES for s in result.values())
    assert len(result) == 2
    unknown = MeasuredNeeds([source("s", [0])], CATALOG)
    assert unknown.per_gpu(NOW, [gpu(0, None)], [reading("s", 10_000)]) == {}


def test_two_servers_that_add_up_beyond_a_gpu_give_it_no_need(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each fits alone (58.6 GB), both do not (117.2 GB on an 85.5 GB GPU)."""
    caplog.set_level(logging.WARNING, "gpuwatch.analysis.measured")
    needs = MeasuredNeeds([source("a", [0]), source("b", [0])], CATALOG)
    for _ in range(2):
        result = needs.per_gpu(NOW, [gpu(0)], [reading("a", 300_000), reading("b", 300_000)])
        assert result == {}
    assert [s.status for s in needs.statuses().values()] == ["measured", "measured"]
    (line,) = [r.getMessage() for r in caplog.records]
    assert "GPU 0" in line


def test_a_flapping_kv_gauge_logs_one_line_per_outage(caplog: pytest.LogCaptureFixture) -> None:
    """A usage gauge that is there on one scrape and gone the next: the need is measured
    or not scrape by scrape, but the log says it once (WARNING), not on every scrape;
    three measured scrapes in a row end the outage (INFO)."""
    caplog.set_level(logging.DEBUG, "gpuwatch.analysis.measured")
    needs = MeasuredNeeds([source("s", [0])], CATALOG)
    for k in range(20):
        used = 10_000.0 if k % 2 == 0 else None
        assert bool(needs.per_gpu(NOW, [gpu(0)], [reading("s", used)])) == (used is not None)
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert [level for level, _ in said] == ["INFO", "WARNING"], said
    for _ in range(3):
        needs.per_gpu(NOW, [gpu(0)], [reading("s", 10_000)])
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert [level for level, _ in said] == ["INFO", "WARNING", "INFO"], said


# --- the lookback's quantiles --------------------------------------------------------


def test_the_sketch_is_at_most_one_percent_above_and_never_below() -> None:
    sketch = QuantileSketch()
    values = [float(v) for v in range(1, 1001)]
    for value in values:
        sketch.add(value * 1e7, 1.0)
    for q in (0.5, 0.9, 0.95, 0.99, 1.0):
        exact = values[round(q * len(values)) - 1] * 1e7
        got = sketch.quantile(q)
        assert got is not None
        assert exact <= got <= exact * 1.01
    assert QuantileSketch().quantile(0.95) is None
    zeros = QuantileSketch()
    zeros.add(0.0, 10.0)
    zeros.add(5.0, 1.0)
    assert zeros.quantile(0.5) == 0.0
    assert zeros.quantile(1.0) == pytest.approx(5.0, rel=0.01)


def test_the_sketch_weighs_by_time() -> None:
    sketch = QuantileSketch()
    sketch.add(1e9, 94.0)  # 94 s at 1 GB
    sketch.add(2e9, 6.0)  # 6 s at 2 GB: the top 6 % of the time
    assert sketch.quantile(0.95) == pytest.approx(2e9, rel=0.01)
    assert sketch.quantile(0.94) == pytest.approx(1e9, rel=0.01)


def test_the_window_forgets_what_left_it() -> None:
    window = BucketedQuantiles(3600.0)  # 60 buckets of 60 s (NOW is on a bucket's edge)
    window.add(NOW, 9e9, 60.0)
    for k in range(1, 60):
        window.add(NOW + 60.0 * k, 1e9, 60.0)
    assert window.quantile(NOW + 3599.0, 1.0) == pytest.approx(9e9, rel=0.01), "still in"
    assert window.quantile(NOW + 3599.0, 0.95) == pytest.approx(1e9, rel=0.01)
    assert window.quantile(NOW + 3600.0, 1.0) == pytest.approx(1e9, rel=0.01), "gone"
    assert window.quantile(NOW + 99_999.0, 0.95) is None, "everything expired"


def test_under_speed_a_reading_is_stale_after_three_scrape_periods_of_the_job() -> None:
    """At --speed 3000 the scrape job fires every 150 simulated seconds, not every 15."""
    needs = MeasuredNeeds([source("s", [0])], CATALOG, scrape_floor_seconds=150.0)
    assert needs.per_gpu(NOW, [gpu(0)], [reading("s", 10_000, at=NOW - 449.0)])
    assert not needs.per_gpu(NOW, [gpu(0)], [reading("s", 10_000, at=NOW - 451.0)])


def test_tensor_parallel_latent_attention_keeps_the_whole_cache_on_every_gpu() -> None:
    """vLLM keeps the whole latent cache on every tensor-parallel rank of a latent-attention
    (MLA) model: `ModelConfig.get_num_kv_heads` returns 1 head per GPU for MLA ("When using
    MLA during decode it becomes MQA"), else max(1, KV heads / t). DeepSeek-V3 on eight
    GPUs (TP 8) with 200,000 tokens in use: each GPU holds an eighth of the weights, a
    whole overhead and all 200,000 x 70,272 B = 14,054,400,000 B of latent cache, not an
    eighth of it (1,756,800,000 B). Llama's GQA cache (8 KV heads over TP 2) still splits."""
    model = served_model(CATALOG.get("deepseek-v3"), None, "auto")
    assert model is not None
    assert model.kv_bytes_per_token == 70_272
    per_gpu = model.weights_bytes / 8 + 200_000 * 70_272 + model.overhead_bytes
    assert measured_need_bytes(model, 200_000, gpus=8) == pytest.approx(per_gpu)
    # two data-parallel engines of TP 4 on eight GPUs: each engine's GPUs hold its tokens
    two = 2 * model.weights_bytes / 8 + 100_000 * 70_272 + model.overhead_bytes
    assert measured_need_bytes(model, 200_000, gpus=8, engines=2) == pytest.approx(two)
    needs = MeasuredNeeds([source("ds", list(range(8)))], CATALOG)
    eight = [gpu(i, memory_total_bytes=150_000_000_000) for i in range(8)]
    result = needs.per_gpu(NOW, eight, [reading("ds", 200_000, models=("deepseek-v3",))])
    assert {round(s.need_bytes) for s in result.values()} == {round(per_gpu)}
    llama = served_model(CATALOG.get("llama-3.1-8b"), None, "auto")
    assert llama is not None
    assert measured_need_bytes(llama, 10_000, gpus=2) == 11_828_233_667
