"""Multi-GPU shapes that hold a workload: tensor and pipeline parallel serving, sharded
data-parallel training. Physics, no dollars (`gpuwatch.tco.per_token` prices them).

Serving (vLLM's rules):

- A tensor-parallel (TP) degree t must divide the attention heads, and the KV heads must
  split evenly over t or, when fewer than t, be replicated: t a multiple of them (vLLM,
  `vllm/config` ModelConfig.verify_with_parallel_config, "Total number of attention
  heads must be divisible by tensor parallel size"; `LlamaAttention.__init__` in
  `vllm/model_executor/models/llama.py`: each rank keeps max(1, KV heads / t) KV heads).
  Multi-head latent attention caches one latent per token that every rank keeps whole.
- A TP group spans at most one NVLink domain (`GpuSpec.nvlink_domain_gpus`: 8 on an HGX
  board, 2 over a PCIe bridge, 1 without NVLink): TP's all-reduce after every layer
  wants NVLink; vLLM's guide puts TP within a node and PP across nodes (docs.vllm.ai,
  "Distributed Inference and Serving") and lists GPUs without NVLink (e.g. L40S) among
  the cases for pipeline parallelism.
- Pipeline-parallel (PP) stages split the layers, at most one layer each; a stage holds
  ceil(layers / p) of them. Stages talk over NVLink or PCIe inside a server
  (`GpuSpec.gpus_per_node`) and over the network between servers; consumer (GeForce)
  cards stay in one server (`max_nodes`).

Per GPU: the weights and everything else but the KV cache over t x p (by the stage's
share of layers), the KV cache over p and over t as the KV heads split. Decode speed:
TP reads each GPU's share in parallel (t x the bandwidth and FLOP/s); PP stages run one
after another for a step, so a pipeline adds memory, not speed (micro-batches that
overlap stages at large batches are not counted: a lower bound). For each TP degree the
fewest stages that fit is a candidate; the ranking chooses among them by cost.

Training: ZeRO-3 / FSDP shards weights, gradients and optimizer state over any number
of GPUs (no head rule); `fit.gpus_needed`'s ideal count, each GPU training its own
micro-batch (tokens/s x N).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpuwatch.sizing.engine import per_gpu_engine_bytes
from gpuwatch.sizing.gpus import GpuSpec
from gpuwatch.sizing.memory import MemoryBreakdown, workload_kv_cache_bytes
from gpuwatch.sizing.models import ModelSpec
from gpuwatch.sizing.throughput import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    compute_bound_tokens_per_second,
    decode_weight_bytes,
    tokens_per_second,
)
from gpuwatch.sizing.workload import Mode, Workload

Strategy = Literal["tensor-pipeline", "sharded-data"]


@dataclass(frozen=True, slots=True)
class Shape:
    """A deployment of `gpus` GPUs of one part: TP degree x PP stages (serving) or
    sharded data parallel (training), on `nodes` servers; `memory_per_gpu_bytes`
    before headroom; `tokens_per_second` of the whole deployment; `interconnect` says
    which links it assumes."""

    strategy: Strategy
    gpus: int
    tensor_parallel: int
    pipeline_parallel: int
    nodes: int
    memory_per_gpu_bytes: int
    tokens_per_second: float
    interconnect: str

    @property
    def label(self) -> str:
        """Short: "1 GPU", "TP4", "TP8xPP2", "TP1xPP3", "FSDPx3"."""
        if self.gpus == 1:
            return "1 GPU"
        if self.strategy == "sharded-data":
            return f"FSDPx{self.gpus}"
        if self.pipeline_parallel == 1:
            return f"TP{self.tensor_parallel}"
        return f"TP{self.tensor_parallel}xPP{self.pipeline_parallel}"


def tensor_parallel_degrees(model: ModelSpec | None, limit: int) -> tuple[int, ...]:
    """TP degrees up to `limit` that vLLM accepts for `model`: t divides the attention
    heads, and t divides the KV heads or is a multiple of them. Just 1 without a model."""
    if model is None:
        return (1,)
    heads, kv = model.attention_heads, model.kv_heads
    return tuple(
        t
        for t in range(1, limit + 1)
        if heads % t == 0 and (kv % t == 0 if kv >= t else t % kv == 0)
    )


def kv_share(model: ModelSpec | None, tensor_parallel: int) -> float:
    """The fraction of the KV cache one TP rank holds: max(1, KV heads / t) of the KV
    heads (replicated when fewer than t); all of it for latent attention (one latent)."""
    if model is None or tensor_parallel == 1:
        return 1.0
    if model.is_mla:
        return 1.0
    return max(1, model.kv_heads // tensor_parallel) / model.kv_heads


def _nodes(gpu: GpuSpec, tensor_parallel: int, stages: int) -> int:
    per_node = gpu.gpus_per_node
    if tensor_parallel > per_node:  # an NVLink domain larger than a server (NVL72)
        return stages * math.ceil(tensor_parallel / per_node)
    return math.ceil(stages / (per_node // tensor_parallel))


def max_nodes(gpu: GpuSpec) -> int | float:
    """Servers a shape of `gpu` may span: one for a consumer (GeForce) card, whose driver
    licence (NVIDIA GeForce EULA §2.1.3) does not allow data-centre deployment, as
    `sizing.candidates` says; any number otherwise."""
    return 1 if gpu.tier == "consumer" else math.inf


def _within_node_link(gpu: GpuSpec) -> str:
    return "NVLink" if gpu.nvlink_domain_gpus >= gpu.gpus_per_node else "PCIe"


def _serving_interconnect(gpu: GpuSpec, tensor_parallel: int, stages: int, nodes: int) -> str:
    parts = []
    if tensor_parallel > 1:
        parts.append(f"TP{tensor_parallel} over NVLink")
    if stages > 1:
        inside = _within_node_link(gpu)
        where = (
            f"over {inside} in one server"
            if nodes == 1
            else f"over {inside} in a server and the network between {nodes} servers"
        )
        parts.append(f"PP{stages} {where}")
    return "; ".join(parts) or "one GPU"


@dataclass(frozen=True, slots=True)
class _DecodeStep:
    """What one decode step reads and computes on one GPU (no parallelism)."""

    weight_bytes: int
    kv_bytes: int
    compute_tokens_per_second: float
    efficiency: float


def _decode_step(gpu: GpuSpec, workload: Workload, efficiency: float | None) -> _DecodeStep:
    eff = DEFAULT_BANDWIDTH_EFFICIENCY if efficiency is None else efficiency
    return _DecodeStep(
        weight_bytes=decode_weight_bytes(workload),
        kv_bytes=workload_kv_cache_bytes(workload),
        compute_tokens_per_second=compute_bound_tokens_per_second(gpu, workload, eff),
        efficiency=eff,
    )


def _per_gpu_bytes(breakdown: MemoryBreakdown, stage_share: float, tp: int, share: float) -> int:
    """One GPU's bytes: its stage's share of the weights and the rest split over the TP
    group, its `share` of the KV cache, and the engine overhead whole (every GPU's worker
    holds its own: `engine.per_gpu_engine_bytes`)."""
    kv = breakdown.kv_cache_bytes
    engine = per_gpu_engine_bytes(breakdown.parts)
    split = breakdown.total_bytes - kv - engine
    return math.ceil(stage_share * (split / tp + kv * share)) + engine


def _stage_share(layers: int, stages: int) -> float:
    """The largest stage's fraction of the layers: ceil(layers / stages) / layers."""
    return math.ceil(layers / stages) / layers


