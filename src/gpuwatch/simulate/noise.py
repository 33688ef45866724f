"""Deterministic pseudo-random numbers keyed by integers, with no global state.

The stand-in's jitter and varying levels come from `unit(*keys)`: the same keys give
the same number in every run and on every platform (no `random`, no `hash()`).
"""

from __future__ import annotations

import hashlib

_MASK = (1 << 64) - 1
_TO_UNIT = 1.0 / (1 << 53)


def _mix64(x: int) -> int:
    """SplitMix64 finaliser: a well-spread 64-bit hash of a 64-bit integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def unit(*keys: int) -> float:
    """A number in [0, 1) determined only by `keys`."""
    h = 0
    for key in keys:
        h = _mix64(h ^ (key & _MASK))
    return (h >> 11) * _TO_UNIT


def prefix(*keys: int) -> int:
    """The hash state after `keys`: `signed_after(prefix(a, b), c) == signed(a, b, c)`."""
    h = 0
    for key in keys:
        h = _mix64(h ^ (key & _MASK))
    return h


def signed_after(state: int, key: int) -> float:
    """`signed(*keys, key)` from `state = prefix(*keys)`: one hash step instead of all."""
    return 2.0 * ((_mix64(state ^ (key & _MASK)) >> 11) * _TO_UNIT) - 1.0


def signed(*keys: int) -> float:
    """A number in [-1, 1) determined only by `keys`."""
    return 2.0 * unit(*keys) - 1.0


def stable_seed(*parts: str | int) -> int:
    """A 64-bit seed from strings and integers (stable across processes)."""
    text = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def hex_digits(count: int, *parts: str | int) -> str:
    """`count` lowercase hex digits derived from `parts` (for UUIDs)."""
    text = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return hashlib.blake2b(text, digest_size=32).hexdigest()[:count]
