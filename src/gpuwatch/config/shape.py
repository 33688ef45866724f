"""Walking `Config`'s shape: what a dotted path holds, and the key a misspelling meant.

Shared by the environment overrides (`env`: does `GPUWATCH_A__B` name an option?) and
the loader (`load`: which option did an unknown file key mean?).
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from gpuwatch.config.schema import Config


@dataclass(frozen=True, slots=True)
class Shape:
    """What a config path holds: a section model, a list of them, a table or a value."""

    model: type[BaseModel] | None = None
    is_list: bool = False
    is_table: bool = False


def shape_of(annotation: Any) -> Shape:
    """The shape of a field from its annotation (`X | None`, `list[X]`, `dict[...]`)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return Shape(model=annotation)
    if origin is typing.Annotated:
        return shape_of(args[0])
    if origin is list and args:
        inner = shape_of(args[0])
        return Shape(model=inner.model, is_list=inner.model is not None)
    if origin is dict:
        return Shape(is_table=True)
    if len(args) == 1:  # Optional[X]
        return shape_of(args[0])
    return Shape()


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate `word` most likely meant (a misspelling), or None when none is close."""
    found = difflib.get_close_matches(word, list(candidates), 1, 0.6)
    return found[0] if found else None


def closest_key(loc: Sequence[str | int]) -> str | None:
    """The dotted path of the option or section that the unknown file key at `loc` most
    likely meant (a sibling of it), or None when none is close."""
    model: type[BaseModel] | None = Config
    for part in loc[:-1]:
        if isinstance(part, int):
            continue  # an item of a list of sections
        field = model.model_fields.get(part) if model is not None else None
        model = shape_of(field.annotation).model if field is not None else None
    if model is None:
        return None
    key = closest(str(loc[-1]), model.model_fields)
    return ".".join([*(str(p) for p in loc[:-1]), key]) if key else None
