"""A model's linear modules by name, and a checkpoint's skip list applied to them.

A quantized checkpoint names what it leaves unquantized by module name
(``modules_to_not_convert``, ``ignore``, ``exclude_modules``). `linear_modules` lays a
`ModelSpec` out as the Hugging Face module names its weights carry, layer by layer
(``model.layers.{i}.self_attn.{q,k,v,o}_proj``, ``model.layers.{i}.mlp.{gate,up,down}_proj``,
``model.layers.{i}.mlp.experts``, the router ``model.layers.{i}.mlp.gate``, the shared
experts ``model.layers.{i}.mlp.shared_experts``); `skipped` says whether a skip-list
entry names a module. Only names and parameter counts live here; bytes are
`quantization`'s.

Matching (`skipped`), one rule for every method:

- ``re:PATTERN``: a regular expression matched from the start of the module name
  (compressed-tensors' ``ignore``, which vLLM applies with ``re.match``);
- an entry with ``*``, ``?`` or ``[``: a shell wildcard (``fnmatch``) over the module
  name or one of its dotted prefixes (ModelOpt's ``exclude_modules``, which vLLM's
  ``ModelOptQuantConfigBase.is_layer_excluded`` matches with ``fnmatch``; gpt-oss's
  ``model.layers.*.self_attn``);
- anything else: its dot-separated parts appear, contiguously, among the module name's
  parts (``self_attn`` every layer's attention, ``model.layers.0.mlp`` layer 0's MLP but
  not layer 10's, ``model.layers.3.mlp.gate`` the router and not ``gate_proj``; the
  full names of fbgemm_fp8's and vLLM's ``ignored_layers`` match exactly).

A multimodal checkpoint's ``model.language_model.`` or ``language_model.`` prefix is read
as the text model's ``model.`` (transformers issue #48349: lists written with the wrapper's
prefix must still match the text stack).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from gpuwatch.sizing.models import ModelSpec

MLP_ALIASES = ("mlp", "block_sparse_moe", "feed_forward")
"""What families call the MLP container: Llama/Qwen/DeepSeek/gpt-oss, Mixtral, Llama 4."""


@dataclass(frozen=True, slots=True)
class LinearModule:
    """One linear module (or one layer's experts) of a model.

    `names`: the module's Hugging Face name and the aliases families use for it (the
    first is the canonical one). `parameters`: its weights. `expert`: routed experts.
    `router`: an MoE router (kept 16-bit unless covered like any other linear layer).
    """

    names: tuple[str, ...]
    parameters: int
    expert: bool = False
    router: bool = False

    @property
    def name(self) -> str:
        """The canonical module name."""
        return self.names[0]


def _mlp_names(layer: int, tail: str) -> tuple[str, ...]:
    return tuple(f"model.layers.{layer}.{container}.{tail}" for container in MLP_ALIASES)


def _layer_modules(model: ModelSpec, layer: int, attention_extra: int) -> list[LinearModule]:
    hidden, heads, kv, dim = (
        model.hidden_size,
        model.attention_heads,
        model.kv_heads,
        model.head_dim,
    )
    prefix = f"model.layers.{layer}.self_attn"
    modules: list[LinearModule] = []
    if model.is_mla:
        # MLA's projections (q_a/q_b, kv_a/kv_b, o) are counted as one block
        modules.append(LinearModule((prefix,), attention_extra))
    else:
        for proj, count in (
            ("q_proj", hidden * heads * dim),
            ("k_proj", hidden * kv * dim),
            ("v_proj", hidden * kv * dim),
            ("o_proj", heads * dim * hidden),
        ):
            modules.append(LinearModule((f"{prefix}.{proj}",), count))
        # biases, q/k norms, sinks: ride with attention
        modules.append(LinearModule((prefix,), attention_extra))
    projections = (
        ("gate_proj", "up_proj", "down_proj") if model.gated_mlp else ("up_proj", "down_proj")
    )
    if model.is_moe and layer >= model.dense_layers:
        per_projection = model.experts * hidden * model.expert_size
        for proj in projections:
            modules.append(LinearModule(_mlp_names(layer, f"experts.{proj}"), per_projection, True))
        modules.append(
            LinearModule(
                (*_mlp_names(layer, "gate"), f"model.layers.{layer}.mlp.router"),
                hidden * model.experts,
                router=True,
            )
        )
        if model.shared_experts:
            shared = model.shared_experts * hidden * model.expert_size
            for proj in projections:
                modules.append(
                    LinearModule(
                        (
                            *_mlp_names(layer, f"shared_experts.{proj}"),
                            f"model.layers.{layer}.mlp.shared_expert.{proj}",
                        ),
                        shared,
                    )
                )
    else:
        for proj in projections:
            modules.append(LinearModule(_mlp_names(layer, proj), hidden * model.mlp_size))
    return modules


@functools.lru_cache(maxsize=256)
def linear_modules(model: ModelSpec, linear_parameters: int) -> tuple[LinearModule, ...]:
    """`model`'s linear modules, layer by layer, whose parameters add up to
    `linear_parameters` (the non-expert linear weights) plus `model.expert_parameters`.

    What the named projections do not account for (biases, q/k norms, attention sinks,
    MLA's whole attention) is spread over the layers as a ``self_attn`` module."""
    layers = model.layers
    shaped = [_layer_modules(model, layer, 0) for layer in range(layers)]
    named = sum(m.parameters for layer in shaped for m in layer if not m.expert)
    rest = linear_parameters - named
    per_layer, first = divmod(rest, layers) if rest >= 0 else (0, rest)
    modules: list[LinearModule] = []
    for layer in range(layers):
        extra = per_layer + (first if layer == 0 else 0)
        modules.extend(_layer_modules(model, layer, extra))
    return tuple(modules)


def _canonical(name: str) -> str:
    for wrapper in ("model.language_model.", "language_model.model.", "language_model."):
        if name.startswith(wrapper):
            return "model." + name.removeprefix(wrapper)
    return name


def _runs(name: str) -> Iterable[str]:
    """Every contiguous run of `name`'s dot-separated parts."""
    parts = name.split(".")
    for start in range(len(parts)):
        for end in range(start + 1, len(parts) + 1):
            yield ".".join(parts[start:end])


def _prefixes(name: str) -> Iterable[str]:
    parts = name.split(".")
    return (".".join(parts[:end]) for end in range(len(parts), 0, -1))


@dataclass(frozen=True, slots=True)
class _Matcher:
    """A skip list compiled: plain entries as a set of dotted runs, wildcards and
    regular expressions as compiled patterns."""

    plain: frozenset[str]
    wildcards: tuple[re.Pattern[str], ...]
    regexes: tuple[re.Pattern[str], ...]

    def __call__(self, name: str) -> bool:
        if any(run in self.plain for run in _runs(name)):
            return True
        if any(p.match(prefix) for p in self.wildcards for prefix in _prefixes(name)):
            return True
        return any(p.match(name) for p in self.regexes)


@functools.lru_cache(maxsize=64)
def _matcher(entries: tuple[str, ...]) -> _Matcher:
    plain: set[str] = set()
    wildcards: list[re.Pattern[str]] = []
    regexes: list[re.Pattern[str]] = []
    for entry in entries:
        if entry.startswith("re:"):
            try:
                regexes.append(re.compile(entry[3:]))
            except re.error:
                continue  # a broken pattern names nothing
        elif any(ch in entry for ch in "*?["):
            wildcards.append(re.compile(fnmatch.translate(_canonical(entry))))
        else:
            plain.add(_canonical(entry))
    return _Matcher(frozenset(plain), tuple(wildcards), tuple(regexes))


def skipped(module: LinearModule, entries: tuple[str, ...]) -> bool:
    """Whether a skip-list entry (`entries`) names `module` (rules in the module doc)."""
    match = _matcher(entries)
    return any(match(name) for name in module.names)


@functools.lru_cache(maxsize=256)
def skipped_flags(
    model: ModelSpec, linear_parameters: int, entries: tuple[str, ...]
) -> tuple[bool, ...]:
    """`skipped` for each of `linear_modules(model, linear_parameters)`, in order."""
    return tuple(skipped(m, entries) for m in linear_modules(model, linear_parameters))
