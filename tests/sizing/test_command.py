"""`gpuwatch size` through an argparse parser built here with `add_size_parser`."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from gpuwatch.sizing import GpuCatalogEntry, ModelCatalogEntry, parse_param_count
from gpuwatch.sizing.command import add_size_parser, run_size

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
    assert len(report["gpus"]) == 11
    for gpu in report["gpus"]:
        for key in GPU_KEYS:
            assert key in gpu, key
    fits = [gpu["fits"] for gpu in report["gpus"]]
    assert fits == sorted(fits, reverse=True)
    fitting = [gpu for gpu in report["gpus"] if gpu["fits"]]
    prices = [gpu["usd_per_million_tokens_rented"] for gpu in fitting]
    assert prices == sorted(prices)


def test_json_for_a_bare_parameter_count(capsys: pytest.CaptureFixture[str]) -> None:
    report = size_json(capsys, "--params", "7B", "--efficiency", "1")
    assert report["model"] is None
    assert report["weights_bytes"] == 14 * 10**9
    assert report["kv_cache_bytes"] == 0
    assert any("KV cache not computed" in note for note in report["notes"])
    h100 = next(gpu for gpu in report["gpus"] if gpu["name"] == "H100-SXM-80GB")
    assert h100["tokens_per_second"] == pytest.approx(239.3, abs=0.05)
    assert h100["memory_bytes"] == 80 * 10**9


def test_json_training(capsys: pytest.CaptureFixture[str]) -> None:
    report = size_json(capsys, "--params", "7B", "--mode", "train")
    assert report["precision"] == "bf16"
    assert report["total_bytes"] - report["activations_bytes"] == 126 * 10**9
    assert not any(gpu["fits"] for gpu in report["gpus"])
    a100 = next(gpu for gpu in report["gpus"] if gpu["name"] == "A100-SXM-80GB")
    assert a100["gpus_needed"] == 3  # 154 GB x 1.1 over 80 GB


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
    for gpu_id in ("H100-SXM-80GB", "T4-16GB", "RTX-3090-24GB"):
        assert gpu_id in out
    assert "no: needs 2" in out


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("llama-4",), "unknown model 'llama-4'; known: llama-2-7b, llama-2-13b"),
        ((), "give a MODEL or --params N"),
        (("llama-2-7b", "--params", "7B"), "give a MODEL or --params N"),
        (("--params", "seven"), "--params: expected a parameter count"),
        (("--params", "7B", "--context", "0"), "context tokens must be positive"),
        (("--params", "7B", "--batch", "-1"), "batch must be positive"),
        (("--params", "7B", "--headroom", "-0.5"), "headroom must be >= 0"),
        (("--params", "7B", "--efficiency", "2"), "efficiency must be in (0, 1]"),
        (("--params", "7B", "--utilization", "0"), "utilization must be in (0, 1]"),
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
    assert "gpt2-xl (or give --params N)" in err


def test_argparse_rejects_unknown_choices() -> None:
    with pytest.raises(SystemExit) as caught:
        parse("--params", "7B", "--precision", "fp4")
    assert caught.value.code == 2
