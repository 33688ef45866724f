"""What a checkpoint's files say about its quantization beyond config.json's keys:
ModelOpt's sibling ``hf_quant_config.json``, and the catalog precision a scheme stands for."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import get_args

from gpuwatch.sizing.bounded_json import BoundedJsonError, read_json
from gpuwatch.sizing.hf_keys import ConfigJsonError
from gpuwatch.sizing.models import PublishedPrecision
from gpuwatch.sizing.quantization import QuantizationScheme
from gpuwatch.sizing.quantization_config import quantization_config_from_hf_quant_config

HF_QUANT_CONFIG = "hf_quant_config.json"
"""ModelOpt's quantization file beside config.json (vLLM's ModelOpt configs read it:
``get_config_filenames``); it declares the scheme when config.json has none."""


def published_precision(scheme: QuantizationScheme | None) -> str | None:
    """The `ModelSpec.published_precision` a checkpoint's scheme stands for: its name when
    `gpuwatch size --precision` knows it (fp8, mxfp4, nvfp4, awq-int4...), else None."""
    if scheme is None or scheme.name not in get_args(PublishedPrecision):
        return None
    return scheme.name


def with_hf_quant_config(path: Path, data: dict[str, object]) -> dict[str, object]:
    """`data` (the config.json at `path`) with the ``quantization_config`` a sibling
    ``hf_quant_config.json`` declares, when config.json declares none itself."""
    text = data.get("text_config")
    if data.get("quantization_config") is not None or (
        isinstance(text, Mapping) and text.get("quantization_config") is not None
    ):
        return data
    sibling = path.parent / HF_QUANT_CONFIG
    if not sibling.is_file():
        return data
    try:
        raw = read_json(sibling)  # bounded: size, depth (sizing.bounded_json)
    except BoundedJsonError as exc:
        raise ConfigJsonError(str(exc)) from None
    if not isinstance(raw, dict):
        raise ConfigJsonError(f"{sibling}: an hf_quant_config.json is a JSON object")
    try:
        declared = quantization_config_from_hf_quant_config(raw)
    except ValueError as exc:
        raise ConfigJsonError(f"{sibling}: {exc}") from None
    return {**data, "quantization_config": declared}
