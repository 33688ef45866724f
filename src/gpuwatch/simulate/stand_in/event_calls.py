"""The stand-in's event calls: event sets, registration, and the wait that delivers XIDs.

The scenario's XIDs (`gpuwatch.simulate.events`) become due at their scenario time; a
wait polls the simulated clock every `_POLL_SECONDS` real seconds until one is due or
its timeout has passed.
"""

from __future__ import annotations

from typing import Any

import pynvml

from gpuwatch.simulate.events import InvalidEventSetError
from gpuwatch.simulate.stand_in.checks import Checks, raise_nvml

_ECC_EVENTS = pynvml.nvmlEventTypeSingleBitEccError | pynvml.nvmlEventTypeDoubleBitEccError
_BASE_EVENTS = (
    pynvml.nvmlEventTypePState | pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeClock
)
_POLL_SECONDS = 0.1  # real seconds between looks at the simulated clock while waiting


class EventCalls(Checks):
    """nvmlEventSetCreate/Free, nvmlDeviceRegisterEvents and nvmlEventSetWait."""

    def nvmlEventSetCreate(self) -> Any:
        """A new `c_nvmlEventSet_t`."""
        self._system("nvmlEventSetCreate")
        return self._events.create()

    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:
        """PState, Clock and XidCriticalError; plus single/double-bit ECC with ECC."""
        device, _ = self._device(handle, "nvmlDeviceGetSupportedEventTypes")
        return int(_BASE_EVENTS | (_ECC_EVENTS if device.preset.ecc else 0))

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:
        """Register for events; NotSupported when a requested type is not supported."""
        device, t = self._device(handle, "nvmlDeviceRegisterEvents")
        supported = _BASE_EVENTS | (_ECC_EVENTS if device.preset.ecc else 0)
        if int(eventTypes) & ~supported:
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        try:
            self._events.register(eventSet, device.index, int(eventTypes), t)
        except InvalidEventSetError:
            raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlEventSetWait_v2(self, eventSet: Any, timeoutms: int) -> Any:
        """The next due XID as `c_nvmlEventData_t`, waiting up to `timeoutms` real ms.

        Polls scenario time every `_POLL_SECONDS` (through the injected `sleep`); Timeout when
        nothing became due.
        """
        remaining = max(int(timeoutms), 0) / 1000.0
        names = ("nvmlEventSetWait", "nvmlEventSetWait_v2")
        while True:
            t = self._gate(*names)
            code = self._faults.call_error(None, names, t)
            if code is not None:
                raise_nvml(code)
            try:
                xid = self._events.take_due(eventSet, self.scenario_time())
            except InvalidEventSetError:
                raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            if xid is not None:
                data = pynvml.c_nvmlEventData_t()
                data.device = self._handle(self._devices[xid.gpu])
                data.eventType = pynvml.nvmlEventTypeXidCriticalError
                data.eventData = xid.xid
                data.gpuInstanceId = 0xFFFFFFFF
                data.computeInstanceId = 0xFFFFFFFF
                return data
            if remaining <= 0:
                raise_nvml(pynvml.NVML_ERROR_TIMEOUT)
            step = min(_POLL_SECONDS, remaining)
            self._sleep(step)
            remaining -= step

    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> Any:
        """Same as nvmlEventSetWait_v2."""
        return self.nvmlEventSetWait_v2(eventSet, timeoutms)

    def nvmlEventSetFree(self, eventSet: Any) -> None:
        """Free an event set."""
        self._system("nvmlEventSetFree")
        try:
            self._events.free(eventSet)
        except InvalidEventSetError:
            raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)
