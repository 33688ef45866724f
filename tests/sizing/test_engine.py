"""The serving engine's overhead (`gpuwatch.sizing.engine`), by hand, and through the CLI."""

from __future__ import annotations

import json

import pytest

from gpuwatch.cli import main
from gpuwatch.sizing import MemoryAssumptions, Workload, build_model_catalog, memory_requirement
from gpuwatch.sizing.engine import (
    CUDA_CONTEXT_BYTES,
    CUDA_GRAPHS_BYTES,
    NON_TORCH_BYTES,
    EngineSettings,
    engine_overhead,
    forward_values_per_token,
)
from gpuwatch.sizing.workload import Mode, Precision

CATALOG = build_model_catalog()
H100_DEFAULTS = EngineSettings(max_num_seqs=1024, max_num_batched_tokens=8192)


def test_llama_3_1_8b_at_vllm_defaults_by_hand() -> None:
    """32 layers, hidden 4096, 32 heads, 8 KV heads of 128, MLP 14336, vocabulary 128256."""
    llama = CATALOG.get("llama-3.1-8b")
    engine = engine_overhead(llama, EngineSettings(), batch=1, compute_bytes=2.0)
    # widest point: residual + normed input 2 x 4096, then the gated MLP 3 x 14336
    assert forward_values_per_token(llama) == 2 * 4096 + 3 * 14336 == 51_200
    assert engine.forward_bytes == 2048 * 51_200 * 2 == 209_715_200
    assert engine.sampler_bytes == round(256 * 128_256 * 38.3) == 1_257_524_429
    assert engine.held_hidden_bytes == 2048 * 4096 * 2
    assert engine.activation_peak_bytes == 1_257_524_429 + 16_777_216  # the sampler's
    assert engine.total_bytes == 1_274_301_645 + CUDA_CONTEXT_BYTES + NON_TORCH_BYTES + (
        CUDA_GRAPHS_BYTES
    )
    assert engine.total_bytes == 3_142_612_419


def test_the_overhead_does_not_grow_with_the_weights() -> None:
    """Llama-3.1-70B holds 8.8x the 8B's weights; the engine's overhead barely moves (the
    same vocabulary), where 0.2 x weights put 28 GB on it."""
    small = memory_requirement(Workload(CATALOG.get("llama-3.1-8b"), precision=Precision.BF16))
    large = memory_requirement(Workload(CATALOG.get("llama-3.1-70b"), precision=Precision.BF16))
    assert large.weights_bytes > 8 * small.weights_bytes
    assert large.overhead_bytes < 1.01 * small.overhead_bytes
    assert large.overhead_bytes < 0.03 * large.weights_bytes


def test_a_wide_forward_pass_outgrows_a_small_sampler() -> None:
    """With one sequence the sampler is tiny and the forward pass of the batched tokens sets
    the peak; more batched tokens, more peak."""
    llama = CATALOG.get("llama-3.1-8b")
    one = EngineSettings(max_num_seqs=1, max_num_batched_tokens=8192)
    engine = engine_overhead(llama, one, batch=1, compute_bytes=2.0)
    assert engine.activation_peak_bytes == engine.forward_bytes == 8192 * 51_200 * 2
    fewer = engine_overhead(llama, EngineSettings(1, 2048), batch=1, compute_bytes=2.0)
    assert fewer.activation_peak_bytes == engine.activation_peak_bytes // 4


def test_a_larger_batch_than_max_num_seqs_is_sampled_and_capped_by_tokens() -> None:
    llama = CATALOG.get("llama-3.1-8b")
    assert engine_overhead(llama, EngineSettings(), batch=512, compute_bytes=2.0).sequences == 512
    capped = engine_overhead(llama, EngineSettings(256, 300), batch=512, compute_bytes=2.0)
    assert capped.sequences == 300


def test_mixture_of_experts_forward_counts_the_routed_experts() -> None:
    """Mixtral 8x7B: 2 experts of 14336 per token, each with its copy of the input."""
    mixtral = CATALOG.get("mixtral-8x7b")
    assert forward_values_per_token(mixtral) == 2 * 4096 + 3 * 2 * 14336 + 2 * 4096


def test_activation_peak_at_h100_defaults_matches_the_published_profile() -> None:
    """llm-d-benchmark's H100 profile (config_explorer/empirical-vllm-memory-results.md):
    Llama-3.1-8B-Instruct at 1,024 sequences and 8,192 batched tokens, 4.76 GiB."""
    llama = CATALOG.get("llama-3.1-8b")
    engine = engine_overhead(llama, H100_DEFAULTS, batch=1, compute_bytes=2.0)
    assert engine.activation_peak_bytes / 2**30 == pytest.approx(4.76, rel=0.01)
    assert engine.sampler_bytes > engine.forward_bytes


def test_settings_and_rules_are_validated() -> None:
    with pytest.raises(ValueError, match="max_num_seqs"):
        EngineSettings(max_num_seqs=0)
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        EngineSettings(max_num_batched_tokens=-1)
    with pytest.raises(ValueError, match="engine"):
        MemoryAssumptions(engine="sglang")  # type: ignore[arg-type]


def test_training_is_unchanged_by_the_engine() -> None:
    workload = Workload(CATALOG.get("llama-2-7b"), mode=Mode.LORA)
    assert memory_requirement(workload) == memory_requirement(
        workload, MemoryAssumptions(engine="none")
    )
    assert memory_requirement(workload).overhead_bytes == 0


def _size(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["size", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_shows_the_parts_and_the_settings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _size(
        capsys,
        "llama-3.1-8b",
        "--max-num-seqs",
        "1024",
        "--max-num-batched-tokens",
        "8192",
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    assumptions = report["assumptions"]
    assert (assumptions["engine"], assumptions["max_num_seqs"]) == ("vllm", 1024)
    assert assumptions["max_num_batched_tokens"] == 8192
    assert assumptions["sampler_bytes_per_logit"] == 38.3
    parts = report["parts"]
    overhead = [value for key, value in parts.items() if key.startswith("overhead_")]
    assert sum(overhead) == report["overhead_bytes"]
    assert parts["overhead_cuda_graphs_bytes"] == assumptions["cuda_graphs_bytes"] == 2**30
    code, out, _ = _size(capsys, "llama-3.1-8b")
    assert "engine vLLM (256 sequences, 2048 batched tokens)" in out
    assert "overhead: vLLM's profile run" in out
    code, out, _ = _size(capsys, "llama-3.1-8b", "--engine", "none")
    assert "no engine overhead" in out


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (("--mode", "train", "--engine", "vllm"), "--engine"),
        (("--mode", "lora", "--max-num-seqs", "8"), "--max-num-seqs"),
        (("--max-num-seqs", "0"), "--max-num-seqs"),
        (("--max-num-batched-tokens", "-5"), "--max-num-batched-tokens"),
    ],
)
def test_bad_engine_options_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], flag: str
) -> None:
    code, _, err = _size(capsys, "llama-3.1-8b", *argv)
    assert code == 2
    assert flag in err
    assert "Traceback" not in err
