"""`gpuwatch size --config-json PATH` and `--kv-cache-precision`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.cli.size import add_size_parser, run_size

CONFIGS = Path(__file__).parent / "configs"


def size(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="gpuwatch")
    add_size_parser(parser.add_subparsers(dest="command", required=True))
    code = run_size(parser.parse_args(["size", *argv]))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = size(capsys, *argv, "--json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def breakdown(data: dict[str, Any]) -> dict[str, Any]:
    return data


def test_config_json_sizes_the_model_it_describes(capsys: pytest.CaptureFixture[str]) -> None:
    data = report(capsys, "--config-json", str(CONFIGS / "llama-3.1-8b.json"), "--context", "8192")
    # meta-llama/Llama-3.1-8B: 8,030,261,248 parameters at fp16; KV 32 x 2 x 8 x 128 x 2 B
    assert breakdown(data)["weights_bytes"] == 2 * 8_030_261_248
    assert breakdown(data)["kv_cache_bytes"] == 131_072 * 8192


def test_kv_cache_fp8_halves_it(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(CONFIGS / "llama-3.1-8b.json")
    bf16 = breakdown(report(capsys, "--config-json", path, "--kv-cache-precision", "bf16"))
    fp8 = breakdown(report(capsys, "--config-json", path, "--kv-cache-precision", "fp8"))
    assert fp8["kv_cache_bytes"] * 2 == bf16["kv_cache_bytes"]
    assert fp8["weights_bytes"] == bf16["weights_bytes"]


def test_quantized_config_sets_the_weights(capsys: pytest.CaptureFixture[str]) -> None:
    plain = breakdown(report(capsys, "--config-json", str(CONFIGS / "llama-3.1-8b.json")))
    awq = breakdown(
        report(capsys, "--config-json", str(CONFIGS / "llama-3.1-8b-instruct-awq-int4.json"))
    )
    # 4-bit linear layers, 16-bit embeddings and head: well under half of fp16
    assert awq["weights_bytes"] < 0.4 * plain["weights_bytes"]


def test_precision_overrides_a_quantized_config(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23: a quantized config.json sizes as published unless --precision says
    otherwise, which sizes its architecture at that precision (once exit 2)."""
    fp8 = report(capsys, "--config-json", str(CONFIGS / "qwen3-8b-fp8.json"))
    assert fp8["precision_origin"] == "published"
    assert fp8["precision_why"] == "as published"
    bf16 = report(
        capsys, "--config-json", str(CONFIGS / "qwen3-8b-fp8.json"), "--precision", "bf16"
    )
    plain = report(capsys, "--config-json", str(CONFIGS / "qwen3-8b.json"), "--precision", "bf16")
    assert bf16["precision_origin"] == "precision"
    assert bf16["quantization"] is None
    assert bf16["weights_bytes"] == plain["weights_bytes"] > 1.7 * fp8["weights_bytes"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--config-json", "/nonexistent/config.json"), "--config-json /nonexistent"),
        (("llama-2-7b", "--config-json", "x.json"), "one of them"),
        (
            ("--config-json", str(CONFIGS / "qwen3-8b-fp8.json"), "--mode", "lora"),
            "inference only",
        ),
        (("--params", "7B", "--mode", "train", "--kv-cache-precision", "fp8"), "does not apply"),
    ],
)
def test_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, out, err = size(capsys, *argv)
    assert code == 2
    assert out == ""
    assert message in err


def test_bad_field_exits_2_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = json.loads((CONFIGS / "mixtral-8x7b.json").read_text())
    config["num_experts_per_tok"] = 9
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, _, err = size(capsys, "--config-json", str(path))
    assert code == 2
    assert "num_experts_per_tok (9)" in err


def test_mla_in_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(CONFIGS / "deepseek-v3.json")
    data = report(capsys, "--config-json", path, "--context", "1")
    # deepseek-ai/DeepSeek-V3: 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B
    assert data["kv_cache_bytes"] == 70_272
    assert data["architecture"]["kv_values_per_layer_per_token"] == 576
    code, out, _ = size(capsys, "--config-json", path)
    assert code == 0
    assert "latent attention caching 512 + 64 per layer" in " ".join(out.split())
