"""The live agent sizes a declared mixture-of-experts workload with every expert resident.

The demo scenario's GPU 3 is an H100 serving with vLLM (which preallocates ~90 % of the
card, so only a declaration says what the model needs). A `[[workloads]]` entry in the
config (it comes before the scenario's own declaration) says it serves Mixtral 8x7B,
declared as a `[[sizing.models]]` entry from mistralai/Mixtral-8x7B-v0.1's config.json
(46.7B parameters, 8 experts, 2 per token: 12.9B active, arXiv:2401.04088). The need the
agent reports is the sizing model's for all 46.7B parameters, not the 12.9B active: a
4-bit checkpoint at batch 4 needs 29.1 GB (32.0 with headroom) and gets a cheaper
data-centre card that holds it (the A100 40GB PCIe at the catalog's prices), a 16-bit one
(93.4 GB of weights) gets none. gpt-oss-20b declared in MXFP4 is laid out as its
checkpoint is (MXFP4 experts, bf16 rest: the model card's 12.8 GiB) and needs 17.7 GB.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config, ExporterConfig
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.core.verdict import GpuVerdict
from gpuwatch.sizing import ModelCatalogEntry, build_gpu_catalog, build_model_catalog
from gpuwatch.sizing.config import SizingConfig
from gpuwatch.sizing.memory import memory_requirement
from gpuwatch.workloads import WorkloadDeclaration, declared_workload
from tests.conftest import scenario_agent, simulated

START = 1_767_225_600.0
SERVER = 3  # the demo's vLLM H100

MIXTRAL_CONFIG_JSON = Path(__file__).resolve().parents[1] / "sizing/configs/mixtral-8x7b.json"
"""mistralai/Mixtral-8x7B-v0.1's config.json (tests/sizing/configs/SOURCES.md)."""


def mixtral_from_its_config_json() -> ModelCatalogEntry:
    """The `[[sizing.models]]` entry ``{name = "mixtral-8x7b", config_json = PATH}``, expanded
    as the agent config expands it (`SizingConfig`'s validator reads the config.json)."""
    sizing = SizingConfig.model_validate(
        {"models": [{"name": "mixtral-8x7b", "config_json": str(MIXTRAL_CONFIG_JSON)}]}
    )
    (entry,) = sizing.models
    return entry


MIXTRAL = mixtral_from_its_config_json()

GPT_OSS_20B = ModelCatalogEntry(
    name="gpt-oss-20b",
    parameters=20_914_757_184,
    layers=24,
    hidden_size=2880,
    attention_heads=64,
    kv_heads=8,
    head_dim=64,
    intermediate_size=2880,
    vocab_size=201088,
    experts=32,
    experts_per_token=4,
    sliding_window=128,
    layer_types=("sliding_attention", "full_attention") * 12,
    source="openai/gpt-oss-20b config.json",
)
MODELS = [MIXTRAL, GPT_OSS_20B]


def run(declaration: WorkloadDeclaration) -> GpuVerdict:
    config = Config(
        agent=AgentConfig(hostname="test-host"),
        exporter=ExporterConfig(),
        sizing=SizingConfig(models=MODELS),
        workloads=[declaration],
    )
    nv, clock = simulated("demo", ManualClock(START))
    agent = scenario_agent(config, nv, clock)
    try:
        snapshot = run_until(agent, clock, 1900)
    finally:
        agent.stop()
    return next(v for v in snapshot.verdicts if v.gpu_index == SERVER)


def run_until(agent: Agent, clock: ManualClock, seconds: float) -> FleetSnapshot:
    snapshot = agent.tick()
    while clock.time() - START < seconds:
        clock.advance(1.0)
        snapshot = agent.tick()
    return snapshot


def need_bytes(declaration: WorkloadDeclaration) -> int:
    workload = declared_workload(declaration, build_model_catalog(MODELS))
    return memory_requirement(workload).total_bytes


def test_the_mixtral_entry_is_read_from_its_config_json() -> None:
    """The entry the tests declare comes from the config.json: 46.7B parameters, 8 experts,
    2 per token, 12.9B active (Mistral AI, "Mixtral of experts", arXiv:2401.04088)."""
    assert MIXTRAL.config_json == str(MIXTRAL_CONFIG_JSON)
    spec = build_model_catalog(MODELS).get("mixtral-8x7b")
    assert (spec.experts, spec.experts_per_token, spec.layers) == (8, 2, 32)
    assert spec.parameters == 46_702_792_704
    assert spec.active_parameters == pytest.approx(12.9e9, rel=0.005)


def test_a_4_bit_mixtral_on_an_h100_needs_all_experts_and_gets_a_40_gb_card() -> None:
    declaration = WorkloadDeclaration(
        gpu_index=SERVER, model="mixtral-8x7b", precision="int4", context=4096, batch=4
    )
    need = need_bytes(declaration)
    # every expert resident: at least 46.7B x 4 bits, far above the 12.9B active's 6.4 GB
    assert need > 46.7e9 * 0.5
    assert need < 40e9
    server = run(declaration)
    assert server.workload == "mixtral-8x7b"
    assert server.catalog_gpu_id == "H100-SXM-80GB"
    required = dict(server.required_memory_bytes)
    assert required["declared"] == need
    assert required["need"] == int(need * 1.1)
    assert server.overprovisioned is True
    assert server.recommendation is not None
    chosen = build_gpu_catalog().get(server.recommendation.gpu_id)
    assert chosen.memory_bytes >= required["need"], "the recommendation holds every expert"
    assert chosen.memory_bytes < 80e9
    assert server.recommendation.savings_usd_per_hour > 0


