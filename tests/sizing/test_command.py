"""`gpuwatch size` through an argparse parser built here with `add_size_parser`."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from gpuwatch.cli.size import add_size_parser, run_size
from gpuwatch.sizing import (
    GpuCatalogEntry,
    ModelCatalogEntry,
    build_gpu_catalog,
    build_model_catalog,
    parse_param_count,
)
from gpuwatch.tco import RentVsBuyConfig

BREAKDOWN_KEYS = (
    "weights_bytes",
    "kv_cache_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "overhead_bytes",
    "total_bytes",
)
GPU_KEYS = (
    "name",
    "memory_bytes",
    "fits",
    "tokens_per_second",
    "usd_per_million_tokens_rented",
    "usd_per_million_tokens_owned",
)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpuwatch")
    add_size_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["size", *argv])


def size(capsys: pytest.CaptureFixture[str], *argv: str, **kwargs: Any) -> tuple[int, str, str]:
    code = run_size(parse(*argv), **kwargs)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def size_json(capsys: pytest.CaptureFixture[str], *argv: str, **kwargs: Any) -> dict[str, Any]:
    code, out, err = size(capsys, *argv, "--json", **kwargs)
    assert code == 0, err
    assert err == ""
    report: dict[str, Any] = json.loads(out)
    return report


# --- parameter counts -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("7e9", 7_000_000_000),
        ("7B", 7_000_000_000),
        ("70b", 70_000_000_000),
        ("1.5B", 1_500_000_000),
        ("125M", 125_000_000),
        ("125m", 125_000_000),
        ("350K", 350_000),
        ("1.8T", 1_800_000_000_000),
        (" 13 B ", 13_000_000_000),
        ("7_000_000_000", 7_000_000_000),
        ("6738415616", 6_738_415_616),
        ("7000000000.0", 7_000_000_000),
        ("1.2e+10", 12_000_000_000),
        ("0.5B", 500_000_000),
    ],
)
def test_parse_param_count(text: str, count: int) -> None:
    assert parse_param_count(text) == count


@pytest.mark.parametrize(
    "text", ["", "B", "seven", "7 GB", "-7B", "7BB", "0", "0.1", "7e9B2", "1e", "nan", "inf"]
)
def test_parse_param_count_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="parameter count"):
        parse_param_count(text)


# --- JSON -------------------------------------------------------------------------------


def test_json_has_the_breakdown_and_every_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    report = size_json(capsys, "llama-3.1-8b")
    for key in BREAKDOWN_KEYS:
        assert isinstance(report[key], int), key
    assert report["total_bytes"] == sum(report[key] for key in BREAKDOWN_KEYS[:-1])
    assert report["model"] == "llama-3.1-8b"
    assert report["parameters"] == 8_030_261_248
    assert (report["mode"], report["precision"]) == ("inference", "fp16")
    assert (report["context_tokens"], report["batch"], report["headroom"]) == (4096, 1, 0.1)
    assert report["kv_cache_tokens"] == 4096
    assert len(report["gpus"]) == 25
    for gpu in report["gpus"]:
        for key in GPU_KEYS:
            assert key in gpu, key
    assert report["rank_by"] == "usd-per-million-tokens"
    # issue 23 part 7: ranked by the whole shape's cost, no longer fitting GPUs first
    deployments = [gpu["deployment"] for gpu in report["gpus"]]
    assert all(d is not None for d in deployments)
    prices = [d["usd_per_million_tokens_rented"] for d in deployments]
    assert prices == sorted(prices)
    for gpu in report["gpus"]:
        if gpu["fits"]:
            assert gpu["deployment"]["shape"] == "1 GPU"
            assert gpu["deployment"]["tokens_per_second"] == pytest.approx(gpu["tokens_per_second"])


def test_json_for_a_bare_parameter_count(capsys: pytest.CaptureFixture[str]) -> None:
    report = size_json(capsys, "--params", "7B", "--efficiency", "1")
    assert report["model"] is None
    assert report["weights_bytes"] == 14 * 10**9
    # the KV cache of the derived LLaMA-7B shape (32 layers x 32 KV heads x 128), 4,096 tokens
    assert report["kv_cache_bytes"] == 2 * 32 * 32 * 128 * 2 * 4096
    assert report["kv_cache_tokens"] == 4096
    assert any("LLaMA-7B" in note and "KV cache" in note for note in report["notes"])
    h100 = next(gpu for gpu in report["gpus"] if gpu["name"] == "H100-SXM-80GB")
    assert h100["tokens_per_second"] == pytest.approx(3.35e12 / (14e9 + 2**31), rel=1e-9)
    assert h100["memory_bytes"] == 80 * 10**9


def test_a_bare_count_in_inference_sizes_its_kv_cache(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 17: `size --params 14B --context 32768 --batch 8` said KV cache 0 and fit an
    A100 40GB. It takes Qwen2.5-14B's shape (Qwen/Qwen2.5-14B config.json: 48 layers, 8
    KV heads, head dim 128), whose cache is 2 x 48 x 8 x 128 x 2 B per token: 51.5 GB."""
    report = size_json(capsys, "--params", "14B", "--context", "32768", "--batch", "8")
    assert report["architecture"]["name"] == "shape of Qwen2.5-14B"
    assert report["kv_cache_bytes"] == 2 * 48 * 8 * 128 * 2 * 32768 * 8  # 51.54 GB
    assert any("Qwen2.5-14B" in note and "KV cache" in note for note in report["notes"])
    a100 = next(gpu for gpu in report["gpus"] if gpu["name"] == "A100-SXM-40GB")
    assert a100["fits"] is False  # 85.1 GB x 1.1: three 40 GB cards
    assert a100["gpus_needed"] == 3


