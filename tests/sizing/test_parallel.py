"""Issue 23 part 7: multi-GPU shapes a team can run, ranked by what they cost.

Before, every model above ~141 GB ranked "N x RTX 3090" first (an ideal split priced per
GPU), and single-GPU fits always ranked above multi-GPU ones. Shapes now follow vLLM's
tensor-parallel rule, stay within an NVLink domain, add pipeline stages beyond it, and
rank by the whole shape's $/1M tokens or $/h."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import pytest

from gpuwatch.cli.size import add_size_parser, run_size
from gpuwatch.sizing.engine import per_gpu_engine_bytes
from gpuwatch.sizing.gpus import GpuCatalog, GpuCatalogEntry, build_gpu_catalog
from gpuwatch.sizing.hf_config import model_from_config
from gpuwatch.sizing.memory import memory_requirement
from gpuwatch.sizing.models import ModelSpec, build_model_catalog
from gpuwatch.sizing.parallel import kv_share, serving_shape, tensor_parallel_degrees
from gpuwatch.sizing.workload import Mode, Precision, Workload
from gpuwatch.tco.per_token import RANK_BY, RankBy, RankedGpu, rank_gpus

HEADROOM = 0.1

MIXTRAL_8X22B = {
    # mistralai/Mixtral-8x22B-v0.1 config.json (the keys gpuwatch reads)
    "model_type": "mixtral",
    "hidden_size": 6144,
    "intermediate_size": 16384,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "num_hidden_layers": 56,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
}


@pytest.fixture(scope="module")
def catalog() -> GpuCatalog:
    return build_gpu_catalog()


def mixtral_8x22b() -> ModelSpec:
    return model_from_config(MIXTRAL_8X22B, name="mixtral-8x22b").spec


def workloads() -> dict[str, Workload]:
    models = build_model_catalog()
    return {
        "llama-3.1-70b": Workload(models.get("llama-3.1-70b")),
        "mixtral-8x22b": Workload(mixtral_8x22b()),
        # DeepSeek-R1 has V3's architecture and is published in FP8 as V3 is
        "deepseek-r1-fp8": Workload(models.get("deepseek-v3"), precision=Precision.FP8),
        "deepseek-v3-bf16": Workload(models.get("deepseek-v3"), precision=Precision.BF16),
    }


def by_name(ranked: tuple[RankedGpu, ...]) -> dict[str, RankedGpu]:
    return {row.name: row for row in ranked}


# --- the rules --------------------------------------------------------------------------


def test_tp_degrees_follow_vllms_head_rule() -> None:
    models = build_model_catalog()
    llama = models.get("llama-3.1-70b")  # 64 heads, 8 KV heads
    assert tensor_parallel_degrees(llama, 8) == (1, 2, 4, 8)
    assert tensor_parallel_degrees(llama, 16) == (1, 2, 4, 8, 16)  # 16: KV heads replicated
    qwen = models.get("qwen2.5-7b")  # 28 heads, 4 KV heads: 7 divides 28, not 4
    assert (qwen.attention_heads, qwen.kv_heads) == (28, 4)
    assert tensor_parallel_degrees(qwen, 8) == (1, 2, 4)
    assert tensor_parallel_degrees(mixtral_8x22b(), 8) == (1, 2, 4, 8)  # 48 heads: not 3, 6
    assert tensor_parallel_degrees(models.get("llama-2-13b"), 8) == (1, 2, 4, 5, 8)  # 40, 40
    assert tensor_parallel_degrees(llama, 1) == (1,)
    assert tensor_parallel_degrees(None, 8) == (1,)


def test_each_rank_keeps_its_kv_heads_or_a_replica() -> None:
    models = build_model_catalog()
    llama = models.get("llama-3.1-70b")
    assert kv_share(llama, 1) == 1
    assert kv_share(llama, 4) == 1 / 4
    assert kv_share(llama, 16) == 1 / 8  # 8 KV heads over 16 ranks: one each, replicated
    assert kv_share(models.get("deepseek-v3"), 8) == 1  # one latent, kept whole by each rank


def test_a_shape_splits_memory_and_speeds_decode_by_tp_only(catalog: GpuCatalog) -> None:
    h100 = catalog.get("H100-SXM-80GB")
    workload = Workload(build_model_catalog().get("llama-3.1-70b"))
    breakdown = memory_requirement(workload)
    one = serving_shape(h100, workload, breakdown, tensor_parallel=1, stages=1)
    assert one.memory_per_gpu_bytes == breakdown.total_bytes
    tp4 = serving_shape(h100, workload, breakdown, tensor_parallel=4, stages=1)
    kv = breakdown.kv_cache_bytes
    engine = per_gpu_engine_bytes(breakdown.parts)  # each GPU's worker holds it whole
    assert engine > 0
    rest = breakdown.total_bytes - engine
    assert tp4.memory_per_gpu_bytes == math.ceil((rest - kv) / 4 + kv / 4) + engine
    assert tp4.tokens_per_second == pytest.approx(4 * one.tokens_per_second)
    pp4 = serving_shape(h100, workload, breakdown, tensor_parallel=1, stages=4)
    assert pp4.memory_per_gpu_bytes == math.ceil(rest / 4) + engine  # 80 layers / 4
    assert pp4.tokens_per_second == pytest.approx(one.tokens_per_second)  # stages in turn
    pp3 = serving_shape(h100, workload, breakdown, tensor_parallel=1, stages=3)
    assert pp3.memory_per_gpu_bytes == math.ceil(rest * 27 / 80) + engine  # ceil(80/3)
    assert (tp4.interconnect, pp4.interconnect) == (
        "TP4 over NVLink",
        "PP4 over NVLink in one server",
    )
    two_servers = serving_shape(h100, workload, breakdown, tensor_parallel=8, stages=2)
    assert (two_servers.gpus, two_servers.nodes) == (16, 2)
    assert "network between 2 servers" in two_servers.interconnect


@pytest.mark.parametrize("rank_by", RANK_BY)
@pytest.mark.parametrize("name", list(workloads()))
def test_every_deployment_obeys_the_rules_and_is_minimal(
    catalog: GpuCatalog, name: str, rank_by: RankBy
) -> None:
    workload = workloads()[name]
    breakdown = memory_requirement(workload)
    model = breakdown.architecture
    assert model is not None
    ranked = rank_gpus(catalog, workload, rank_by=rank_by)
    for row in ranked:
        deployment = row.deployment
        if deployment is None:
            continue
        shape, gpu = deployment.shape, row.gpu
        t, p = shape.tensor_parallel, shape.pipeline_parallel
        assert model.attention_heads % t == 0, (row.name, t)
        assert model.kv_heads % t == 0 if model.kv_heads >= t else t % model.kv_heads == 0
        assert t <= gpu.nvlink_domain_gpus, (row.name, t)
        assert 1 <= p <= model.layers
        assert shape.gpus == t * p
        assert shape.memory_per_gpu_bytes * (1 + HEADROOM) <= gpu.memory_bytes
        if gpu.tier == "consumer":
            assert shape.nodes == 1  # GeForce stays in one server
        if p > 1:  # one stage fewer would not fit
            fewer = serving_shape(gpu, workload, breakdown, tensor_parallel=t, stages=p - 1)
            assert fewer.memory_per_gpu_bytes * (1 + HEADROOM) > gpu.memory_bytes
        assert deployment.usd_per_hour_rented == pytest.approx(shape.gpus * gpu.rent_usd_per_hour)
        assert deployment.usd_per_million_tokens_rented == pytest.approx(
            deployment.usd_per_hour_rented / (shape.tokens_per_second * 3600) * 1e6
        )


@pytest.mark.parametrize("rank_by", RANK_BY)
@pytest.mark.parametrize("name", list(workloads()))
def test_the_ranking_is_by_the_chosen_cost(catalog: GpuCatalog, name: str, rank_by: RankBy) -> None:
    ranked = rank_gpus(catalog, workloads()[name], rank_by=rank_by)
    deployed = [row.deployment for row in ranked if row.deployment is not None]
    costs = [d.cost(rank_by)[0] for d in deployed]
    assert costs == sorted(costs)
    assert all(row.deployment is None for row in ranked[len(deployed) :])  # none: last


@pytest.mark.parametrize("name", ["mixtral-8x22b", "deepseek-r1-fp8", "deepseek-v3-bf16"])
def test_large_models_no_longer_lead_with_a_stack_of_geforce_cards(
    catalog: GpuCatalog, name: str
) -> None:
    """Before: 16 x RTX 3090 for Mixtral-8x22B, 38 for DeepSeek-R1, first."""
    ranked = rank_gpus(catalog, workloads()[name])
    assert ranked[0].gpu.tier != "consumer"
    for row in ranked:
        if row.gpu.tier == "consumer" and row.deployment is not None:
            assert row.deployment.shape.gpus <= row.gpu.gpus_per_node


def test_single_gpu_fits_no_longer_always_rank_first(catalog: GpuCatalog) -> None:
    """A 70B: two H200s (TP2) cost less per token than the one B300 that holds it."""
    ranked = rank_gpus(catalog, workloads()["llama-3.1-70b"])
    rows = by_name(ranked)
    b300, h200 = rows["B300-288GB"], rows["H200-141GB"]
    assert b300.fits
    assert not h200.fits
    assert b300.deployment is not None
    assert h200.deployment is not None
    assert b300.deployment.shape.label == "1 GPU"
    assert h200.deployment.shape.label == "TP2"
    names = [row.name for row in ranked]
    assert names.index("H200-141GB") < names.index("B300-288GB")
    assert (
        h200.deployment.usd_per_million_tokens_rented
        < b300.deployment.usd_per_million_tokens_rented
    )
    # by $/h the B300 ($14.24) is cheaper than two H200s ($15.82)
    by_hour = [
        row.name for row in rank_gpus(catalog, workloads()["llama-3.1-70b"], rank_by="usd-per-hour")
    ]
    assert by_hour.index("B300-288GB") < by_hour.index("H200-141GB")


def test_deepseek_shapes_match_the_published_recommendations(catalog: GpuCatalog) -> None:
    """SGLang's DeepSeek V3/R1 guide (sgl-project/sglang docs/basic_usage/deepseek_v3.md)
    recommends, for the FP8 checkpoint, 8 x H200, 8 x B200 or 2 x 8 x H100, and for BF16
    2 x 8 x H200."""
    fp8 = by_name(rank_gpus(catalog, workloads()["deepseek-r1-fp8"]))
    bf16 = by_name(rank_gpus(catalog, workloads()["deepseek-v3-bf16"]))

    def label(rows: dict[str, RankedGpu], name: str) -> str:
        deployment = rows[name].deployment
        assert deployment is not None
        return deployment.shape.label

    assert label(fp8, "H200-141GB") == "TP8"
    assert label(fp8, "B200-180GB") == "TP8"
    assert label(fp8, "H100-SXM-80GB") == "TP8xPP2"
    assert label(bf16, "H200-141GB") == "TP8xPP2"


def test_training_shapes_shard_over_the_ideal_count(catalog: GpuCatalog) -> None:
    ranked = by_name(rank_gpus(catalog, Workload(7 * 10**9, Mode.TRAIN)))
    h200 = ranked["H200-141GB"]
    assert h200.deployment is not None
    shape = h200.deployment.shape
    assert (shape.label, shape.gpus, shape.interconnect) == ("FSDPx2", 2, "FSDP over NVLink")
    assert shape.tokens_per_second == pytest.approx(2 * h200.tokens_per_second)


# --- the command ------------------------------------------------------------------------


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


@pytest.mark.parametrize("rank_by", RANK_BY)
def test_rank_by_orders_the_json(capsys: pytest.CaptureFixture[str], rank_by: str) -> None:
    data = report(capsys, "deepseek-v3", "--precision", "fp8", "--rank-by", rank_by)
    assert data["rank_by"] == rank_by
    key = "usd_per_hour_rented" if rank_by == "usd-per-hour" else "usd_per_million_tokens_rented"
    costs = [gpu["deployment"][key] for gpu in data["gpus"] if gpu["deployment"]]
    assert costs == sorted(costs)
    first = data["gpus"][0]
    assert first["deployment"]["interconnect"]
    assert first["deployment"]["gpus"] == (
        first["deployment"]["tensor_parallel"] * first["deployment"]["pipeline_parallel"]
    )


def test_the_table_names_shapes_and_their_links(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = size(capsys, "deepseek-v3", "--precision", "fp8")
    assert code == 0, err
    assert "H200-141GB TP8: TP8 over NVLink" in out
    assert "by rented $ per 1M tokens" in out
    code, out, err = size(capsys, "deepseek-v3", "--precision", "fp8", "--rank-by", "usd-per-hour")
    assert code == 0, err
    assert "by rented $ per hour" in out


def test_rank_by_rejects_other_values(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        size(capsys, "--params", "7B", "--rank-by", "tokens")
    assert caught.value.code == 2


def test_the_agent_config_can_give_a_part_its_nvlink_domain() -> None:
    """An L40S has no NVLink (pipeline stages only); a config that says otherwise gets TP."""
    workload = workloads()["llama-3.1-70b"]
    plain = by_name(rank_gpus(build_gpu_catalog(), workload))["L40S-48GB"].deployment
    assert plain is not None
    assert plain.shape.tensor_parallel == 1
    linked = build_gpu_catalog([GpuCatalogEntry(id="L40S-48GB", nvlink_domain_gpus=8)])
    deployment = by_name(rank_gpus(linked, workload))["L40S-48GB"].deployment
    assert deployment is not None
    assert deployment.shape.tensor_parallel > 1
    assert linked.get("L40S-48GB").sources["nvlink_domain_gpus"] == "agent config"
