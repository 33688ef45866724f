"""An inference server's model name (a Hugging Face repository id, as vLLM and SGLang put
it in `model_name`) matched to the sizing catalog: `match_served_model`."""

from __future__ import annotations

import pytest

from gpuwatch.sizing import (
    ModelCatalogEntry,
    build_model_catalog,
    match_served_model,
)

CATALOG = build_model_catalog()


@pytest.mark.parametrize(
    ("served", "model", "layout"),
    [
        # the repository ids of the models' cards on Hugging Face
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", None),
        ("meta-llama/Llama-3.1-8B", "llama-3.1-8b", None),
        ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b", None),
        ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "llama-3.1-8b", "awq-int4"),
        ("RedHatAI/Llama-3.1-8B-Instruct-FP8-dynamic", "llama-3.1-8b", "fp8"),
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "llama-3.1-8b", "int8"),
        ("unsloth/Llama-3.1-8B-Instruct-bnb-4bit", "llama-3.1-8b", "nf4"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b", None),
        ("Qwen/Qwen2.5-72B-Instruct-AWQ", "qwen2.5-72b", "awq-int4"),
        ("Qwen/Qwen3-8B-FP8", "qwen3-8b", "fp8"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b", None),
        ("mistralai/Mistral-7B-Instruct-v0.1", "mistral-7b", None),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b", None),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral-small-3.1-24b", None),
        ("google/gemma-3-27b-it", "gemma-3-27b", None),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout", None),
        ("openai/gpt-oss-20b", "gpt-oss-20b", None),
        ("openai/gpt-oss-120b", "gpt-oss-120b", None),
        ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3", None),
        ("openai-community/gpt2-xl", "gpt2-xl", None),
        # a local path (vLLM's default served name is the --model argument), a catalog name
        ("/models/Llama-3.1-70B-Instruct/", "llama-3.1-70b", None),
        ("LLAMA-3.1-8B", "llama-3.1-8b", None),
    ],
)
def test_real_names_match_their_catalog_model(served: str, model: str, layout: str | None) -> None:
    match = match_served_model(served, CATALOG)
    assert match.status == "matched"
    assert match.model is not None
    assert match.model.name == model
    assert match.layout == layout


@pytest.mark.parametrize(
    "served",
    [
        "meta-llama/Meta-Llama-3-8B-Instruct",  # Llama 3, not 3.1: another model
        "mistralai/Mistral-7B-Instruct-v0.3",  # v0.3 changed the vocabulary and window
        "deepseek-ai/DeepSeek-R1",
        "deepseek-ai/DeepSeek-V2",
        "mlabonne/Meta-Llama-3.1-8B-Instruct-abliterated",  # an extra word: not a guess
        "Qwen/Qwen3-4B",
        "",
    ],
)
def test_other_names_are_unknown(served: str) -> None:
    match = match_served_model(served, CATALOG)
    assert (match.status, match.model) == ("unknown", None)


def test_two_entries_from_one_repository_are_ambiguous() -> None:
    spec = CATALOG.get("llama-3.1-8b")
    twin = ModelCatalogEntry(
        name="our-llama",
        parameters=spec.parameters,
        layers=spec.layers,
        hidden_size=spec.hidden_size,
        attention_heads=spec.attention_heads,
        kv_heads=spec.kv_heads,
        head_dim=spec.head_dim,
        source="meta-llama/Llama-3.1-8B config.json, our copy",
    )
    catalog = build_model_catalog([twin])
    match = match_served_model("meta-llama/Llama-3.1-8B-Instruct", catalog)
    assert (match.status, match.model) == ("ambiguous", None)
    assert set(match.candidates) == {"llama-3.1-8b", "our-llama"}
    assert match_served_model("our-llama", catalog).status == "matched", "its own name"
