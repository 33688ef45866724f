"""Vision towers beside a text model: their parameters, from ``vision_config``.

A vision-language checkpoint (Qwen2.5-VL, Qwen3-VL) holds a vision encoder and a
projector beside its text model; every weight is resident when it serves, so the count
includes them (`ModelSpec.vision_parameters`), weight matrix by weight matrix, as
Transformers builds them (``modeling_qwen2_5_vl.py``, ``modeling_qwen3_vl.py``; read,
not copied):

- Qwen2.5-VL: a Conv3d patch embedding without bias (channels x temporal patch x patch
  x patch x hidden); per block two RMSNorms, qkv (hidden x 3 hidden) and proj with
  biases, a gated MLP (gate, up, down) with biases; a merger of an RMSNorm and two
  linear layers with biases (4 hidden x 4 hidden, 4 hidden x out_hidden_size), 4 being
  spatial_merge_size squared.
- Qwen3-VL: the patch embedding with a bias, a learned position embedding
  (num_position_embeddings x hidden); per block two LayerNorms (weight and bias), qkv
  and proj with biases, a plain MLP (fc1, fc2) with biases; the merger (LayerNorm over
  hidden) and one more per ``deepstack_visual_indexes`` entry (LayerNorm over 4 hidden).

The vision tokens' own cache is the text model's: images become tokens of the context.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwatch.sizing.hf_families import Vision
from gpuwatch.sizing.hf_keys import ConfigJsonError, positive, section


def _linear(inputs: int, outputs: int) -> int:
    """A linear layer with a bias."""
    return inputs * outputs + outputs


def _qwen2_5_vl(vision: Mapping[str, object]) -> int:
    hidden = positive(vision, "hidden_size")
    width = positive(vision, "intermediate_size")
    depth = positive(vision, "depth")
    channels = positive(vision, "in_chans", positive(vision, "in_channels", 3))
    patch = positive(vision, "patch_size")
    temporal = positive(vision, "temporal_patch_size")
    merged = hidden * positive(vision, "spatial_merge_size") ** 2
    out = positive(vision, "out_hidden_size")
    block = (
        2 * hidden  # norm1, norm2 (RMSNorm)
        + _linear(hidden, 3 * hidden)
        + _linear(hidden, hidden)
        + 2 * _linear(hidden, width)  # gate, up
        + _linear(width, hidden)
    )
    merger = hidden + _linear(merged, merged) + _linear(merged, out)
    return channels * temporal * patch * patch * hidden + depth * block + merger


def _qwen3_vl(vision: Mapping[str, object]) -> int:
    hidden = positive(vision, "hidden_size")
    width = positive(vision, "intermediate_size")
    depth = positive(vision, "depth")
    channels = positive(vision, "in_channels", 3)
    patch = positive(vision, "patch_size")
    temporal = positive(vision, "temporal_patch_size")
    merged = hidden * positive(vision, "spatial_merge_size") ** 2
    out = positive(vision, "out_hidden_size")
    positions = positive(vision, "num_position_embeddings")
    deepstack = vision.get("deepstack_visual_indexes") or []
    if not isinstance(deepstack, list):
        raise ConfigJsonError("config.json: vision_config.deepstack_visual_indexes must be a list")
    block = (
        4 * hidden  # norm1, norm2 (LayerNorm: weight and bias)
        + _linear(hidden, 3 * hidden)
        + _linear(hidden, hidden)
        + _linear(hidden, width)
        + _linear(width, hidden)
    )
    projection = _linear(merged, merged) + _linear(merged, out)
    mergers = 2 * hidden + projection + len(deepstack) * (2 * merged + projection)
    embedding = channels * temporal * patch * patch * hidden + hidden
    return embedding + positions * hidden + depth * block + mergers


def vision_parameters(kind: Vision, config: Mapping[str, object]) -> int:
    """Parameters of the vision tower `kind` that ``config["vision_config"]`` describes
    (0 for "none" and for a config without one: a text model taken out of its VL
    checkpoint); errors name the ``vision_config`` key."""
    vision = section(config, "vision_config")
    if kind == "none" or vision is None:
        return 0
    try:
        return _qwen2_5_vl(vision) if kind == "qwen2_5_vl" else _qwen3_vl(vision)
    except ConfigJsonError as exc:
        raise ConfigJsonError(
            str(exc).replace("config.json: ", "config.json: vision_config.")
        ) from None
