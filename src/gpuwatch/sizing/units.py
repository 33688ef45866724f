"""Units of the sizing model, and parameter counts written with a unit suffix.

Sizes are bytes; the seeds, the vendors and this package's catalogs speak decimal
gigabytes (1 GB = 10**9 bytes), and `GIB` (2**30 bytes) is there only to print what
`nvidia-smi` and PyTorch call "GB". Rates are per second, prices USD.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from gpuwatch.core.units import GIB
from gpuwatch.core.units import HOURS_PER_YEAR as HOURS_PER_YEAR  # noqa: PLC0414 - re-exported

GB = 10**9
"""One decimal gigabyte in bytes: the unit of datasheets, price lists and the seeds."""


TERA = 10**12
"""TFLOPS to FLOP/s, TB/s to bytes/s."""

_MULTIPLIERS = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
_PARAM_COUNT = re.compile(r"(?P<number>\d[\d_]*(?:\.\d*)?(?:e[+-]?\d+)?)\s*(?P<suffix>[kmbt]?)")


def to_gb(n_bytes: float) -> float:
    """Bytes to decimal GB."""
    return n_bytes / GB


def to_gib(n_bytes: float) -> float:
    """Bytes to binary GiB."""
    return n_bytes / GIB


def parse_param_count(text: str) -> int:
    """A parameter count from ``7e9``, ``7B``, ``70b``, ``1.5B``, ``125M``, ``7_000_000_000``.

    Suffixes (any case): K thousand, M million, B billion, T trillion. Raises ValueError.
    """
    match = _PARAM_COUNT.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(f"expected a parameter count like 7B, 1.5B, 125M or 7e9, got {text!r}")
    try:
        number = Decimal(match["number"].replace("_", ""))
    except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
        raise ValueError(f"not a number: {text!r}") from None
    value = number * _MULTIPLIERS[match["suffix"]]
    if value < 1:
        raise ValueError(f"a parameter count must be at least 1, got {text!r}")
    return int(value.to_integral_value())