def test_a_16_bit_mixtral_fills_the_h100_and_gets_no_recommendation() -> None:
    declaration = WorkloadDeclaration(
        gpu_index=SERVER, model="mixtral-8x7b", precision="bf16", context=4096, batch=4
    )
    need = need_bytes(declaration)
    assert need > 2 * 46.7e9, "93.4 GB of weights: sized from the active 12.9B it would be 26"
    server = run(declaration)
    assert dict(server.required_memory_bytes)["declared"] == need
    assert server.overprovisioned is False
    assert server.recommendation is None


def test_gpt_oss_20b_in_mxfp4_needs_about_16_gb_and_gets_a_card_that_holds_it() -> None:
    """The gpt-oss model card (arXiv:2508.10925): gpt-oss-20b, MXFP4 experts and bf16
    rest, 12.8 GiB of weights, "can run within 16GB of memory". Declared with `precision =
    "mxfp4"` on the demo's vLLM H100 at 4,096 tokens: 17.7 GB (weights 13.76 GB = 12.8 GiB,
    KV 0.10, vLLM's engine overhead 3.85: its sampler profiled on 256 sequences x 201,088
    logits is 1.97 GB of it; a runtime serving one sequence fits the card's 16 GB).
    The recommendation must hold it with headroom and meet the H100's observed DRAM
    bandwidth (the demo's server streams ~1.3 TB/s, which rules out an L4 or an L40S).
    """
    declaration = WorkloadDeclaration(
        gpu_index=SERVER, model="gpt-oss-20b", precision="mxfp4", context=4096, batch=1
    )
    workload = declared_workload(declaration, build_model_catalog(MODELS))
    breakdown = memory_requirement(workload)
    assert breakdown.weights_bytes == pytest.approx(12.8 * 2**30, rel=0.005)
    assert breakdown.weights_bytes == pytest.approx(13.76e9, rel=0.001)
    assert breakdown.kv_cache_bytes == pytest.approx(0.10e9, rel=0.05)
    engine = sum(value for key, value in breakdown.parts if key.startswith("overhead_"))
    assert breakdown.overhead_bytes == engine == pytest.approx(3.85e9, rel=0.001)
    need = need_bytes(declaration)
    assert need == breakdown.total_bytes
    assert 17.6e9 < need < 17.8e9
    server = run(declaration)
    assert server.workload == "gpt-oss-20b"
    required = dict(server.required_memory_bytes)
    assert required["declared"] == need
    assert server.overprovisioned is True
    assert server.recommendation is not None
    chosen = build_gpu_catalog().get(server.recommendation.gpu_id)
    assert chosen.memory_bytes >= required["need"]
    assert server.required_bandwidth_bytes_per_second is not None
    assert chosen.memory_bandwidth_bytes_per_second >= server.required_bandwidth_bytes_per_second
    assert (
        server.recommendation.rent_usd_per_hour
        < build_gpu_catalog().get("H100-SXM-80GB").rent_usd_per_hour
    )


# --- the KV cache's storage --------------------------------------------------------------


def test_a_declared_fp8_kv_cache_needs_less_memory_through_the_agent() -> None:
    """`kv_cache_precision = "fp8"` (vLLM's ``--kv-cache-dtype fp8``) halves the declared
    workload's KV cache, and the agent's need with it: llama-3.1-8b in bf16 at 32,768
    tokens x 8 sequences holds 34.4 GB of 16-bit KV (32 layers x 8 KV heads x 128 x 2 x
    2 B = 131,072 B per token), 17.2 GB in fp8; the weights and overhead stay."""
    common = {"gpu_index": SERVER, "model": "llama-3.1-8b", "context": 32768, "batch": 8}
    sixteen = WorkloadDeclaration.model_validate(common)
    fp8 = WorkloadDeclaration.model_validate({**common, "kv_cache_precision": "fp8"})
    kv_bf16 = memory_requirement(declared_workload(sixteen, build_model_catalog())).kv_cache_bytes
    assert kv_bf16 == 131_072 * 32768 * 8
    assert need_bytes(sixteen) - need_bytes(fp8) == kv_bf16 // 2
    served = {name: run(declaration) for name, declaration in (("bf16", sixteen), ("fp8", fp8))}
    for name, declaration in (("bf16", sixteen), ("fp8", fp8)):
        assert dict(served[name].required_memory_bytes)["declared"] == need_bytes(declaration)
    bf16_need = dict(served["bf16"].required_memory_bytes)["need"]
    fp8_need = dict(served["fp8"].required_memory_bytes)["need"]
    assert fp8_need == int(need_bytes(fp8) * 1.1)
    assert fp8_need < bf16_need