def test_json_training(capsys: pytest.CaptureFixture[str]) -> None:
    report = size_json(capsys, "--params", "7B", "--mode", "train")
    assert report["precision"] == "bf16"
    assert report["total_bytes"] - report["activations_bytes"] == 126 * 10**9
    assert report["trainable_parameters"] == 7 * 10**9
    fitting = [gpu["name"] for gpu in report["gpus"] if gpu["fits"]]
    assert fitting == ["B200-180GB", "B300-288GB"]
    a100 = next(gpu for gpu in report["gpus"] if gpu["name"] == "A100-SXM-80GB")
    assert a100["gpus_needed"] == 3  # 146.4 GB x 1.1 over 80 GB


def test_json_carries_the_architecture_and_assumptions(capsys: pytest.CaptureFixture[str]) -> None:
    """Enough to redo the sum: the shape, checkpointing, LoRA rank and targets, headroom."""
    report = size_json(capsys, "llama-2-7b", "--mode", "lora")
    arch = report["architecture"]
    assert {key: arch[key] for key in ("layers", "hidden_size", "kv_heads", "head_dim")} == {
        "layers": 32,
        "hidden_size": 4096,
        "kv_heads": 32,
        "head_dim": 128,
    }
    assert (arch["intermediate_size"], arch["vocab_size"]) == (11008, 32000)
    assumptions = report["assumptions"]
    assert assumptions["headroom"] == 0.1
    assert assumptions["overhead_ratio"] == 0.0
    assert assumptions["gradient_checkpointing"] is True
    assert assumptions["flash_attention"] is True
    assert (assumptions["lora_rank"], assumptions["lora_targets"]) == (
        16,
        ["q", "k", "v", "o", "gate", "up", "down"],
    )
    assert assumptions["adapter_precision"] == "fp32"
    assert assumptions["activations"] == "architecture"
    assert assumptions["activation_factor"] == 34
    # redo the activations from the JSON alone: layer inputs, one layer, fp32 logits
    s, b, h = report["context_tokens"], report["batch"], arch["hidden_size"]
    parts = report["parts"]
    assert parts["activations_stored_bytes"] == arch["layers"] * 2 * s * b * h
    assert parts["activations_working_layer_bytes"] == 34 * s * b * h
    assert parts["activations_logits_bytes"] == 16 * s * b * arch["vocab_size"]
    assert report["activations_bytes"] == sum(
        parts[key] for key in parts if key.startswith("activations_")
    )
    assert report["trainable_parameters"] == 39_976_960
    assert report["weights_bytes"] == 2 * report["parameters"] + parts["adapter_weights_bytes"]


