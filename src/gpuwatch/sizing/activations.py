"""Training activations from the architecture (Korthikanti et al. 2022).

"Reducing Activation Recomputation in Large Transformer Models" (Korthikanti et al.,
2022, section 4.1) counts the activations one transformer layer saves for the backward
pass, in 16-bit with 1-byte dropout masks and no recomputation, as
``s x b x h x (34 + 5 x a x s / h)`` bytes (s sequence length, b micro-batch, h hidden
size, a attention heads): 34·s·b·h for the projections, norms, MLP and masks, and
5·a·s²·b for the attention scores, their softmax and its dropout. Flash attention (and
PyTorch's memory-efficient SDPA) never materialises the s² scores, so the second term
vanishes. With full gradient (activation) checkpointing only each layer's input,
2·s·b·h bytes, is kept, and one layer's activations are rebuilt at a time in the
backward pass. The loss adds the logits as Hugging Face transformers keeps them
(`logits_bytes_per_value`): 16 bytes per token per vocabulary entry in 16-bit training.

`activation_parts` returns those parts in bytes; fp32 compute doubles the 16-bit terms.
The factor 34 is Korthikanti's for a GPT block (4h MLP, dropout); a Llama block (SwiGLU
MLP 8/3 h wide, no dropout) saves about the same per token (docs/sizing.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.sizing.models import ModelSpec

KORTHIKANTI_FACTOR = 34.0
"""Bytes per layer per token per hidden unit a 16-bit layer saves without recomputation."""

ATTENTION_SCORE_FACTOR = 5.0
"""Bytes per layer per head per (token x token) of attention scores without flash attention."""

LAYER_INPUT_FACTOR = 2.0
"""Bytes per layer per token per hidden unit kept with full checkpointing: the 16-bit input."""

FP32 = 4.0
"""Bytes of an fp32 value."""

LOGITS_BYTES = 16.0
"""Bytes per token per vocabulary entry of the logits and loss in 16-bit training.

How Hugging Face transformers computes a causal LM's loss (``LlamaForCausalLM.forward``
then ``ForCausalLMLoss`` in src/transformers/loss/loss_utils.py, v4.46 on; the same
steps inline in the forward before): the LM head writes 16-bit logits, b x s x V x 2 B;
``logits = logits.float()`` makes an fp32 copy (4 B); ``nn.functional.cross_entropy``
runs log-softmax and keeps its fp32 output for the backward pass (4 B); the backward pass
writes the fp32 gradient of the logits (4 B) and casts it back to 16-bit for the LM head
(2 B): 2 + 4 + 4 + 4 + 2 = 16. Checked against Unsloth's published max context of HF +
FlashAttention-2 QLoRA of Llama 3.1 8B on 24 GB (docs/sizing.md, validation table).
"""


def logits_bytes_per_value(compute_bytes: float = 2.0) -> float:
    """Bytes per token per vocabulary entry the logits and loss hold at their peak.

    16-bit compute: `LOGITS_BYTES` (16). fp32 compute has no upcast copy or cast-back
    gradient: logits, log-softmax output and gradient, 3 x 4 = 12.
    """
    if compute_bytes >= FP32:
        return 3 * FP32
    return 2 * compute_bytes + 3 * FP32


SIXTEEN_BIT = 2.0


@dataclass(frozen=True, slots=True)
class ActivationParts:
    """Activation bytes of one training step on one GPU, by part.

    `stored_bytes`: what every layer keeps until the backward pass (whole layers'
    activations without checkpointing, layer inputs with it). `working_bytes`: one
    layer's activations rebuilt during the backward pass (0 without checkpointing:
    already in `stored_bytes`). `logits_bytes`: the logits and the loss's copies and
    gradients of them (`logits_bytes_per_value` per token per vocabulary entry).
    """

    stored_bytes: int
    working_bytes: int
    logits_bytes: int

    @property
    def total_bytes(self) -> int:
        """The three parts together."""
        return self.stored_bytes + self.working_bytes + self.logits_bytes


def layer_activation_bytes(
    model: ModelSpec,
    context_tokens: int,
    batch: int,
    compute_bytes: float = SIXTEEN_BIT,
    *,
    flash_attention: bool = True,
    factor: float = KORTHIKANTI_FACTOR,
) -> float:
    """Bytes one layer saves without recomputation: s·b·h·factor (+ 5·a·s²·b without flash).

    Scaled by `compute_bytes` / 2 (the formula is for 16-bit activations).
    """
    s, b = context_tokens, batch
    per_layer = factor * s * b * model.hidden_size
    if not flash_attention:
        per_layer += ATTENTION_SCORE_FACTOR * model.attention_heads * s * s * b
    return per_layer * compute_bytes / SIXTEEN_BIT


def activation_parts(
    model: ModelSpec,
    context_tokens: int,
    batch: int,
    compute_bytes: float = SIXTEEN_BIT,
    *,
    checkpointing: bool,
    flash_attention: bool = True,
    factor: float = KORTHIKANTI_FACTOR,
) -> ActivationParts:
    """Activations of `batch` sequences of `context_tokens` tokens through `model`, bytes.

    Without checkpointing every layer keeps `layer_activation_bytes`; with it every layer
    keeps its input (2·s·b·h at 16-bit) and one layer's activations are live at a time.
    """
    if context_tokens <= 0 or batch <= 0:
        raise ValueError("context tokens and batch must be positive")
    layer = layer_activation_bytes(
        model, context_tokens, batch, compute_bytes, flash_attention=flash_attention, factor=factor
    )
    if checkpointing:
        layer_input = LAYER_INPUT_FACTOR * context_tokens * batch * model.hidden_size
        stored = model.layers * layer_input * compute_bytes / SIXTEEN_BIT
        working = layer
    else:
        stored = model.layers * layer
        working = 0.0
    logits = logits_bytes_per_value(compute_bytes) * context_tokens * batch * model.vocabulary
    return ActivationParts(
        stored_bytes=round(stored), working_bytes=round(working), logits_bytes=round(logits)
    )
