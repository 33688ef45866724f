"""The error a data source raises when it fails: one type every source layer may use.

A bottom module (it imports nothing of gpuwatch), so that a source package (billing,
tokens, NVML) can say "this attempt failed" without importing the agent's collectors,
which sit above it. `gpuwatch.collectors.base.timed` turns it into a success of 0 and
one log line; anything else a source raises is a bug and propagates.
"""

from __future__ import annotations

__all__ = ["CollectorFailedError"]


class CollectorFailedError(Exception):
    """A collector failed; the message is already log-safe (no secrets)."""
