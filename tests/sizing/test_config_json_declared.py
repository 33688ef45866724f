"""config.json in the agent config: ``[[sizing.models]] config_json`` and
``[[workloads]] config_json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwatch.config import validate_config
from gpuwatch.sizing import build_model_catalog
from gpuwatch.sizing.hf_config import catalog_entry_data
from gpuwatch.sizing.models import ModelCatalogEntry
from gpuwatch.workloads import WorkloadDeclaration, declared_workload

CONFIGS = Path(__file__).parent / "configs"


def test_sizing_model_from_config_json() -> None:
    entry = ModelCatalogEntry.model_validate(
        catalog_entry_data(
            {"name": "my-mixtral", "config_json": str(CONFIGS / "mixtral-8x7b.json")}
        )
    )
    spec = build_model_catalog([entry]).get("my-mixtral")
    # mistralai/Mixtral-8x7B-v0.1: 46.7B total, 8 experts, 2 per token
    assert spec.parameters == pytest.approx(46.7e9, rel=0.01)
    assert (spec.experts, spec.experts_per_token) == (8, 2)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"layers": 3}, "leave out layers"),
        ({"config_json": str(CONFIGS / "qwen3-8b-fp8.json")}, "quantization_config"),
        ({"config_json": "/nonexistent/config.json"}, "/nonexistent/config.json"),
    ],
)
def test_sizing_model_config_json_errors(extra: dict[str, object], named: str) -> None:
    data = {"name": "x", "config_json": str(CONFIGS / "qwen3-8b.json")} | extra
    with pytest.raises(ValueError, match=named):
        catalog_entry_data(data)


def test_declared_workload_from_quantized_config_json() -> None:
    declaration = WorkloadDeclaration(
        gpu_index=0, config_json=str(CONFIGS / "llama-3.1-8b-instruct-awq-int4.json")
    )
    workload = declared_workload(declaration, build_model_catalog())
    assert workload.quantization is not None
    assert workload.quantization.method == "awq"
    assert workload.parameters == 8_030_261_248  # meta-llama/Llama-3.1-8B
    assert declaration.label == "llama-3.1-8b-instruct-awq-int4"


def test_declaration_takes_exactly_one_model_key() -> None:
    with pytest.raises(ValueError, match="exactly one of model, params and config_json"):
        WorkloadDeclaration(gpu_index=0, model="llama-2-7b", config_json="x.json")


def test_agent_config_reports_config_json_problems(tmp_path: Path) -> None:
    bad = json.loads((CONFIGS / "qwen3-30b-a3b.json").read_text())
    bad["num_experts_per_tok"] = 200
    bad_path = tmp_path / "config.json"
    bad_path.write_text(json.dumps(bad))
    good = CONFIGS / "qwen3-30b-a3b.json"
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[[sizing.models]]\nname = "qwen3-30b"\nconfig_json = "{good}"\n\n'
        '[[workloads]]\ngpu_index = 0\nmodel = "qwen3-30b"\n\n'
        f'[[workloads]]\ngpu_index = 1\nconfig_json = "{bad_path}"\n'
    )
    errors = validate_config(config, {}).errors
    assert len(errors) == 1, errors
    assert errors[0].startswith("workloads.1.config_json: ")
    assert "num_experts_per_tok (200)" in errors[0]


def test_agent_config_names_the_bad_sizing_model(tmp_path: Path) -> None:
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[[sizing.models]]\nname = "q"\nconfig_json = "{CONFIGS / "qwen3-8b-fp8.json"}"\n'
    )
    errors = validate_config(config, {}).errors
    assert len(errors) == 1, errors
    assert errors[0].startswith("sizing.models: ")
    assert "entry 0: config_json" in errors[0]
    assert "quantization_config (fp8)" in errors[0]
