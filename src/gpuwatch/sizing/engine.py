"""The serving engine's memory beyond the weights and the KV cache, as vLLM profiles it.

vLLM sizes its KV cache by profiling (vllm/v1/worker/gpu_worker.py,
``determine_available_memory``, with ``memory_profiling`` in vllm/utils): it loads the
weights, runs one forward pass of ``max_num_batched_tokens`` dummy tokens and the
sampler on ``min(max_num_seqs, max_num_batched_tokens)`` of them (``profile_run``),
takes torch's peak allocation during that run (the *activation peak*) plus what was
allocated outside torch (NCCL, cuBLAS), and gives the KV cache what is left of
``gpu_memory_utilization`` (0.9; 0.92 in 2026's vllm/config/cache.py) x the GPU's
memory. The CUDA context and the CUDA graphs captured afterwards live in the remainder.
None of these grows with the weights: the activation peak follows the batched tokens,
the hidden and MLP widths and the vocabulary.

`engine_overhead` models those parts in bytes for one GPU: the activation peak (the
larger of one forward pass's widest layer and the sampler's logits with the hidden states
it keeps), a CUDA context and non-torch allowance, and a CUDA graph allowance. The
figures and their sources are in docs/sizing.md ("Defaults and where they come from").
No weights, KV or fit arithmetic lives here.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.sizing.models import ModelSpec

GIB = 2**30

DEFAULT_MAX_NUM_SEQS = 256
"""vLLM's default ``max_num_seqs`` for its OpenAI server on GPUs under 70 GiB and A100s
(vllm/engine/arg_utils.py; 1024 on larger GPUs such as the H100)."""

DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
"""vLLM's default ``max_num_batched_tokens`` for its OpenAI server on GPUs under 70 GiB
and A100s (vllm/engine/arg_utils.py; 8192 on larger GPUs such as the H100)."""

SAMPLER_BYTES_PER_LOGIT = 38.3
"""Bytes per sequence per vocabulary entry at the sampler's peak in vLLM's profile run:
the fp32 logits and the sampler's working copies (log-probabilities, the top-k/top-p
sort's values and int64 indices, probabilities). Fitted to four published single-GPU
H100 profiles (llm-d-benchmark, config_explorer/empirical-vllm-memory-results.md:
Llama-3.1-8B 38.41, Qwen3-0.6B 38.26, gpt-oss 38.25, Qwen3-32B 38.38 after the hidden
states the run keeps)."""

CUDA_CONTEXT_BYTES = round(0.61 * GIB)
"""The CUDA context (and cuBLAS handles) a vLLM worker holds before it loads anything:
an idle H100 shows 78.57 of 79.18 GiB free at vLLM's start (the same profiles)."""

NON_TORCH_BYTES = round(0.13 * GIB)
"""Memory allocated outside torch during the profile run on one GPU (NCCL, cuBLAS
workspaces): 0.13 GiB in every single-GPU profile above (0.55 GiB at tensor parallel 2)."""

CUDA_GRAPHS_BYTES = GIB
"""CUDA graphs vLLM captures after sizing the KV cache: 0.10 GiB (Qwen3-0.6B) to
1.03 GiB (gpt-oss-120b) in the same profiles; 1 GiB allowed."""


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """The engine's knobs that size its overhead (vLLM's names): concurrent sequences
    (``max_num_seqs``) and tokens per forward pass (``max_num_batched_tokens``)."""

    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")


DEFAULT_ENGINE_SETTINGS = EngineSettings()
"""vLLM's OpenAI-server defaults below 70 GiB: 256 sequences, 2,048 batched tokens."""


