"""Mixture-of-experts arithmetic: what one token, and one decoding step, touch.

A mixture-of-experts (MoE) layer replaces the MLP by `experts` routed experts (each an
MLP `moe_intermediate_size` wide) of which a router picks `experts_per_token` (k) for
each token, plus `shared_experts` that every token goes through; the first
`dense_layers` layers keep a dense MLP (DeepSeek-V3's `first_k_dense_replace`). The
counts come from `ModelSpec`: `expert_parameters` (every routed expert's weights) and
`active_parameters` (what one token uses: everything but the routed experts, plus k of
them per MoE layer).

- **Memory**: every expert is resident, so the weights are all `parameters` (memory.py
  needs nothing MoE-specific); full training keeps gradients and AdamW state for all of
  them.
- **Decode reads** (throughput.py): one step at batch b reads the non-expert weights
  once and, per MoE layer, the distinct routed experts the b tokens were sent to. Under
  independent routing where each token picks expert i with probability ``p_i``
  (``sum p_i = k``), expert i stays untouched with probability ``(1 - p_i)^b``, so the
  expected number touched is ``sum (1 - (1 - p_i)^b)``; with uniform routing
  (``p_i = k/E``, what load-balancing losses aim at) that is
  ``E x (1 - (1 - k/E)^b)``: k at batch 1, tending to E as b grows. ``1 - (1 - p)^b`` is
  concave in p, so uniform routing touches the most experts of any routing with the same
  k: the figure is an upper bound on the bytes (a lower bound on tokens/s) for
  independent tokens. Tokens of one prompt route alike and touch fewer.
- **Compute**: 2 FLOPs per active parameter per token (decode), 6 (training), 4 (LoRA).
- **Activations** (training): Korthikanti's 34 B per layer per token per hidden unit
  holds 16 for a 4h-wide MLP's two intermediate tensors; a token's MoE MLP is
  ``(k + shared) x moe_intermediate_size`` wide, so those 16 are scaled by that width
  over 4h (`activation_factor`), averaged with the dense layers.
- **LoRA**: an adapter on an MLP projection (gate, up, down) is one adapter per expert,
  routed and shared, of that expert's shape (PEFT's ``all-linear`` on a model whose
  experts are separate linear layers, as Mixtral's and Qwen3-MoE's are in Transformers
  4.x); the router is not adapted, though ``all-linear`` would adapt it too
  (r x (hidden + experts) per layer, under 1 %) (`mlp_adapter_parameters`).
"""

from __future__ import annotations

from gpuwatch.sizing.models import ModelSpec

MLP_MODULES = ("gate", "up", "down")
"""The projections of an MLP (and of each expert)."""

KORTHIKANTI_MLP_INTERMEDIATE_FACTOR = 16.0
"""Of Korthikanti's 34 B per layer per token per hidden unit, the 4h-wide MLP's two
16-bit intermediate tensors (the GeLU input and output: 8 + 8)."""

KORTHIKANTI_MLP_WIDTH_RATIO = 4
"""Korthikanti's GPT MLP is 4 x hidden wide."""


def expected_distinct_experts(experts: int, experts_per_token: int, batch: int) -> float:
    """Expected routed experts one MoE layer touches for `batch` tokens (one decode step).

    ``E x (1 - (1 - k/E)^b)`` under uniform, independent routing: k at batch 1, at most E.
    """
    if experts <= 0 or not 0 < experts_per_token <= experts:
        raise ValueError(
            f"experts_per_token must be in 1..experts ({experts}), got {experts_per_token}"
        )
    if batch <= 0:
        raise ValueError(f"batch must be positive, got {batch}")
    return experts * (1 - (1 - experts_per_token / experts) ** batch)


def routed_fraction_read(model: ModelSpec, batch: int) -> float:
    """Fraction of the routed experts' weights one decode step at `batch` reads.

    ``expected_distinct_experts / experts``; 0 for a dense model (it has none).
    """
    if not model.is_moe:
        return 0.0
    return expected_distinct_experts(model.experts, model.experts_per_token, batch) / model.experts


def decode_weight_bytes(
    model: ModelSpec, batch: int, *, expert_bytes: float, other_bytes: float
) -> float:
    """Weight bytes one decode step at `batch` streams from memory.

    `expert_bytes`: the routed experts' weights (all of them, at their storage precision);
    `other_bytes`: the rest (attention, shared experts, dense MLPs, router, embeddings,
    norms). Reads all of the rest and `routed_fraction_read` of the experts; a dense
    model (no experts) reads everything.
    """
    if not model.is_moe:
        return expert_bytes + other_bytes
    return other_bytes + expert_bytes * routed_fraction_read(model, batch)


def decode_parameters_read(model: ModelSpec, batch: int) -> float:
    """Parameters one decode step at `batch` reads: `active_parameters` at batch 1,
    tending to all `parameters` as the batch touches every expert."""
    experts = model.expert_parameters
    return decode_weight_bytes(
        model, batch, expert_bytes=experts, other_bytes=model.parameters - experts
    )


def activation_factor(model: ModelSpec, base_factor: float) -> float:
    """Korthikanti's bytes per layer per token per hidden unit, for a token's MoE path.

    The MLP part (16 of 34 for a 4h-wide MLP) scaled by the width a token's MoE MLP has,
    ``(experts_per_token x expert width + shared_experts x shared width) / (4 x hidden)``, on
    the MoE layers; the dense layers keep `base_factor`. Averaged over the layers, since
    `activations.activation_parts` takes one factor. A dense model keeps `base_factor`.
    """
    moe = model.moe_layers
    if moe == 0:
        return base_factor
    width = (
        model.experts_per_token * model.expert_size
        + model.shared_experts * model.shared_expert_size
    )
    scale = width / (KORTHIKANTI_MLP_WIDTH_RATIO * model.hidden_size)
    moe_factor = base_factor + KORTHIKANTI_MLP_INTERMEDIATE_FACTOR * (scale - 1)
    return (moe * moe_factor + (model.layers - moe) * base_factor) / model.layers


def mlp_adapter_parameters(model: ModelSpec, rank: int, module: str) -> int:
    """LoRA parameters of one MLP projection (gate, up or down) over the whole model.

    Dense layers: one adapter of the dense MLP's shape. MoE layers: one adapter per
    expert, routed and shared, of that expert's shape (hidden x its width), rank x
    (in + out) each. A module the model lacks (gate without a gated MLP) counts 0.
    """
    if module not in MLP_MODULES:
        raise ValueError(f"not an MLP projection: {module!r}; MLP: {', '.join(MLP_MODULES)}")
    if module == "gate" and not model.gated_mlp:
        return 0
    per_dense = rank * (model.hidden_size + model.mlp_size)
    moe = model.moe_layers
    if moe == 0:
        return model.layers * per_dense
    per_expert = rank * (model.hidden_size + model.expert_size)
    per_shared = rank * (model.hidden_size + model.shared_expert_size)
    return (model.layers - moe) * per_dense + moe * (
        model.experts * per_expert + model.shared_experts * per_shared
    )
