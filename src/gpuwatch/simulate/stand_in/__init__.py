"""`SimulatedNvml`: a module-like stand-in for `pynvml`, driven by a scenario and a clock.

It has pynvml's function names and argument conventions, returns pynvml's own ctypes
structs, strings where pynvml decodes them, and raises pynvml's own exception classes.
Any other attribute comes from the real `pynvml` module (constants, struct and
exception classes), except NVML functions the stand-in does not implement: those
raise `NVMLError_FunctionNotFound`, like a driver that lacks the symbol. Nothing here
loads the NVML library.

Time: scenario time t = clock.time() - start_time (s, never below 0). Every value is a
deterministic function of the scenario, the calls made and the times they are made at.

Semantics worth knowing (see also the README section of `gpuwatch.simulate.scenario`):

* Memory v1 `used` includes `reserved`; v2 `used` excludes it (`free = total -
  reserved - used`). An empty GPU has 1 MiB used (v2).
* Energy (mJ) counts from driver load: it starts at a large non-zero value (idle
  power over 2-30 days of uptime), then adds the exact integral of the noise-free
  power; NVLink counters (KiB) integrate their rates from t = 0, whatever the query
  pattern; `timestamp`s are epoch µs.
* Process utilization: the driver takes one sample per process per simulated second
  (at whole scenario seconds, timeStamp = epoch µs) and keeps the last 120. A call
  averages, per process, the samples newer than `lastSeenTimeStamp` (0: the whole
  buffer, so a caller that never advances it reads stale averages); NotFound when
  there is none newer.
* GPM: see `gpuwatch.simulate.gpm`. XID events: see `gpuwatch.simulate.events`.

Here: the class and its module-like surface (`__getattr__`, `as_nvml_api`). The calls
live in one module per kind, each a base class of `SimulatedNvml`: `state` (devices,
handles, clock), `checks` (init, and the checks and refusals every call makes),
`identity_calls`, `reading_calls`, `mig_calls`, `process_calls` (with the Slurm node's
processes), `event_calls` (XIDs) and `gpm_calls`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NoReturn

import pynvml

from gpuwatch.nvml.api import NvmlApi
from gpuwatch.simulate.stand_in.event_calls import EventCalls
from gpuwatch.simulate.stand_in.gpm_calls import GpmCalls
from gpuwatch.simulate.stand_in.identity_calls import IdentityCalls
from gpuwatch.simulate.stand_in.mig_calls import MigCalls
from gpuwatch.simulate.stand_in.process_calls import ProcessCalls
from gpuwatch.simulate.stand_in.reading_calls import ReadingCalls

_PURE_HELPERS = frozenset(
    {"nvmlExceptionClass", "nvmlFriendlyObjectToStruct", "nvmlStructToFriendlyObject"}
)
"""pynvml functions that never call NVML: passed through unchanged."""


def _missing(name: str) -> Callable[..., NoReturn]:
    def missing(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise pynvml.NVMLError_FunctionNotFound()

    missing.__name__ = missing.__qualname__ = name
    missing.__doc__ = f"{name}: not implemented by the stand-in (FunctionNotFound)."
    return missing


class SimulatedNvml(IdentityCalls, ReadingCalls, MigCalls, ProcessCalls, EventCalls, GpmCalls):
    """A stand-in for the `pynvml` module over a simulated fleet."""

    def __getattr__(self, name: str) -> Any:
        """pynvml's attribute, or a FunctionNotFound stub for an unimplemented NVML call."""
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            value = getattr(pynvml, name)
        except AttributeError:
            raise AttributeError(f"pynvml has no attribute {name!r}") from None
        if name.startswith("nvml") and inspect.isfunction(value) and name not in _PURE_HELPERS:
            value = _missing(name)
        self.__dict__[name] = value
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(pynvml)))


def as_nvml_api(nv: SimulatedNvml) -> NvmlApi:
    """`nv` as the NVML surface gpuwatch calls. Also mypy's check that the stand-in
    satisfies `NvmlApi`: every function it defines has the protocol's signature (the
    rest it answers from pynvml, as `__getattr__` says)."""
    return nv