def test_json_names_a_derived_architecture(capsys: pytest.CaptureFixture[str]) -> None:
    report = size_json(capsys, "--params", "13B", "--mode", "lora")
    assert report["model"] is None
    assert report["architecture"]["name"] == "shape of LLaMA-13B"
    assert report["architecture"]["layers"] == 40
    assert "LLaMA paper" in report["architecture"]["source"]
    assert any("give a MODEL" in note for note in report["notes"])
    inference = size_json(capsys, "--params", "13B")
    assert inference["architecture"]["name"] == "shape of LLaMA-13B"  # sizes the KV cache
    assert inference["assumptions"]["gradient_checkpointing"] is None


def test_context_and_batch_reach_training(capsys: pytest.CaptureFixture[str]) -> None:
    short = size_json(capsys, "llama-2-7b", "--mode", "train", "--context", "1024")
    long = size_json(capsys, "llama-2-7b", "--mode", "train", "--context", "2048", "--batch", "4")
    assert long["activations_bytes"] == 8 * short["activations_bytes"]
    assert long["weights_bytes"] == short["weights_bytes"]


def test_training_options_reach_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    base = size_json(capsys, "llama-2-7b", "--mode", "qlora")
    plain = size_json(capsys, "llama-2-7b", "--mode", "qlora", "--no-gradient-checkpointing")
    assert plain["activations_bytes"] > 5 * base["activations_bytes"]
    assert plain["assumptions"]["gradient_checkpointing"] is False
    no_flash = size_json(
        capsys, "llama-2-7b", "--mode", "train", "--no-flash-attention", "--context", "1024"
    )
    flash = size_json(capsys, "llama-2-7b", "--mode", "train", "--context", "1024")
    assert no_flash["activations_bytes"] - flash["activations_bytes"] == 32 * 5 * 32 * 1024**2
    ranked = size_json(
        capsys, "llama-2-7b", "--mode", "lora", "--lora-rank", "64", "--lora-targets", "q,v"
    )
    assert ranked["trainable_parameters"] == 32 * 64 * 2 * (4096 + 4096)
    assert ranked["assumptions"]["lora_targets"] == ["q", "v"]
    bf16 = size_json(capsys, "llama-2-7b", "--mode", "qlora", "--adapter-precision", "bf16")
    assert bf16["gradients_bytes"] == base["gradients_bytes"] // 2
    single = size_json(capsys, "llama-2-7b", "--mode", "qlora", "--no-double-quant")
    assert (
        single["parts"]["base_quantization_constants_bytes"]
        > 3 * (base["parts"]["base_quantization_constants_bytes"])
    )
    seed = size_json(capsys, "llama-2-7b", "--mode", "train", "--activations", "seed-001")
    assert seed["activations_bytes"] == 2 * 2 * seed["parameters"]
    assert seed["assumptions"]["activation_multiplier"] == 2.0


def test_overhead_option(capsys: pytest.CaptureFixture[str]) -> None:
    """The default overhead is the engine's parts; --overhead adds a fraction of the
    weights on top; --engine none --overhead 0.2 is seed 001's rule."""
    default = size_json(capsys, "--params", "7B")
    parts = default["parts"]
    engine = sum(value for key, value in parts.items() if key.startswith("overhead_"))
    assert default["overhead_bytes"] == engine == 2_198_841_590
    assert default["assumptions"]["overhead_ratio"] == 0.0
    assert default["assumptions"]["engine"] == "vllm"
    more = size_json(capsys, "--params", "7B", "--overhead", "0.1")
    assert more["overhead_bytes"] == engine + 14 * 10**8
    assert more["parts"]["overhead_weights_ratio_bytes"] == 14 * 10**8
    seed = size_json(capsys, "--params", "7B", "--engine", "none", "--overhead", "0.2")
    assert seed["overhead_bytes"] == round(0.2 * 14 * 10**9)
    none = size_json(capsys, "--params", "7B", "--engine", "none")
    assert none["overhead_bytes"] == 0
    assert none["assumptions"]["max_num_seqs"] is None
    training = size_json(capsys, "--params", "7B", "--mode", "train", "--overhead", "0.1")
    assert training["overhead_bytes"] == 14 * 10**8
    assert training["assumptions"]["overhead_ratio"] == 0.1


