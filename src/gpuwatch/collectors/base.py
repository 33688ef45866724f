"""The wrapper every collector runs in: timing and success, one log line per failure."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from gpuwatch.core.clock import Clock
from gpuwatch.core.failures import CollectorFailedError
from gpuwatch.core.snapshot import CollectorResult

log = logging.getLogger(__name__)

T = TypeVar("T")


def timed(
    name: str, clock: Clock, run: Callable[[], T], *, failed: Callable[[], T]
) -> tuple[T, CollectorResult]:
    """Run a collector; on CollectorFailedError use `failed()` and report success 0.

    Unexpected exceptions propagate: they are bugs, not data-source failures.
    """
    start = clock.monotonic()
    try:
        value = run()
        success = True
    except CollectorFailedError as exc:
        log.debug("collector %s failed: %s", name, exc)
        value = failed()
        success = False
    return value, CollectorResult(name, success, max(clock.monotonic() - start, 0.0))