def _shape(
    gpu: GpuSpec,
    workload: Workload,
    breakdown: MemoryBreakdown,
    step: _DecodeStep,
    *,
    tensor_parallel: int,
    stages: int,
) -> Shape:
    model = breakdown.architecture
    stage_share = _stage_share(model.layers if model is not None else 1, stages)
    share = kv_share(model, tensor_parallel)
    # One step: the stages one after another, each reading its share on t GPUs at once.
    serial = stages * stage_share
    step_bytes = serial * (step.weight_bytes / tensor_parallel + step.kv_bytes * share)
    bandwidth_bound = (
        workload.batch * gpu.memory_bandwidth_bytes_per_second * step.efficiency / step_bytes
    )
    compute_bound = step.compute_tokens_per_second * tensor_parallel / serial
    nodes = _nodes(gpu, tensor_parallel, stages)
    return Shape(
        strategy="tensor-pipeline",
        gpus=tensor_parallel * stages,
        tensor_parallel=tensor_parallel,
        pipeline_parallel=stages,
        nodes=nodes,
        memory_per_gpu_bytes=_per_gpu_bytes(breakdown, stage_share, tensor_parallel, share),
        tokens_per_second=min(bandwidth_bound, compute_bound),
        interconnect=_serving_interconnect(gpu, tensor_parallel, stages, nodes),
    )