def test_utilization_takes_a_percentage_as_tco_does(capsys: pytest.CaptureFixture[str]) -> None:
    fraction = size_json(capsys, "llama-2-7b", "--utilization", "0.35")
    percent = size_json(capsys, "llama-2-7b", "--utilization", "35%")
    assert fraction["assumptions"]["utilization"] == percent["assumptions"]["utilization"] == 0.35
    assert fraction["gpus"] == percent["gpus"]


SEED_001_OWNING = (
    "--bare-card",
    "--facility",
    "owned",
    "--pue",
    "1",
    "--cost-of-capital",
    "0",
    "--ops-usd-per-year",
    "0",
)
"""Seed 001's owned cost: the card alone, board power, no interest, no operations."""


def test_the_owned_column_is_tcos_owned_cost(capsys: pytest.CaptureFixture[str]) -> None:
    """Owned $/1M = `gpuwatch tco`'s owned $/GPU-year (host share, 8 %, ops, colocation
    for a datacenter part) / (tokens/s x utilization x 3600 x 8760) x 1e6; the seed's
    options give seed 001's arithmetic."""
    default = size_json(capsys, "--params", "7B", "--efficiency", "1")
    seed = size_json(capsys, "--params", "7B", "--efficiency", "1", *SEED_001_OWNING)
    assumptions = default["assumptions"]
    assert (assumptions["pue"], assumptions["cost_of_capital"]) == (1.58, 0.08)
    assert (assumptions["ops_usd_per_year_per_gpu"], assumptions["host_share"]) == (462.5, True)
    h100 = next(g for g in default["gpus"] if g["name"] == "H100-SXM-80GB")
    h100_seed = next(g for g in seed["gpus"] if g["name"] == "H100-SXM-80GB")
    owned = RentVsBuyConfig().owned_usd_per_gpu_year(build_gpu_catalog().get("H100-SXM-80GB"))
    assert h100["owned_usd_per_gpu_year"] == pytest.approx(owned)
    assert (h100["facility"], h100["pue_applied"], h100["host_capex_usd"]) == (
        "colocation",
        1.0,
        pytest.approx(12_600),
    )
    tokens = h100["tokens_per_second"]
    assert h100["usd_per_million_tokens_owned"] == pytest.approx(
        owned / (tokens * 0.7 * 3600 * 8760) * 1e6
    )
    hourly = 30000 / (3 * 8760) + 0.7 * 0.12
    assert h100_seed["usd_per_million_tokens_owned"] == pytest.approx(
        hourly / (tokens * 0.7 * 3600) * 1e6
    )


def test_options_reach_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    base = size_json(capsys, "llama-2-70b", "--precision", "int4")
    longer = size_json(
        capsys, "llama-2-70b", "--precision", "int4", "--context", "8192", "--batch", "4"
    )
    assert longer["kv_cache_bytes"] == 8 * base["kv_cache_bytes"]
    strict = size_json(capsys, "llama-2-70b", "--precision", "int4", "--headroom", "1.0")
    assert [g["fits"] for g in strict["gpus"]].count(True) < [
        g["fits"] for g in base["gpus"]
    ].count(True)
    busy = size_json(capsys, "llama-2-70b", "--precision", "int4", "--utilization", "0.35")
    h100 = next(g for g in base["gpus"] if g["name"] == "H100-SXM-80GB")
    h100_busy = next(g for g in busy["gpus"] if g["name"] == "H100-SXM-80GB")
    assert h100_busy["usd_per_million_tokens_owned"] == pytest.approx(
        2 * h100["usd_per_million_tokens_owned"]
    )