@dataclass(frozen=True, slots=True)
class EngineOverhead:
    """One GPU's engine memory beyond weights and KV cache, bytes.

    `activation_peak_bytes` is max(`forward_bytes`, `sampler_bytes` + `held_hidden_bytes`);
    `total_bytes` adds the CUDA context, non-torch allocations and CUDA graphs.
    `sequences` and `batched_tokens` are what the profile run used.
    """

    forward_bytes: int
    sampler_bytes: int
    held_hidden_bytes: int
    cuda_context_bytes: int
    non_torch_bytes: int
    cuda_graphs_bytes: int
    sequences: int
    batched_tokens: int

    @property
    def activation_peak_bytes(self) -> int:
        """Torch's peak during the profile run: the widest layer, or the sampler."""
        return max(self.forward_bytes, self.sampler_bytes + self.held_hidden_bytes)

    @property
    def total_bytes(self) -> int:
        """Activation peak + CUDA context + non-torch allocations + CUDA graphs."""
        return (
            self.activation_peak_bytes
            + self.cuda_context_bytes
            + self.non_torch_bytes
            + self.cuda_graphs_bytes
        )

    def parts(self) -> tuple[tuple[str, int], ...]:
        """The parts that add to `total_bytes`, named for `MemoryBreakdown.parts`
        (`ENGINE_PARTS`, in that order)."""
        values = (
            self.activation_peak_bytes,
            self.cuda_context_bytes,
            self.non_torch_bytes,
            self.cuda_graphs_bytes,
        )
        return tuple(zip(ENGINE_PARTS, values, strict=True))


ENGINE_PARTS = (
    "overhead_activation_peak_bytes",
    "overhead_cuda_context_bytes",
    "overhead_non_torch_bytes",
    "overhead_cuda_graphs_bytes",
)
"""The engine overhead's parts in `MemoryBreakdown.parts`: each GPU's worker holds all of
them whatever the parallelism (vLLM profiles each worker on its own GPU)."""


def per_gpu_engine_bytes(parts: tuple[tuple[str, int], ...]) -> int:
    """The engine overhead in a breakdown's `parts`: what every GPU of a multi-GPU
    deployment holds whole, not a share of (0 without an engine)."""
    return sum(value for name, value in parts if name in ENGINE_PARTS)


def mlp_width_per_token(model: ModelSpec) -> int:
    """The MLP width one token runs through: the dense MLP, or its experts (routed and
    shared) of a mixture of experts, whichever is wider."""
    if not model.is_moe:
        return model.mlp_size
    experts = (model.experts_per_token + model.shared_experts) * model.expert_size
    return max(experts, model.mlp_size if model.dense_layers else 0)


def forward_values_per_token(model: ModelSpec) -> int:
    """Values per token live at one layer's widest point in a forward pass: the residual
    stream and the normed input (2 x hidden), plus the larger of attention's q, k, v and
    output (heads x head_dim x 2 + KV heads x head_dim x 2) and the MLP's gate and up
    outputs and their product (3 x width; 2 x width ungated), with a mixture of experts'
    copy of the input per routed expert."""
    attention = (2 * model.attention_heads + 2 * model.kv_heads) * model.head_dim
    mlp = (3 if model.gated_mlp else 2) * mlp_width_per_token(model)
    if model.is_moe:
        mlp += model.experts_per_token * model.hidden_size
    return 2 * model.hidden_size + max(attention, mlp)


def engine_overhead(
    model: ModelSpec,
    settings: EngineSettings,
    *,
    batch: int,
    compute_bytes: float,
) -> EngineOverhead:
    """The engine's overhead for `model` on one GPU, bytes.

    The profile run pushes ``max_num_batched_tokens`` tokens through the model at
    `compute_bytes` per value and samples ``min(sequences, max_num_batched_tokens)`` of
    them, sequences being ``max_num_seqs`` or the workload's `batch` if larger (a server
    for that batch needs that many slots).
    """
    tokens = settings.max_num_batched_tokens
    sequences = min(max(settings.max_num_seqs, batch), tokens)
    return EngineOverhead(
        forward_bytes=round(tokens * forward_values_per_token(model) * compute_bytes),
        sampler_bytes=round(sequences * model.vocabulary * SAMPLER_BYTES_PER_LOGIT),
        held_hidden_bytes=round(tokens * model.hidden_size * compute_bytes),
        cuda_context_bytes=CUDA_CONTEXT_BYTES,
        non_torch_bytes=NON_TORCH_BYTES,
        cuda_graphs_bytes=CUDA_GRAPHS_BYTES,
        sequences=sequences,
        batched_tokens=tokens,
    )