def serving_shape(
    gpu: GpuSpec,
    workload: Workload,
    breakdown: MemoryBreakdown,
    *,
    tensor_parallel: int,
    stages: int,
    efficiency: float | None = None,
) -> Shape:
    """The TP x PP shape's memory per GPU, decode tokens/s and links (fit not judged)."""
    step = _decode_step(gpu, workload, efficiency)
    return _shape(gpu, workload, breakdown, step, tensor_parallel=tensor_parallel, stages=stages)


def _holds(gpu: GpuSpec, per_gpu_bytes: int, headroom: float) -> bool:
    return per_gpu_bytes * (1 + headroom) <= gpu.memory_bytes


def serving_shapes(
    gpu: GpuSpec,
    workload: Workload,
    breakdown: MemoryBreakdown,
    *,
    headroom: float,
    efficiency: float | None = None,
) -> tuple[Shape, ...]:
    """For each TP degree `gpu`'s NVLink domain allows, the fewest PP stages (at most
    one layer each) whose GPUs hold the workload with headroom; empty when none do."""
    model = breakdown.architecture
    layers = model.layers if model is not None else 1
    step = _decode_step(gpu, workload, efficiency)
    shapes = []
    for t in tensor_parallel_degrees(model, gpu.nvlink_domain_gpus):
        share = kv_share(model, t)
        for stages in range(1, layers + 1):
            per_gpu = _per_gpu_bytes(breakdown, _stage_share(layers, stages), t, share)
            if _holds(gpu, per_gpu, headroom):
                if _nodes(gpu, t, stages) <= max_nodes(gpu):
                    shapes.append(
                        _shape(gpu, workload, breakdown, step, tensor_parallel=t, stages=stages)
                    )
                break
    return tuple(shapes)


def training_shape(
    gpu: GpuSpec,
    workload: Workload,
    breakdown: MemoryBreakdown,
    gpus: int,
    efficiency: float | None = None,
) -> Shape | None:
    """Sharded data parallel (ZeRO-3 / FSDP) over `gpus`: the total split evenly, each
    GPU training its own micro-batch; None past `max_nodes` servers."""
    nodes = math.ceil(gpus / gpu.gpus_per_node)
    if nodes > max_nodes(gpu):
        return None
    if gpus == 1:
        links = "one GPU"
    elif gpus <= gpu.nvlink_domain_gpus:
        links = "FSDP over NVLink"
    elif nodes == 1:
        links = f"FSDP over {_within_node_link(gpu)} in one server"
    else:
        links = f"FSDP over {_within_node_link(gpu)} in a server and the network between {nodes}"
    return Shape(
        strategy="sharded-data",
        gpus=gpus,
        tensor_parallel=1,
        pipeline_parallel=1,
        nodes=nodes,
        memory_per_gpu_bytes=math.ceil(breakdown.total_bytes / gpus),
        tokens_per_second=gpus * tokens_per_second(gpu, workload, efficiency),
        interconnect=links,
    )


def shapes_for(
    gpu: GpuSpec,
    workload: Workload,
    breakdown: MemoryBreakdown,
    *,
    headroom: float,
    gpus_needed: int,
    efficiency: float | None = None,
) -> tuple[Shape, ...]:
    """The candidate shapes of `gpu` for the workload's mode (see the module docstring)."""
    if workload.mode is Mode.INFERENCE:
        return serving_shapes(gpu, workload, breakdown, headroom=headroom, efficiency=efficiency)
    shape = training_shape(gpu, workload, breakdown, gpus_needed, efficiency)
    return () if shape is None else (shape,)
