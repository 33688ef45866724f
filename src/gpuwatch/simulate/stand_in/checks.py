"""The rules every stand-in call checks before it answers, and the init refcount.

Uninitialized before `nvmlInit` or after the last `nvmlShutdown`; FunctionNotFound for a
symbol the simulated driver lacks; the driver's, the GPU's and the call's own faults
(`gpuwatch.simulate.faults`); a slow call's delay. A call that is the caller's bug (a
bad handle, an out-of-range slot, a wrong struct version) is refused: recorded in
`refusals` and raised as NVML raises it.
"""

from __future__ import annotations

import ctypes
from typing import Any, NoReturn

import pynvml

from gpuwatch.simulate.device import GpuDevice, MigDevice
from gpuwatch.simulate.stand_in.state import Refusal, StandInState, Target


def raise_nvml(code: int) -> NoReturn:
    """Raise pynvml's exception for the NVML return code `code`."""
    raise pynvml.NVMLError(code)


class Checks(StandInState):
    """The checks every call makes (`_gate`, `_target`, `_system`), and init/shutdown."""

    # -- initialisation --------------------------------------------------------------------

    def nvmlInitWithFlags(self, flags: int) -> None:  # noqa: ARG002 - flags are accepted, unused
        """Initialise; fails inside a driver-error window (a version mismatch: for good)."""
        with self._init_lock:
            self._loaded = True
            if "nvmlInitWithFlags" in self._faults.missing_symbols:
                raise_nvml(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            t = self.scenario_time()
            init_error = self._faults.init_error(t)
            if init_error is not None:
                raise_nvml(init_error)
            self._refcount += 1
            self._initialised_at = t

    def nvmlInit(self) -> None:
        """nvmlInitWithFlags(0)."""
        self.nvmlInitWithFlags(0)

    def nvmlShutdown(self) -> None:
        """Drop one reference; Uninitialized when there is none."""
        with self._init_lock:
            if not self._loaded or self._refcount == 0:
                raise_nvml(pynvml.NVML_ERROR_UNINITIALIZED)
            self._refcount -= 1

    # -- the common checks -----------------------------------------------------------------

    def _gate(self, name: str, symbol: str | None = None) -> float:
        """Checks every call makes; returns the scenario time."""
        t = self.scenario_time()
        if not self._loaded:
            raise_nvml(pynvml.NVML_ERROR_UNINITIALIZED)
        if (symbol or name) in self._faults.missing_symbols:
            raise_nvml(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if self._refcount == 0:
            raise_nvml(pynvml.NVML_ERROR_UNINITIALIZED)
        driver_error = self._faults.driver_error(t, self._initialised_at)
        if driver_error is not None:
            raise_nvml(driver_error)
        return t

    def _refuse(
        self, function: str, reason: str, code: int = pynvml.NVML_ERROR_INVALID_ARGUMENT
    ) -> NoReturn:
        """Record a misuse in `refusals` and raise its error (InvalidArgument by default)."""
        self.refusals.append(Refusal(function, reason))
        raise_nvml(code)

    def _resolve(self, handle: Any, function: str = "") -> Target:
        try:
            target = self._targets.get(ctypes.addressof(handle.contents))
        except (AttributeError, ValueError, TypeError):
            target = None
        if target is None:
            self._refuse(function, "not a device handle")
        return target

    def _target(
        self, handle: Any, name: str, symbol: str | None = None, *, mig: bool = False
    ) -> tuple[Target, float]:
        """Checks for a device call; returns the device (or MIG device) and the time."""
        t = self._gate(name, symbol)
        target = self._resolve(handle, name)
        gpu = target.gpu_index
        lost = self._faults.device_error(gpu, t)
        if lost is not None:
            raise_nvml(lost)
        if isinstance(target, MigDevice) and not target.parent.mig_current(t):
            raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # its GPU left MIG mode: a stale handle
        if isinstance(target, MigDevice) and not mig:
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        names = (name,) if symbol is None else (name, symbol)
        code = self._faults.call_error(gpu, names, t)
        if code is not None:
            raise_nvml(code)
        delay = self._faults.delay(gpu, names, t)
        if delay > 0:
            self._sleep(delay)
            t = self.scenario_time()
        return target, t

    def _device(self, handle: Any, name: str, symbol: str | None = None) -> tuple[GpuDevice, float]:
        target, t = self._target(handle, name, symbol)
        assert isinstance(target, GpuDevice)  # _target refused MIG devices
        return target, t

    def _system(self, name: str, symbol: str | None = None) -> float:
        t = self._gate(name, symbol)
        names = (name,) if symbol is None else (name, symbol)
        code = self._faults.call_error(None, names, t)
        if code is not None:
            raise_nvml(code)
        delay = self._faults.delay(None, names, t)
        if delay > 0:
            self._sleep(delay)
            t = self.scenario_time()
        return t
