"""Give the C heap's free pages back to the system once, after start-up.

Start-up (reading the config and the catalogs, the first sample and render) leaves
freed memory that glibc's malloc keeps for reuse; a plain agent does not allocate that
much again, so it would stay resident for the life of the process. glibc's
`malloc_trim(0)` returns the free pages at the top of the heap and inside its arenas to
the system. `gpuwatch run` calls it once after the agent has started: about 1.1 MiB
less resident memory after a simulated hour on dgx-h100 (docs/benchmarks.md). It is
the documented glibc call for this, with no effect on what the agent does; on a libc
without it (musl) nothing happens.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)


def trim_heap() -> bool:
    """`malloc_trim(0)`: True when memory was given back; False otherwise (no glibc)."""
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return False
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim.restype = ctypes.c_int
    released = bool(malloc_trim(0))
    log.debug("malloc_trim(0) after start-up: %s", "memory given back" if released else "none")
    return released
