"""Served model names: which catalog model an inference server's `model_name` is.

`match_served_model` reduces a Hugging Face repository id, a local path or a catalog
name to its base words (the tuning and checkpoint-layout words dropped) and looks them
up in a `ModelCatalog`; the layout words say the checkpoint's precision. Names only:
the catalog itself and its schema are `gpuwatch.sizing.models`'.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gpuwatch.sizing.models import ModelCatalog, ModelSpec

_VARIANT_WORDS = frozenset(
    {
        "instruct", "chat", "it", "hf", "base", "dynamic", "quantized",
        "fp8", "fp16", "bf16", "int4", "int8", "awq", "gptq", "w4a16", "w8a8", "w8a16",
        "bnb", "4bit", "8bit", "nf4", "mxfp4", "nvfp4",
    }
)  # fmt: skip
"""Words a served model's name adds to its base model's: the tuning, the checkpoint's
layout. Dropped (but for the first word) before a name is looked up."""
_VARIANT = re.compile(r"^(\d{4}|quantized\.\w+)$")
"""Also dropped: a 4-digit release of the same architecture (2503, 0324), and
neuralmagic's quantized.w8a8. A version (v0.1, v0.3) is kept: it can change the shape."""
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
_WORD_SPLIT = re.compile(r"[-_\s]+")


def _layout_of(words: Sequence[str]) -> str | None:
    """The checkpoint layout (a `[[workloads]]` precision name) the dropped words say."""
    said = set(words)
    for word in words:
        if word.startswith("quantized."):
            said.add(word.partition(".")[2])
    for wanted, layout in (
        ({"mxfp4"}, "mxfp4"),
        ({"nvfp4"}, "nvfp4"),
        ({"awq"}, "awq-int4"),
        ({"w4a16"}, "gptq-int4"),
        ({"gptq", "int8"}, "int8"),
        ({"gptq"}, "gptq-int4"),
        ({"nf4"}, "nf4"),
        ({"bnb", "8bit"}, "bnb-int8"),
        ({"bnb"}, "nf4"),
        ({"fp8"}, "fp8"),
        ({"w8a8"}, "int8"),
        ({"int4"}, "int4"),
        ({"int8"}, "int8"),
        ({"fp16"}, "fp16"),
        ({"bf16"}, "bf16"),
    ):
        if wanted <= said:
            return layout
    return None


def _base_words(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the base model's words, the variant words dropped) of a served model's name:
    the last path part, case-folded, split at ``-``, ``_`` and spaces, without a leading
    ``meta`` (Meta-Llama-3.1-8B) and, after the first word, without the variant words."""
    last = name.strip().rstrip("/").rsplit("/", 1)[-1].casefold()
    words = [w for w in _WORD_SPLIT.split(last) if w]
    if words[:1] == ["meta"] and len(words) > 1:
        words = words[1:]
    kept, dropped = words[:1], list[str]()
    for word in words[1:]:
        variant = word in _VARIANT_WORDS or _VARIANT.match(word)
        (dropped if variant else kept).append(word)
    return tuple(kept), tuple(dropped)


def _catalog_keys(model: ModelSpec) -> set[tuple[str, ...]]:
    """The base words a served name may reduce to for `model`: its catalog name's, and
    those of the Hugging Face repository its `source` names first."""
    keys = {_base_words(model.name)[0]}
    first = model.source.split(maxsplit=1)[0] if model.source.strip() else ""
    if _REPO_ID.match(first):
        keys.add(_base_words(first)[0])
    return keys


@dataclass(frozen=True, slots=True)
class ServedModelMatch:
    """What the catalog says a served model's name is.

    `model` is the catalog entry (None: `status` "unknown", or "ambiguous" with the
    `candidates` it could be); `layout` is the checkpoint layout the name says
    (``-AWQ``: "awq-int4", ``-FP8``: "fp8", ...; a `[[workloads]]` precision name),
    None when it says none.
    """

    model: ModelSpec | None
    status: Literal["matched", "unknown", "ambiguous"]
    layout: str | None = None
    candidates: tuple[str, ...] = ()


def match_served_model(name: str, catalog: ModelCatalog) -> ServedModelMatch:
    """The catalog model an inference server's model name (a Hugging Face repository id
    such as ``meta-llama/Llama-3.1-8B-Instruct``, a local path, or a catalog name) serves.

    The name's base words (`_base_words`: ``llama 3.1 8b``, the tuning and layout words
    ``instruct``, ``awq``, ``fp8``... dropped) must equal those of exactly one catalog
    entry's name or source repository; a different size, generation, version or extra
    word (``abliterated``) is unknown rather than a guess.
    """
    if name in catalog:
        return ServedModelMatch(catalog.get(name), "matched")
    words, dropped = _base_words(name)
    found = [model for model in catalog if words and words in _catalog_keys(model)]
    layout = _layout_of(dropped)
    if len(found) == 1:
        return ServedModelMatch(found[0], "matched", layout)
    if found:
        return ServedModelMatch(None, "ambiguous", layout, tuple(m.name for m in found))
    return ServedModelMatch(None, "unknown", layout)
