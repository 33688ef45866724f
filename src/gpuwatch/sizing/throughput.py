"""The throughput model: tokens per second of one GPU, from the roofline.

Decoding is bandwidth-bound at small batches: every step streams the weights and the
batch's KV cache from memory once and yields one token per sequence, so
``tokens/s = batch x bandwidth x efficiency / (weight bytes + KV cache bytes)``. The KV
cache is counted at the full context (the last token of a full window: the slowest
step). Larger batches reach the compute ceiling ``FLOP/s x efficiency / (2 x params)``
(2 FLOPs per parameter per token); the estimate is the lower of the two. Training is
compute-bound: ``FLOP/s x MFU / (6 x params)`` for full training (forward 2 + backward
4), ``4 x params`` for LoRA/QLoRA (no weight gradients for the frozen base).

For a mixture-of-experts model (`moe`) a step reads the non-expert weights and the
routed experts the batch touches (k per MoE layer at batch 1, ``E x (1 - (1 - k/E)^b)``
expected at batch b), and the FLOPs count the active parameters only.
"""

from __future__ import annotations

from gpuwatch.sizing import moe
from gpuwatch.sizing.gpus import GpuSpec
from gpuwatch.sizing.memory import (
    weight_bytes,
    workload_kv_cache_bytes,
    workload_weight_bytes,
    workload_weight_parts,
)
from gpuwatch.sizing.workload import Mode, Precision, Workload

DEFAULT_BANDWIDTH_EFFICIENCY = 0.7
"""Fraction of peak bandwidth (and of peak FLOP/s) decoding reaches: seed 001's estimator
default, inside its "0.6-0.85" range. 1.0 gives seed 001's theoretical tables."""

DEFAULT_TRAINING_MFU = 0.4
"""Model FLOPs utilization of training: the Llama 3 paper reports 38-43 % BF16 MFU on H100."""

DECODE_FLOPS_PER_PARAMETER = 2
FULL_TRAINING_FLOPS_PER_PARAMETER = 6
ADAPTER_TRAINING_FLOPS_PER_PARAMETER = 4


def _check_efficiency(efficiency: float) -> None:
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")


def peak_flops_per_second(gpu: GpuSpec, precision: Precision) -> float:
    """Dense tensor peak for math at `precision`: FP8 where the part has it, else BF16.

    Weight-only int8/int4 formats dequantize to 16-bit for the math, so they get BF16.
    """
    if precision is Precision.FP8 and gpu.fp8_flops_per_second is not None:
        return gpu.fp8_flops_per_second
    return gpu.bf16_flops_per_second


def math_peak_flops_per_second(gpu: GpuSpec, workload: Workload) -> float:
    """Dense tensor peak the workload's matrix math runs at on `gpu`.

    By the weights' scheme (`quantization.ComputeFormat`): W4A4 NVFP4 ("fp4") the FP4 peak
    on a part with FP4 tensor cores (`fp4_flops_per_second`, Blackwell); FP4 weights with
    FP8 activations ("fp4-fp8", gpt-oss's MXFP4 in vLLM) the FP8 peak there; W8A8 FP8 the
    FP8 peak where the part has one. Everything else, and the FP4 formats on a part without
    FP4 tensor cores (weights unpacked to 16-bit math), BF16. Without a scheme: FP8 for
    fp8 weights, else BF16 (`peak_flops_per_second`).
    """
    scheme = workload.weight_scheme
    if scheme is None:
        return peak_flops_per_second(gpu, workload.weight_precision)
    fp4_cores = gpu.fp4_flops_per_second
    if scheme.compute == "fp4" and fp4_cores is not None:
        return fp4_cores
    if scheme.compute == "fp8" or (scheme.compute == "fp4-fp8" and fp4_cores is not None):
        return peak_flops_per_second(gpu, Precision.FP8)
    return gpu.bf16_flops_per_second


def ridge_point_flops_per_byte(gpu: GpuSpec) -> float:
    """Arithmetic intensity where the part turns compute-bound: BF16 FLOP/s / bandwidth."""
    return gpu.bf16_flops_per_second / gpu.memory_bandwidth_bytes_per_second


def active_parameters(workload: Workload) -> int:
    """Parameters one token's forward pass uses: `ModelSpec.active_parameters` for a
    mixture of experts, else all of them (a bare count is dense)."""
    model = workload.architecture
    return workload.parameters if model is None else model.active_parameters


