"""Skip lists applied module by module, ModelOpt's hf_quant_config.json, and a checkpoint
sized at its own precision by default (issue 23 parts 1-3)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.analysis.measured import served_model
from gpuwatch.cli import main
from gpuwatch.sizing.checkpoint_layout import LinearModule, linear_modules, skipped
from gpuwatch.sizing.hf_config import ConfigJsonError, load_config_json
from gpuwatch.sizing.models import build_model_catalog
from gpuwatch.sizing.quantization import (
    FP8,
    kept_parameters,
    parameter_split,
    weight_bytes_by_component,
)
from gpuwatch.sizing.quantization_config import scheme_from_quantization_config
from gpuwatch.sizing.workload import Precision, Workload
from gpuwatch.workloads import config_json_workload

CONFIGS = Path(__file__).parent / "configs"
GB = 1e9
GIB = 2**30


def _module(name: str) -> LinearModule:
    return LinearModule((name,), 1)


@pytest.mark.parametrize(
    ("entry", "name", "expected"),
    [
        # whole dot-separated parts: a layer's index is a part, gate is not gate_proj
        ("self_attn", "model.layers.3.self_attn.q_proj", True),
        ("model.layers.0.mlp", "model.layers.0.mlp.down_proj", True),
        ("model.layers.1.mlp", "model.layers.10.mlp.down_proj", False),
        ("model.layers.3.mlp.gate", "model.layers.3.mlp.gate", True),
        ("model.layers.3.mlp.gate", "model.layers.3.mlp.gate_proj", False),
        ("model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.k_proj", True),
        ("model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.q_proj", False),
        ("lm_head", "model.layers.0.mlp.down_proj", False),
        # wildcards over the name or a dotted prefix (gpt-oss, ModelOpt)
        ("model.layers.*.self_attn", "model.layers.7.self_attn.o_proj", True),
        ("*self_attn*", "model.layers.7.self_attn.o_proj", True),
        ("model.layers.*.self_attn", "model.layers.7.mlp.up_proj", False),
        # compressed-tensors' re: patterns, matched from the start
        ("re:.*self_attn.*", "model.layers.7.self_attn.o_proj", True),
        ("re:model.layers.1[0-9].mlp.*", "model.layers.12.mlp.up_proj", True),
        ("re:model.layers.1[0-9].mlp.*", "model.layers.2.mlp.up_proj", False),
        ("re:[", "model.layers.2.mlp.up_proj", False),  # a broken regex names nothing
        # a multimodal checkpoint's wrapper prefix reads as the text model's
        ("model.language_model.layers.0.mlp", "model.layers.0.mlp.up_proj", True),
    ],
)
def test_skip_list_entry_matching(entry: str, name: str, expected: bool) -> None:
    assert skipped(_module(name), (entry,)) is expected


def test_modules_add_up_to_the_linear_weights() -> None:
    """Every linear module's parameters sum to the model's linear and expert weights."""
    for name in ("llama-3.1-8b", "deepseek-v3", "gpt-oss-120b", "qwen3-30b-a3b", "gpt2-xl"):
        model = build_model_catalog().get(name)
        split = parameter_split(model)
        modules = linear_modules(model, split.linear)
        assert sum(m.parameters for m in modules if not m.expert) == split.linear, name
        assert sum(m.parameters for m in modules if m.expert) == split.experts, name


def _report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = main(["size", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_llama_405b_fp8_keeps_attention_and_the_end_layers_bf16(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """meta-llama/Llama-3.1-405B-Instruct-FP8 (fbgemm_fp8): the Llama 3 paper (arXiv:
    2407.21783, 6.2) quantizes the feed-forward layers but the first and last, never
    self-attention; its modules_to_not_convert lists those. 124 MLPs of 2.617B in FP8
    (one fp32 scale per row) and 81.4B parameters in BF16: 487.2 GB, not 811.7 GB."""
    path = CONFIGS / "llama-3.1-405b-instruct-fp8" / "config.json"
    data = _report(capsys, "--config-json", str(path), "--context", "1")
    mlp = 3 * 16384 * 53248
    fp8 = 124 * mlp
    rest = 405_853_388_800 - fp8
    rows = fp8 / 16384
    assert data["weights_bytes"] == pytest.approx(fp8 + rows * 4 + rest * 2, rel=1e-6)
    assert data["weights_bytes"] == pytest.approx(487.2 * GB, rel=0.001)
    # the old rule ("attn" in a skipped name: experts only) left it all 16-bit
    assert data["weights_bytes"] < 0.61 * 2 * 405_853_388_800
    assert data["quantization"]["modules_not_converted"] == 126 * 4 + 6 + 1


def test_a_dense_fp8_checkpoint_that_skips_one_attention_module() -> None:
    """Issue 23: an FP8 70B that skips one attention module came out 141 GB (all
    16-bit); it is the FP8 checkpoint with that one module's 151M weights in BF16."""
    loaded = load_config_json(CONFIGS / "llama-3.1-70b.json")
    model = loaded.spec
    skip = ("model.layers.0.self_attn.q_proj", "lm_head")
    config = {"quant_method": "fp8", "modules_to_not_convert": list(skip)}
    scheme = scheme_from_quantization_config(config)
    total = weight_bytes_by_component(model, scheme).total
    plain = weight_bytes_by_component(model, FP8).total
    q_proj = 8192 * 8192
    assert total == pytest.approx(plain + q_proj * (2 - 1 - 4 / 8192), rel=1e-6)
    assert total < 75 * GB
    assert kept_parameters(model, scheme) == kept_parameters(model, FP8) + q_proj