def test_config_overrides_reach_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    report = size_json(
        capsys,
        "tiny",
        gpu_overrides=[GpuCatalogEntry(id="T4-16GB", rent_usd_per_hour=0.001)],
        extra_models=[
            ModelCatalogEntry(
                name="tiny", parameters=10**8, layers=4, hidden_size=512, attention_heads=8
            )
        ],
    )
    assert report["gpus"][0]["name"] == "T4-16GB"
    assert report["parameters"] == 10**8


# --- table ------------------------------------------------------------------------------


def test_table_shows_breakdown_and_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = size(capsys, "mistral-7b", "--mode", "qlora")
    assert code == 0, err
    assert err == ""
    assert "mistral-7b" in out
    assert "qlora" in out
    for word in ("weights", "gradients", "optimizer", "activations", "total"):
        assert word in out
    for gpu_id in ("H100-SXM-80GB", "T4-16GB", "RTX-3090-24GB", "RTX-6000-Ada-48GB"):
        assert gpu_id in out
    assert "architecture: mistral-7b: 32 layers, hidden 4096" in out
    assert "gradient checkpointing on" in out
    assert "paged AdamW" in out
    code, out, err = size(capsys, "llama-2-70b")
    assert "TP2" in out  # issue 23 part 7: the shape, where it said "no: needs 2"
    assert "TP2 over NVLink" in out


def test_table_fits_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The human-readable output stays readable on an 80-column terminal (a pipe gets
    full width instead: tests/test_pipes.py)."""
    monkeypatch.setenv("COLUMNS", "80")
    for argv in (("llama-2-7b", "--mode", "qlora"), ("--params", "65B", "--mode", "lora")):
        code, out, err = size(capsys, *argv)
        assert code == 0, err
        assert max(len(line) for line in out.splitlines()) <= 80


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("llama-4",), "unknown model 'llama-4'; known: llama-2-7b, llama-2-13b"),
        ((), "give a MODEL, --params N or --config-json PATH"),
        (("llama-2-7b", "--params", "7B"), "give a MODEL, --params N or --config-json PATH"),
        (("--params", "seven"), "--params: expected a parameter count"),
        (("--params", "7B", "--context", "0"), "context tokens must be positive"),
        (("--params", "7B", "--batch", "-1"), "batch must be positive"),
        (("--params", "7B", "--utilization", "0"), "--utilization must be in (0, 1]"),
        (("--params", "7B", "--utilization", "150%"), "--utilization must be in (0, 1]"),
        (("--params", "7B", "--utilization", "most"), "--utilization: expected a fraction"),
        (("--params", "7B", "--pue", "0.9"), "--pue: expected a finite number >= 1"),
        (("--params", "7B", "--gradient-checkpointing"), "does not apply to --mode inference"),
        (("--params", "7B", "--mode", "train", "--lora-rank", "8"), "--lora-rank does not apply"),
        (("--params", "7B", "--mode", "lora", "--no-double-quant"), "--double-quant does not"),
        (("--params", "7B", "--activations", "seed-001"), "--activations does not apply"),
        (("--params", "7B", "--mode", "lora", "--lora-rank", "0"), "LoRA rank must be positive"),
        (("--params", "7B", "--mode", "lora", "--lora-targets", "q,mlp"), "unknown module 'mlp'"),
        (("--params", "1000", "--mode", "qlora"), "would outnumber the model's 1,000"),
        (("--params", "7B", "--mode", "train", "--precision", "int4"), "train mode takes"),
        (("--params", "7B", "--mode", "qlora", "--precision", "bf16"), "qlora mode takes"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, out, err = size(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gpuwatch size: ")
    assert message in lines[0]
    assert "Traceback" not in err


def test_unknown_model_hints_at_params(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = size(capsys, "llama-4")
    known = ", ".join(build_model_catalog().names)  # the whole catalog, in order
    assert f"known: {known} (or give --params N)" in err


def test_argparse_rejects_unknown_choices() -> None:
    with pytest.raises(SystemExit) as caught:
        parse("--params", "7B", "--precision", "fp4")
    assert caught.value.code == 2
