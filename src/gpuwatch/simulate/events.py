"""Event sets (nvmlEventSet*): which XIDs each set has delivered.

An event set is a real `pynvml.c_nvmlEventSet_t`. A device registered on a set at
scenario time `t_reg` gets each scenario XID on that device with `t_reg <= at`, once,
when a wait happens at or after `at`.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import Any

import pynvml

from gpuwatch.simulate.faults import Xid


class InvalidEventSetError(LookupError):
    """An event set pointer that was not created here (or is NULL, or was freed)."""


@dataclass(slots=True)
class _EventSet:
    buffer: Any
    registered: dict[int, tuple[int, float]] = field(default_factory=dict)
    delivered: set[int] = field(default_factory=set)


class EventSets:
    """The event sets created through the stand-in."""

    def __init__(self, xids: tuple[Xid, ...]) -> None:
        self._xids = xids
        self._lock = threading.Lock()
        self._sets: dict[int, _EventSet] = {}

    def _get(self, event_set: Any) -> _EventSet:
        try:
            address = ctypes.addressof(event_set.contents)
        except (AttributeError, ValueError, TypeError) as exc:
            raise InvalidEventSetError from exc
        found = self._sets.get(address)
        if found is None:
            raise InvalidEventSetError
        return found

    def create(self) -> Any:
        """A fresh `c_nvmlEventSet_t`."""
        buffer = pynvml.struct_c_nvmlEventSet_t()
        with self._lock:
            self._sets[ctypes.addressof(buffer)] = _EventSet(buffer)
        return pynvml.c_nvmlEventSet_t(buffer)

    def free(self, event_set: Any) -> None:
        """Forget a set; raises InvalidEventSetError when it is not ours."""
        with self._lock:
            state = self._get(event_set)
            del self._sets[ctypes.addressof(state.buffer)]

    def register(self, event_set: Any, gpu: int, event_types: int, t: float) -> None:
        """Add `event_types` for GPU `gpu` to the set, from scenario time `t` on."""
        with self._lock:
            state = self._get(event_set)
            mask, since = state.registered.get(gpu, (0, t))
            state.registered[gpu] = (mask | event_types, min(since, t))

    def take_due(self, event_set: Any, t: float) -> Xid | None:
        """The earliest undelivered XID due at `t` for this set (marked delivered)."""
        with self._lock:
            state = self._get(event_set)
            for number, xid in enumerate(self._xids):
                if xid.at > t:
                    return None
                if number in state.delivered:
                    continue
                mask, since = state.registered.get(xid.gpu, (0, 0.0))
                if mask & pynvml.nvmlEventTypeXidCriticalError and since <= xid.at:
                    state.delivered.add(number)
                    return xid
        return None
