"""The GPU and model catalogs: contents, NVML name matching, config overrides, errors."""

from __future__ import annotations

import pydantic
import pytest

from gpuwatch.simulate.presets import PRESETS
from gpuwatch.sizing import (
    CatalogError,
    GpuCatalogEntry,
    ModelCatalogEntry,
    UnknownGpuError,
    UnknownModelError,
    build_gpu_catalog,
    build_model_catalog,
)
from gpuwatch.sizing.gpus import REQUIRED_FIGURES, builtin_gpu_entries

GB = 10**9

GPU_IDS = (
    "H100-SXM-80GB",
    "H100-PCIe-80GB",
    "H100-NVL-94GB",
    "H200-141GB",
    "H200-NVL-141GB",
    "GH200-96GB",
    "GH200-144GB",
    "B200-180GB",
    "B300-288GB",
    "A100-SXM-80GB",
    "A100-PCIe-80GB",
    "A100-SXM-40GB",
    "A100-PCIe-40GB",
    "V100-SXM2-32GB",
    "V100-SXM2-16GB",
    "L40S-48GB",
    "L40-48GB",
    "RTX-PRO-6000-Blackwell-96GB",
    "RTX-6000-Ada-48GB",
    "RTX-A6000-48GB",
    "RTX-4090-24GB",
    "RTX-3090-24GB",
    "A10G-24GB",
    "L4-24GB",
    "T4-16GB",
)

MODEL_NAMES = (
    "llama-2-7b",
    "llama-2-13b",
    "llama-65b",
    "llama-2-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "mistral-7b",
    "qwen2.5-7b",
    "qwen2.5-72b",
    "gpt2-xl",
    "mistral-small-3.1-24b",
    "gemma-3-27b",
    "qwen3-8b",
    "qwen3-30b-a3b",
    "mixtral-8x7b",
    "llama-4-scout",
    "gpt-oss-20b",
    "gpt-oss-120b",
    # issue 23's families
    "qwen3-coder-480b-a35b",
    "kimi-k2",
    "llama-4-maverick",
    "glm-4.5-air",
    "minimax-m2.5",
    "qwen1.5-moe-a2.7b",
    "phi-4-mini",
    "phi-3-mini-4k",
    "smollm3-3b",
    "qwen3-vl-8b",
    "gemma-4-31b",
    "gemma-4-26b-a4b",
    "glm-4.5",
    "glm-4.6",
    "glm-4.7",
    "qwen2.5-vl-7b",
    "glm-4.7-flash",
    "phi-4",
    "deepseek-v3",
    "qwen3-next-80b-a3b",
    "deepseek-v3.2",
    "nemotron-h-8b",
    "llama-3.3-nemotron-super-49b",
    "nvidia-nemotron-3-nano-30b-a3b",
)

# --- GPU catalog ------------------------------------------------------------------------


def test_catalog_holds_the_listed_parts_in_order() -> None:
    catalog = build_gpu_catalog()
    assert catalog.ids == GPU_IDS
    assert [gpu.id for gpu in catalog] == list(GPU_IDS)
    assert len(catalog) == 25
    assert "h100-sxm-80gb" in catalog
    assert "H200-NVL-141GB" in catalog
    assert "GB200" not in catalog


def test_figures_are_in_base_units() -> None:
    h100 = build_gpu_catalog().get("H100-SXM-80GB")
    assert h100.memory_bytes == 80 * GB
    assert h100.memory_bandwidth_bytes_per_second == 3.35e12
    assert h100.bf16_flops_per_second == 989e12
    assert h100.fp8_flops_per_second == 1979e12
    assert h100.nvlink_bytes_per_second == 900e9
    assert h100.tdp_watts == 700
    assert h100.purchase_usd == 30000
    assert h100.rent_usd_per_hour == pytest.approx(55.04 / 8)
    assert h100.tier == "datacenter"
    a100 = build_gpu_catalog().get("A100-SXM-80GB")
    assert a100.fp8_flops_per_second is None
    assert build_gpu_catalog().get("L4-24GB").nvlink_bytes_per_second is None