def decode_weight_bytes(workload: Workload) -> int:
    """Weight bytes one decoding step streams: all of them for a dense model; for a
    mixture of experts the non-expert weights plus the routed experts the batch is
    expected to touch (`moe.decode_weight_bytes`). A vision tower
    (`ModelSpec.vision_parameters`) is not read: it runs on images, in the prefill."""
    total = workload_weight_bytes(workload)
    model = workload.architecture
    if model is None:
        return total
    parts = workload_weight_parts(workload)  # a quantized checkpoint's real expert bytes
    if model.vision_parameters:
        total -= (
            parts.vision
            if parts is not None
            else weight_bytes(model.vision_parameters, workload.weight_precision)
        )
    if not model.is_moe:
        return total
    experts = (
        parts.experts
        if parts is not None
        else weight_bytes(model.expert_parameters, workload.weight_precision)
    )
    return round(
        moe.decode_weight_bytes(
            model, workload.batch, expert_bytes=experts, other_bytes=total - experts
        )
    )


def decode_bytes_per_step(workload: Workload) -> int:
    """Bytes read from memory per decoding step: the weights it streams
    (`decode_weight_bytes`) plus the batch's KV cache."""
    return decode_weight_bytes(workload) + workload_kv_cache_bytes(workload)


def decode_arithmetic_intensity(workload: Workload) -> float:
    """FLOPs per byte of a decoding step: 2 x active params x batch / bytes read."""
    flops = DECODE_FLOPS_PER_PARAMETER * active_parameters(workload) * workload.batch
    return flops / decode_bytes_per_step(workload)


def bandwidth_bound_tokens_per_second(
    gpu: GpuSpec, workload: Workload, efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY
) -> float:
    """Decode tokens/s if memory bandwidth were the only limit (all sequences together)."""
    _check_efficiency(efficiency)
    step_seconds = decode_bytes_per_step(workload) / (
        gpu.memory_bandwidth_bytes_per_second * efficiency
    )
    return workload.batch / step_seconds


def compute_bound_tokens_per_second(
    gpu: GpuSpec, workload: Workload, efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY
) -> float:
    """Decode tokens/s if FLOP/s were the only limit: FLOP/s x efficiency / (2 x active
    params), the active parameters being all of them for a dense model; FLOP/s the peak
    of the math the weights' scheme runs (`math_peak_flops_per_second`)."""
    _check_efficiency(efficiency)
    flops = math_peak_flops_per_second(gpu, workload) * efficiency
    return flops / (DECODE_FLOPS_PER_PARAMETER * active_parameters(workload))


def decode_tokens_per_second(
    gpu: GpuSpec, workload: Workload, efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY
) -> float:
    """Decode tokens/s of `workload.batch` sequences on one GPU: the roofline minimum.

    The workload's mode is ignored: this is serving the model at its precision.
    """
    return min(
        bandwidth_bound_tokens_per_second(gpu, workload, efficiency),
        compute_bound_tokens_per_second(gpu, workload, efficiency),
    )


def training_tokens_per_second(
    gpu: GpuSpec, workload: Workload, mfu: float = DEFAULT_TRAINING_MFU
) -> float:
    """Training tokens/s of one GPU: BF16 FLOP/s x MFU / (FLOPs per token).

    6 FLOPs per (active) parameter per token for full training, 4 for LoRA and QLoRA;
    a mixture of experts counts its active parameters (each token trains its k experts).
    """
    _check_efficiency(mfu)
    per_param = (
        FULL_TRAINING_FLOPS_PER_PARAMETER
        if workload.mode is Mode.TRAIN
        else ADAPTER_TRAINING_FLOPS_PER_PARAMETER
    )
    return gpu.bf16_flops_per_second * mfu / (per_param * active_parameters(workload))


def tokens_per_second(gpu: GpuSpec, workload: Workload, efficiency: float | None = None) -> float:
    """Decode tokens/s for inference, training tokens/s for the training modes.

    `efficiency` None takes the mode's default (`DEFAULT_BANDWIDTH_EFFICIENCY` or
    `DEFAULT_TRAINING_MFU`).
    """
    if workload.mode is Mode.INFERENCE:
        return decode_tokens_per_second(
            gpu, workload, DEFAULT_BANDWIDTH_EFFICIENCY if efficiency is None else efficiency
        )
    return training_tokens_per_second(
        gpu, workload, DEFAULT_TRAINING_MFU if efficiency is None else efficiency
    )