def test_gpt_oss_skip_list_keeps_its_published_size() -> None:
    """gpt-oss's modules_to_not_convert (self_attn, router, embed_tokens, lm_head) applied
    as a skip list leaves the 60.8 GiB of the model card (Table 1)."""
    loaded = load_config_json(CONFIGS / "gpt-oss-120b.json")
    assert loaded.quantization is not None
    parts = weight_bytes_by_component(loaded.spec, loaded.quantization)
    assert parts.total / GIB == pytest.approx(60.77, abs=0.005)


def test_modelopt_hf_quant_config_beside_config_json(tmp_path: Path) -> None:
    """nvidia/Llama-3.1-70B-Instruct-FP8's config.json has no quantization_config; its
    hf_quant_config.json says FP8 (lm_head excluded) with an FP8 KV cache, as vLLM's
    ModelOpt config reads it. Without the file the same config.json is BF16."""
    folder = CONFIGS / "llama-3.1-70b-instruct-fp8-nvidia"
    loaded = load_config_json(folder / "config.json")
    assert loaded.quantization is not None
    assert loaded.quantization.method == "modelopt"
    assert loaded.quantization.kv_cache == "fp8"
    workload = config_json_workload(str(folder / "config.json"), None, context=1)
    assert workload.kv_cache_bytes_per_value == 1.0
    assert workload.precision_origin == "published"
    assert weight_bytes_by_component(loaded.spec, loaded.quantization).total < 73 * GB
    alone = tmp_path / "config.json"
    shutil.copy(folder / "config.json", alone)
    assert load_config_json(alone).quantization is None
    (tmp_path / "hf_quant_config.json").write_text('{"quantization": []}', "utf-8")
    with pytest.raises(ConfigJsonError, match=r"hf_quant_config.json: quantization"):
        load_config_json(alone)


def test_nvfp4_hf_quant_config_skips_only_the_routers() -> None:
    """nvidia/Qwen3-235B-A22B-NVFP4: exclude_modules names each layer's router
    (model.layers.N.mlp.gate) and lm_head, so attention is NVFP4 too; group_size 16."""
    loaded = load_config_json(CONFIGS / "qwen3-235b-a22b-nvfp4" / "config.json")
    scheme = loaded.quantization
    assert scheme is not None
    assert (scheme.name, scheme.group_size, scheme.kv_cache) == ("nvfp4", 16, "fp8")
    model = loaded.spec
    split = parameter_split(model)
    routers = model.layers * model.hidden_size * model.experts
    expected = split.embeddings + split.lm_head + split.norms + routers
    assert kept_parameters(model, scheme) == expected


