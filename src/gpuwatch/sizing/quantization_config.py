"""A Hugging Face ``quantization_config`` read into a `QuantizationScheme`.

`scheme_from_quantization_config` knows the methods gpuwatch sizes (AWQ, GPTQ, FP8,
bitsandbytes, MXFP4, compressed-tensors' NVFP4, INT8 and FP8) and what each leaves
16-bit (``modules_to_not_convert``/``ignore``); anything else is a
`QuantizationConfigError` naming the field. The schemes and their byte arithmetic are
`quantization`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gpuwatch.sizing.quantization import (
    AWQ_INT4,
    BNB_INT8,
    FP8,
    GPTQ_INT4,
    INT8,
    MXFP4,
    NVFP4,
    Covers,
    QuantizationConfigError,
    QuantizationScheme,
)


def _int_field(config: Mapping[str, object], key: str, default: int | None = None) -> int | None:
    value = config.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise QuantizationConfigError(
            f"quantization_config.{key} must be an integer, not {value!r}"
        )
    return value


def _names(config: Mapping[str, object], *keys: str) -> tuple[str, ...]:
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise QuantizationConfigError(
                f"quantization_config.{key} must be a list of module names, not {value!r}"
            )
        return tuple(str(item) for item in value)
    return ()


def _covers(skipped: tuple[str, ...]) -> Covers:
    """Every linear layer: the skip list itself (`QuantizationScheme.modules_to_not_convert`,
    applied module by module) keeps what the checkpoint leaves 16-bit."""
    del skipped
    return "linear"


def _kv_cache(config: Mapping[str, object]) -> str | None:
    """ "fp8" when ``kv_cache_scheme`` declares an FP8 cache (compressed-tensors: an 8-bit
    float; ModelOpt's config.json block: "FP8"), else None."""
    scheme = config.get("kv_cache_scheme")
    if isinstance(scheme, str):
        return "fp8" if scheme.upper() == "FP8" else None
    if (
        isinstance(scheme, Mapping)
        and scheme.get("num_bits") == 8
        and scheme.get("type") == "float"
    ):
        return "fp8"
    return None


def _int4_group(
    config: Mapping[str, object], base: QuantizationScheme, method: str
) -> QuantizationScheme:
    bits = _int_field(config, "bits", 4)
    if bits != 4:
        raise QuantizationConfigError(
            f"quantization_config.bits: {method} with {bits} bits is not sized (4 only)"
        )
    group = _int_field(config, "group_size", 128)
    skipped = _names(config, "modules_to_not_convert")
    return QuantizationScheme(
        name=base.name,
        method=method,
        bits=4,
        group_size=None if group == -1 else group,
        scale_bits=16,
        zero_bits=4,
        column_bits=base.column_bits,
        covers=_covers(skipped),
        modules_to_not_convert=skipped,
        description=base.description.replace("128", str(group) if group != -1 else "channel"),
    )


def _compressed_tensors(config: Mapping[str, object]) -> QuantizationScheme:
    groups = config.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise QuantizationConfigError(
            "quantization_config.config_groups: compressed-tensors needs at least one group"
        )
    first = next(iter(groups.values()))
    weights = first.get("weights") if isinstance(first, dict) else None
    if not isinstance(weights, dict):
        raise QuantizationConfigError(
            "quantization_config.config_groups.*.weights: missing weight quantization args"
        )
    # input_activations null: weights only (W4A16, W8A16, NVFP4A16), the math in 16 bits
    weight_only = (
        isinstance(first, dict)
        and "input_activations" in first
        and (first["input_activations"] is None)
    )
    bits = _int_field(weights, "num_bits")
    kind = weights.get("type")
    strategy = weights.get("strategy")
    skipped = _names(config, "ignore")
    fmt = config.get("format")
    if bits == 8 and kind == "float":
        base = FP8
    elif bits == 8 and kind == "int":
        base = INT8
    elif bits == 4 and fmt == "nvfp4-pack-quantized":
        base = NVFP4
    elif bits == 4 and kind == "int":
        group = _int_field(weights, "group_size", 128)
        return QuantizationScheme(
            name="w4a16",
            method="compressed-tensors",
            bits=4,
            group_size=group,
            scale_bits=16,
            zero_bits=0 if weights.get("symmetric", True) else 4,
            covers=_covers(skipped),
            modules_to_not_convert=skipped,
            kv_cache=_kv_cache(config),
            description=f"compressed-tensors W4A16: 4-bit weights, a 16-bit scale per {group}",
        )
    else:
        raise QuantizationConfigError(
            "quantization_config.config_groups.*.weights: "
            f"{bits}-bit {kind} ({fmt}) is not a format gpuwatch sizes"
        )
    return QuantizationScheme(
        name=base.name,
        method="compressed-tensors",
        bits=base.bits,
        group_size=base.group_size,
        scale_bits=base.scale_bits,
        per_tensor=strategy == "tensor",
        tensor_scale_bits=base.tensor_scale_bits,
        compute="bf16" if weight_only else base.compute,
        covers=_covers(skipped),
        modules_to_not_convert=skipped,
        kv_cache=_kv_cache(config),
        description=base.description
        + (" (per-tensor scales)" if strategy == "tensor" and base.group_size is None else "")
        + (", weights only" if weight_only else ""),
    )


def scheme_from_quantization_config(config: Mapping[str, object]) -> QuantizationScheme:
    """The scheme of a Hugging Face config.json's ``quantization_config``.

    Reads ``quant_method`` awq, gptq, fp8, fbgemm_fp8, compressed-tensors, mxfp4,
    modelopt (NVFP4/FP8) and bitsandbytes, with ``bits``, ``group_size``,
    ``modules_to_not_convert``/``ignore``; raises `QuantizationConfigError` naming the
    field for anything else.
    """
    method = config.get("quant_method")
    producer = config.get("producer")
    if method is None and isinstance(producer, Mapping) and producer.get("name") == "modelopt":
        method = "modelopt"  # ModelOpt's own config.json block names its producer instead
    if not isinstance(method, str):
        raise QuantizationConfigError(
            f"quantization_config.quant_method must be a string, not {method!r}"
        )
    method = method.lower()
    if method == "awq":
        return _int4_group(config, AWQ_INT4, "awq")
    if method == "gptq":
        return _int4_group(config, GPTQ_INT4, "gptq")
    if method in ("fp8", "fbgemm_fp8"):
        skipped = _names(config, "modules_to_not_convert", "ignored_layers")
        block = config.get("weight_block_size")
        if block is not None:
            if (
                not isinstance(block, list)
                or len(block) != 2
                or not all(isinstance(side, int) and side > 0 for side in block)
            ):
                raise QuantizationConfigError(
                    f"quantization_config.weight_block_size must be two positive integers, "
                    f"not {block!r}"
                )
            rows, cols = block
            return QuantizationScheme(
                name="fp8",
                method=method,
                bits=8,
                group_size=rows * cols,
                scale_bits=32,
                compute="fp8",
                covers=_covers(skipped),
                modules_to_not_convert=skipped,
                description=f"FP8 W8A8 (e4m3), one fp32 scale per {rows}x{cols} block",
            )
        return QuantizationScheme(
            name="fp8",
            method=method,
            bits=8,
            group_size=None,
            scale_bits=32,
            compute="fp8",
            covers=_covers(skipped),
            modules_to_not_convert=skipped,
            description=FP8.description,
        )
    if method == "compressed-tensors":
        return _compressed_tensors(config)
    if method == "mxfp4":
        skipped = _names(config, "modules_to_not_convert")
        return QuantizationScheme(
            name="mxfp4",
            method="mxfp4",
            bits=4,
            group_size=32,
            scale_bits=8,
            compute=MXFP4.compute,
            covers="experts",  # vLLM's Mxfp4Config quantizes the MoE experts only
            modules_to_not_convert=skipped,
            description=MXFP4.description,
        )
    if method == "modelopt":
        return _modelopt(config)
    if method == "bitsandbytes":
        skipped = _names(config, "llm_int8_skip_modules")
        if config.get("load_in_4bit"):
            kind = config.get("bnb_4bit_quant_type", "nf4")
            if kind not in ("nf4", "fp4"):
                raise QuantizationConfigError(
                    f"quantization_config.bnb_4bit_quant_type must be nf4 or fp4, not {kind!r}"
                )
            double = bool(config.get("bnb_4bit_use_double_quant", False))
            return QuantizationScheme(
                name="nf4" if kind == "nf4" else "bnb-fp4",
                method="bitsandbytes",
                bits=4,
                group_size=64,
                scale_bits=8 if double else 32,
                second_level_bits=32 / 256 if double else 0.0,
                covers=_covers(skipped),
                modules_to_not_convert=skipped,
                description=(
                    f"bitsandbytes {kind.upper()}, block 64, "
                    + ("double quantization" if double else "fp32 absmax")
                ),
            )
        if config.get("load_in_8bit"):
            return BNB_INT8
        raise QuantizationConfigError(
            "quantization_config.load_in_4bit/load_in_8bit: bitsandbytes config loads neither"
        )
    raise QuantizationConfigError(
        f"quantization_config.quant_method {method!r} is not one gpuwatch sizes "
        "(awq, gptq, fp8, fbgemm_fp8, compressed-tensors, mxfp4, modelopt, bitsandbytes)"
    )


def _modelopt(config: Mapping[str, object]) -> QuantizationScheme:
    """NVIDIA ModelOpt: ``quant_algo`` FP8 (per-tensor scales), NVFP4 (``group_size``
    16) or W4A8_AWQ (int4, ``group_size`` 128, FP8 activations), ``exclude_modules``,
    ``kv_cache_quant_algo`` FP8 (vLLM's ``ModelOptQuantConfigBase.from_config``)."""
    algo = config.get("quant_algo")
    algo = algo.upper() if isinstance(algo, str) else algo
    skipped = _names(config, "exclude_modules", "modules_to_not_convert", "ignore")
    kv = config.get("kv_cache_quant_algo")
    if kv is not None and not isinstance(kv, str):
        raise QuantizationConfigError(
            f"quantization_config.kv_cache_quant_algo must be a string, not {kv!r}"
        )
    kv_cache = "fp8" if isinstance(kv, str) and kv.upper() == "FP8" else _kv_cache(config)
    if algo == "NVFP4":
        group = _int_field(config, "group_size", NVFP4.group_size) or NVFP4.group_size
        base = replace(NVFP4, group_size=group)
    elif algo == "FP8":
        base = replace(
            FP8,
            per_tensor=True,
            description="FP8 W8A8 (e4m3): 8-bit weights, one fp32 scale per tensor",
        )
    elif algo == "W4A8_AWQ":
        group = _int_field(config, "group_size", 128) or 128
        base = QuantizationScheme(
            name="w4a8-awq",
            method="modelopt",
            bits=4,
            group_size=group,
            scale_bits=16,
            compute="fp8",
            description=f"ModelOpt W4A8 AWQ: int4 weights, a 16-bit scale per {group}, FP8 math",
        )
    else:
        raise QuantizationConfigError(
            f"quantization_config.quant_algo: modelopt {algo!r} is not sized (FP8, NVFP4, W4A8_AWQ)"
        )
    return replace(
        base,
        method="modelopt",
        covers=_covers(skipped),
        modules_to_not_convert=skipped,
        kv_cache=kv_cache,
    )


def quantization_config_from_hf_quant_config(data: Mapping[str, object]) -> dict[str, object]:
    """A ``quantization_config`` (quant_method modelopt) from ModelOpt's
    ``hf_quant_config.json``: its ``quantization`` table's ``quant_algo``,
    ``kv_cache_quant_algo``, ``group_size`` and ``exclude_modules``, as vLLM reads the file
    (``ModelOptQuantConfigBase.get_config_filenames``/``from_config``)."""
    table = data.get("quantization")
    if not isinstance(table, Mapping):
        raise QuantizationConfigError("hf_quant_config.json: quantization must be an object")
    if table.get("quant_algo") is None:
        raise QuantizationConfigError("hf_quant_config.json: quantization.quant_algo is missing")
    return {"quant_method": "modelopt", **table}