@pytest.mark.parametrize(
    ("gpu_id", "tier"),
    [("RTX-4090-24GB", "consumer"), ("RTX-3090-24GB", "consumer")]
    + [("RTX-A6000-48GB", "workstation"), ("RTX-6000-Ada-48GB", "workstation")]
    + [("RTX-PRO-6000-Blackwell-96GB", "workstation")]
    + [(gpu_id, "datacenter") for gpu_id in GPU_IDS if not gpu_id.startswith("RTX")],
)
def test_tiers(gpu_id: str, tier: str) -> None:
    assert build_gpu_catalog().get(gpu_id).tier == tier


def test_every_figure_names_its_source() -> None:
    for gpu in build_gpu_catalog():
        for name in (
            "tier",
            "nvml_names",
            "memory_bytes",
            "memory_bandwidth_bytes_per_second",
            "bf16_flops_per_second",
            "tdp_watts",
            "purchase_usd",
            "rent_usd_per_hour",
        ):
            assert gpu.sources.get(name), (gpu.id, name)
        for name in ("fp8_flops_per_second", "fp4_flops_per_second", "nvlink_bytes_per_second"):
            if getattr(gpu, name) is not None:
                assert gpu.sources.get(name), (gpu.id, name)


def test_get_is_case_insensitive_and_unknown_ids_list_the_known() -> None:
    catalog = build_gpu_catalog()
    assert catalog.get("t4-16gb").id == "T4-16GB"
    with pytest.raises(UnknownGpuError) as caught:
        catalog.get("B200")
    message = str(caught.value)
    assert message.startswith("unknown GPU 'B200'; known: H100-SXM-80GB, H100-PCIe-80GB")
    assert isinstance(caught.value, KeyError)


