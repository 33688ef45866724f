"""The command line's number type: one argparse `type` for every float flag.

`number(gt=0)` parses a flag's text as a finite float within its bounds (pydantic's
names: `gt`, `ge`, `lt`, `le`) and refuses anything else — `nan`, `inf`, `-1`, `0`
where it means nothing — so argparse answers with the flag's name and exit 2:
`gpuwatch plan: error: argument --days: expected a finite number > 0, got 'nan'`.
`plan`, `report`, `size` and `tco` use it for each of their float flags.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _bounds(gt: float | None, ge: float | None, lt: float | None, le: float | None) -> str:
    """` > 0`, ` in [0, 1)`: the bounds in words ("" without any)."""
    low = f"({gt:g}" if gt is not None else f"[{ge:g}" if ge is not None else None
    high = f"{lt:g})" if lt is not None else f"{le:g}]" if le is not None else None
    if low is not None and high is not None:
        return f" in {low}, {high}"
    if low is not None:
        return f" >{'' if gt is not None else '='} {low[1:]}"
    if high is not None:
        return f" <{'' if lt is not None else '='} {high[:-1]}"
    return ""


def number(
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
) -> Callable[[str], float]:
    """An argparse `type`: the text as a finite float within the bounds given, else
    `argparse.ArgumentTypeError` saying what was expected (argparse adds the flag)."""
    wanted = f"a finite number{_bounds(gt, ge, lt, le)}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        if (
            not math.isfinite(value)
            or (gt is not None and not value > gt)
            or (ge is not None and not value >= ge)
            or (lt is not None and not value < lt)
            or (le is not None and not value <= le)
        ):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


POSITIVE = number(gt=0)
"""A finite number > 0: durations, limits, prices that must exist."""

NON_NEGATIVE = number(ge=0)
"""A finite number >= 0: amounts where 0 means none."""