def test_catalog_model_sizes_as_published(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23: `size gpt-oss-120b` said 233.7 GB (fp16) for a 60.8 GiB MXFP4 checkpoint
    and deepseek-v3 1.34 TB for an FP8 one; --precision sizes the architecture at it."""
    oss = _report(capsys, "gpt-oss-120b", "--context", "1")
    assert oss["weights_bytes"] / GIB == pytest.approx(60.77, abs=0.005)
    assert (oss["precision_origin"], oss["quantization"]["scheme"]) == ("published", "mxfp4")
    deepseek = _report(capsys, "deepseek-v3", "--context", "1")
    assert deepseek["precision"] == "fp8"
    assert deepseek["weights_bytes"] == pytest.approx(673.3 * GB, rel=0.001)
    bf16 = _report(capsys, "gpt-oss-120b", "--precision", "bf16", "--context", "1")
    assert bf16["precision_origin"] == "precision"
    assert bf16["weights_bytes"] == 2 * 116_829_156_672
    trained = _report(capsys, "gpt-oss-20b", "--mode", "lora", "--context", "16")
    assert trained["precision"] == "bf16"  # training does not start from MXFP4
    plain = _report(capsys, "llama-3.1-8b", "--context", "1")
    assert (plain["precision_origin"], plain["precision_why"]) == (
        "default",
        "the mode's default",
    )


def test_text_output_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", "gpt-oss-20b", "--context", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "weights mxfp4 (as published)" in out
    assert main(["size", "gpt-oss-20b", "--precision", "fp16", "--context", "1"]) == 0
    assert "weights fp16 (--precision)" in " ".join(capsys.readouterr().out.split())


def test_workload_declaration_overrides_a_quantized_config() -> None:
    """A [[workloads]] precision with a quantized config_json sizes the architecture at
    it (it was an error)."""
    path = str(CONFIGS / "qwen3-8b-fp8.json")
    published = config_json_workload(path, None)
    overridden = config_json_workload(path, "bf16")
    assert overridden.quantization is None
    assert overridden.weight_precision is Precision.BF16
    assert published.precision_origin == "published"
    with pytest.raises(ConfigJsonError, match="mode inference"):
        config_json_workload(path, None, mode="lora")


def test_measured_need_uses_the_published_precision() -> None:
    """A vLLM server serving gpt-oss-120b holds its MXFP4 checkpoint (the catalog's
    published_precision, which replaced measured.py's own table)."""
    model = build_model_catalog().get("gpt-oss-120b")
    served = served_model(model, None, "auto")
    assert served is not None
    assert served.weights_bytes / GIB == pytest.approx(60.77, abs=0.005)
    as_bf16 = served_model(model, "bf16", "auto")
    assert as_bf16 is not None
    assert as_bf16.weights_bytes == 2 * model.parameters
    workload = Workload(model)
    assert workload.precision_origin == "published"


def test_qwen_fp8_moe_skip_list_keeps_the_routers_bf16() -> None:
    """Qwen/Qwen3-30B-A3B-FP8's modules_to_not_convert names lm_head, every layer's norms
    and its router (model.layers.N.mlp.gate): the routers stay BF16, attention and the
    experts FP8 (the old rule quantized the routers; the norms name no linear module)."""
    loaded = load_config_json(CONFIGS / "qwen3-30b-a3b-fp8" / "config.json")
    scheme = loaded.quantization
    assert scheme is not None
    model = loaded.spec
    split = parameter_split(model)
    routers = model.layers * model.hidden_size * model.experts
    assert kept_parameters(model, scheme) == (
        split.embeddings + split.lm_head + split.norms + routers
    )
    parts = weight_bytes_by_component(model, scheme)
    assert parts.experts < split.experts * 1.01  # about one byte per expert weight