@pytest.mark.parametrize(
    ("nvml_name", "gpu_id"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM-80GB"),
        ("NVIDIA H200", "H200-141GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"),
        ("NVIDIA H100 PCIe", "H100-PCIe-80GB"),
        ("NVIDIA H100 NVL", "H100-NVL-94GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"),
        ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
        ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
        ("NVIDIA B200", "B200-180GB"),
        ("NVIDIA H200 NVL", "H200-NVL-141GB"),
        ("NVIDIA GH200 480GB", "GH200-96GB"),
        ("NVIDIA GH200 144G HBM3e", "GH200-144GB"),
        ("NVIDIA B300 SXM6 AC", "B300-288GB"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-Blackwell-96GB"),
        ("NVIDIA L40", "L40-48GB"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada-48GB"),
        ("NVIDIA L40S", "L40S-48GB"),
        ("NVIDIA RTX A6000", "RTX-A6000-48GB"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090-24GB"),
        ("NVIDIA GeForce RTX 3090", "RTX-3090-24GB"),
        ("NVIDIA A10G", "A10G-24GB"),
        ("NVIDIA L4", "L4-24GB"),
        ("Tesla T4", "T4-16GB"),
        ("nvidia  h100 80gb hbm3 ", "H100-SXM-80GB"),
    ],
)
def test_nvml_names_match_their_part(nvml_name: str, gpu_id: str) -> None:
    match = build_gpu_catalog().match_nvml_name(nvml_name)
    assert match is not None
    assert match.id == gpu_id


@pytest.mark.parametrize(
    "nvml_name",
    [
        "NVIDIA H100",  # a prefix of three parts is none of them
        "NVIDIA A100-PCIE-80GB",
        "Tesla V100-PCIE-16GB",
        "Tesla V100-PCIE-32GB",
        "Tesla V100S-PCIE-32GB",
        "NVIDIA B200 MIG 1g.23gb",
        "NVIDIA GB200",
        "NVIDIA L40G",
        "NVIDIA RTX 6000",
        "NVIDIA A10",
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA GeForce RTX 3090 Ti",
        "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
        "",
    ],
)
def test_other_parts_match_nothing(nvml_name: str) -> None:
    assert build_gpu_catalog().match_nvml_name(nvml_name) is None


def test_simulated_presets_match_and_hold_at_least_the_catalog_memory() -> None:
    """The stand-in's NVML names find their catalog part, whose decimal memory is a floor."""
    catalog = build_gpu_catalog()
    for preset in PRESETS.values():
        gpu = catalog.match_nvml_name(preset.name)
        assert gpu is not None, preset.name
        assert gpu.memory_bytes <= preset.memory_bytes, gpu.id


# --- overrides --------------------------------------------------------------------------


def test_override_replaces_only_the_figures_it_sets() -> None:
    override = GpuCatalogEntry(id="h100-sxm-80gb", rent_usd_per_hour=3.9)
    h100 = build_gpu_catalog([override]).get("H100-SXM-80GB")
    assert h100.id == "H100-SXM-80GB"
    assert h100.rent_usd_per_hour == 3.9
    assert h100.sources["rent_usd_per_hour"] == "agent config"
    assert h100.purchase_usd == 30000
    assert h100.sources["purchase_usd"].startswith("seed 001")
    assert build_gpu_catalog().get("H100-SXM-80GB").rent_usd_per_hour == pytest.approx(6.88)


def test_override_can_name_its_source_and_nvml_names() -> None:
    override = GpuCatalogEntry.model_validate(
        {
            "id": "H100-SXM-80GB",
            "purchase_usd": 25000,
            "nvml_names": ["NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5*"],
            "sources": {"purchase_usd": "our invoice"},
        }
    )
    catalog = build_gpu_catalog([override])
    h100 = catalog.get("H100-SXM-80GB")
    assert h100.purchase_usd == 25000
    assert h100.sources["purchase_usd"] == "our invoice"
    assert h100.sources["nvml_names"] == "agent config"
    assert catalog.match_nvml_name("NVIDIA H100 SXM5 80GB") is h100


def test_new_part_from_config() -> None:
    rtx5090 = GpuCatalogEntry(
        id="RTX-5090-32GB",
        tier="consumer",
        nvml_names=("NVIDIA GeForce RTX 5090",),
        memory_gb=32,
        memory_bandwidth_gb_per_second=1792,
        bf16_tflops=209.5,
        tdp_watts=575,
        purchase_usd=1999,
        rent_usd_per_hour=0.69,
    )
    catalog = build_gpu_catalog([rtx5090])
    assert catalog.ids[-1] == "RTX-5090-32GB"
    match = catalog.match_nvml_name("NVIDIA GeForce RTX 5090")
    assert match is not None
    assert match.id == "RTX-5090-32GB"
    assert match.nvlink_bytes_per_second is None
    assert match.sources["memory_bytes"] == "agent config"
    assert catalog.match_nvml_name("NVIDIA H100 80GB HBM3").id == "H100-SXM-80GB"  # type: ignore[union-attr]


def test_new_part_must_be_complete() -> None:
    with pytest.raises(pydantic.ValidationError, match="needs: tier, memory_gb"):
        GpuCatalogEntry(id="B200-192GB", rent_usd_per_hour=6.0)
    incomplete = GpuCatalogEntry.model_construct(id="B200-192GB", rent_usd_per_hour=6.0)
    with pytest.raises(CatalogError, match="needs"):
        build_gpu_catalog([incomplete])
    assert REQUIRED_FIGURES[0] == "tier"


def test_config_embeds_a_list_of_entries_and_rejects_typos() -> None:
    class Section(pydantic.BaseModel):
        gpus: list[GpuCatalogEntry] = []

    section = Section.model_validate({"gpus": [{"id": "L4-24GB", "rent_usd_per_hour": 0.5}]})
    assert build_gpu_catalog(section.gpus).get("L4-24GB").rent_usd_per_hour == 0.5
    with pytest.raises(pydantic.ValidationError, match=r"gpus\.0\.rent_per_hour"):
        Section.model_validate({"gpus": [{"id": "L4-24GB", "rent_per_hour": 0.5}]})
    with pytest.raises(pydantic.ValidationError, match="greater than 0"):
        Section.model_validate({"gpus": [{"id": "L4-24GB", "memory_gb": -1}]})
    with pytest.raises(pydantic.ValidationError, match="unknown figures"):
        Section.model_validate({"gpus": [{"id": "L4-24GB", "sources": {"price": "x"}}]})


def test_glob_patterns_lose_to_exact_names() -> None:
    greedy = GpuCatalogEntry(
        id="ANY-NVIDIA",
        tier="datacenter",
        nvml_names=("NVIDIA *",),
        memory_gb=1,
        memory_bandwidth_gb_per_second=1,
        bf16_tflops=1,
        tdp_watts=1,
        purchase_usd=1,
        rent_usd_per_hour=1,
    )
    catalog = build_gpu_catalog([greedy])
    assert catalog.match_nvml_name("NVIDIA L4").id == "L4-24GB"  # type: ignore[union-attr]
    assert catalog.match_nvml_name("NVIDIA B200").id == "B200-180GB"  # type: ignore[union-attr]
    assert catalog.match_nvml_name("NVIDIA GB200").id == "ANY-NVIDIA"  # type: ignore[union-attr]


def test_builtin_entries_are_complete_and_cached() -> None:
    entries = builtin_gpu_entries()
    assert entries is builtin_gpu_entries()
    assert all(entry.sources for entry in entries)


# --- model catalog ----------------------------------------------------------------------


def test_model_catalog_holds_the_listed_models() -> None:
    assert build_model_catalog().names == MODEL_NAMES


@pytest.mark.parametrize(
    ("name", "figures"),
    [
        # parameters, layers, hidden size, attention heads, KV heads, head dim
        ("llama-2-7b", (6_738_415_616, 32, 4096, 32, 32, 128)),
        ("llama-2-13b", (13_015_864_320, 40, 5120, 40, 40, 128)),
        ("llama-65b", (65_285_660_672, 80, 8192, 64, 64, 128)),
        ("llama-2-70b", (68_976_648_192, 80, 8192, 64, 8, 128)),
        ("llama-3.1-8b", (8_030_261_248, 32, 4096, 32, 8, 128)),
        ("llama-3.1-70b", (70_553_706_496, 80, 8192, 64, 8, 128)),
        ("mistral-7b", (7_241_732_096, 32, 4096, 32, 8, 128)),
        ("qwen2.5-7b", (7_615_616_512, 28, 3584, 28, 4, 128)),
        ("qwen2.5-72b", (72_706_203_648, 80, 8192, 64, 8, 128)),
        ("gpt2-xl", (1_557_611_200, 48, 1600, 25, 25, 64)),
    ],
)
def test_model_figures(name: str, figures: tuple[int, ...]) -> None:
    model = build_model_catalog().get(name.upper())
    assert (
        model.parameters,
        model.layers,
        model.hidden_size,
        model.attention_heads,
        model.kv_heads,
        model.head_dim,
    ) == figures
    assert model.head_dim * model.attention_heads == model.hidden_size
    assert "config.json" in model.source


@pytest.mark.parametrize(
    "name",
    [
        "llama-2-7b",
        "llama-2-13b",
        "llama-65b",
        "llama-2-70b",
        "llama-3.1-8b",
        "llama-3.1-70b",
        "mistral-7b",
    ],
)
def test_llama_style_parameter_counts_follow_from_the_architecture(name: str) -> None:
    """No biases: attention, a SwiGLU MLP and two norms per layer, embeddings and head."""
    m = build_model_catalog().get(name)
    q, kv = m.attention_heads * m.head_dim, m.kv_heads * m.head_dim
    layer = m.hidden_size * (2 * q + 2 * kv) + 3 * m.hidden_size * m.mlp_size
    total = m.layers * layer + m.embedding_parameters + m.norm_parameters
    assert total == m.parameters
    assert m.assumed == ()


def test_model_catalog_architecture_extras() -> None:
    catalog = build_model_catalog()
    gpt2 = catalog.get("gpt2-xl")
    assert (gpt2.tied_embeddings, gpt2.gated_mlp, gpt2.mlp_size, gpt2.vocabulary) == (
        True,
        False,
        6400,
        50257,
    )
    assert catalog.get("mistral-7b").sliding_window == 4096
    # windows: Mistral 7B on every layer; Gemma 3 (1024), gpt-oss (128) and Llama 4's
    # chunks (8192) on some layers only
    windowed = {
        "mistral-7b",
        "gemma-3-27b",
        "gpt-oss-20b",
        "gpt-oss-120b",
        "llama-4-scout",
        "llama-4-maverick",  # chunked, as Scout
        "phi-3-mini-4k",  # every layer slides over 2,047 tokens
        "gemma-4-31b",
        "gemma-4-26b-a4b",
    }
    assert all((m.sliding_window is None) == (m.name not in windowed) for m in catalog)
    assert catalog.get("mistral-7b").full_layers == 0
    assert catalog.get("gemma-3-27b").full_layers == 10


def test_config_models_may_leave_out_mlp_width_and_vocabulary() -> None:
    entry = ModelCatalogEntry(
        name="mine", parameters=7 * 10**9, layers=32, hidden_size=4096, attention_heads=32
    )
    spec = entry.to_spec()
    assert (spec.mlp_size, spec.vocabulary, spec.sliding_window) == (11008, 32000, None)
    assert spec.assumed == ("MLP width 11008 (Llama's 8/3 rule)", "vocabulary 32000 (Llama 2's)")
    windowed = ModelCatalogEntry.model_validate(
        {**entry.model_dump(), "sliding_window": 1024, "intermediate_size": 14336}
    ).to_spec()
    assert windowed.kv_cache_tokens(8192) == 1024
    assert windowed.kv_cache_tokens(512) == 512
    with pytest.raises(pydantic.ValidationError, match="greater than 0"):
        ModelCatalogEntry.model_validate({**entry.model_dump(), "sliding_window": 0})


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(UnknownModelError) as caught:
        build_model_catalog().get("llama-4")
    assert str(caught.value) == f"unknown model 'llama-4'; known: {', '.join(MODEL_NAMES)}"
    assert isinstance(caught.value, KeyError)


def test_extra_models_add_and_replace() -> None:
    tiny = ModelCatalogEntry(
        name="tiny", parameters=1000, layers=2, hidden_size=64, attention_heads=4
    )
    llama = ModelCatalogEntry(
        name="LLAMA-2-7B", parameters=7_000_000_000, layers=32, hidden_size=4096, attention_heads=32
    )
    catalog = build_model_catalog([tiny, llama])
    spec = catalog.get("tiny")
    assert (spec.kv_heads, spec.head_dim, spec.source) == (4, 16, "agent config")
    assert catalog.get("llama-2-7b").parameters == 7_000_000_000
    assert len(catalog) == len(MODEL_NAMES) + 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"attention_heads": 32, "kv_heads": 5}, "must divide"),
        ({"attention_heads": 30}, "head_dim is needed"),
        ({"attention_heads": 32, "parameters": 0}, "greater than 0"),
        ({"attention_heads": 32, "typo": 1}, "Extra inputs"),
    ],
)
def test_model_entries_are_validated(fields: dict[str, int], message: str) -> None:
    data = {"name": "m", "parameters": 10, "layers": 2, "hidden_size": 4096, **fields}
    with pytest.raises(pydantic.ValidationError, match=message):
        ModelCatalogEntry.model_validate(data)
