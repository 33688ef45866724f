"""Faults: the scenario's `[faults]` tables and the compiled `FaultPlan` the stand-in asks.

Every fault is keyed by scenario time (seconds) and, where it applies to one GPU, by
its index. Function names may be pynvml's Python names (``nvmlDeviceGetMemoryInfo``)
or NVML's C symbols (``nvmlDeviceGetMemoryInfo_v2``); `function_not_found` matches C
symbols only, because that is what an old driver lacks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_NVML_NAME = re.compile(r"^nvml[A-Za-z0-9_]+$")


def _check_names(names: Iterable[str]) -> None:
    for name in names:
        if not _NVML_NAME.match(name):
            raise ValueError(f"{name!r} is not an NVML function name (nvml...)")


class _Fault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Window(_Fault):
    start: float = Field(default=0.0, ge=0)
    end: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> _Window:
        if self.end is not None and self.end <= self.start:
            raise ValueError("end must be after start")
        return self


class GpuLost(_Fault):
    """From `at` (until `until`, if given) every call on GPU `gpu` raises `error`."""

    gpu: int = Field(ge=0)
    at: float = Field(ge=0)
    until: float | None = None
    error: Literal["gpu_is_lost", "unknown"] = "gpu_is_lost"

    @model_validator(mode="after")
    def _ordered(self) -> GpuLost:
        if self.until is not None and self.until <= self.at:
            raise ValueError("until must be after at")
        return self


class FunctionError(_Window):
    """Calls of `functions` (on GPU `gpu`, or on every GPU) raise one error in a window."""

    gpu: int | None = Field(default=None, ge=0)
    functions: tuple[str, ...] = Field(min_length=1)

    @field_validator("functions")
    @classmethod
    def _names(cls, functions: tuple[str, ...]) -> tuple[str, ...]:
        _check_names(functions)
        return functions


class InjectedError(FunctionError):
    """Calls of `functions` raise the NVML error `error` (a key of `ERROR_CODES`) in a window."""

    error: str

    @field_validator("error")
    @classmethod
    def _known(cls, error: str) -> str:
        if error not in ERROR_CODES:
            raise ValueError(f"unknown NVML error {error!r} (known: {', '.join(ERROR_CODES)})")
        return error


class SlowCall(_Window):
    """Each call of `function` (on GPU `gpu`, or any) takes `seconds` longer."""

    function: str
    seconds: float = Field(gt=0, le=600)
    gpu: int | None = Field(default=None, ge=0)

    @field_validator("function")
    @classmethod
    def _name(cls, function: str) -> str:
        _check_names([function])
        return function


class DriverErrorWindow(_Fault):
    """A driver-level failure of every call, nvmlInit included, from `start`.

    `lib_rm_version_mismatch` (the default) is a driver upgraded under the process: the
    library it loaded no longer matches the kernel module, and since pynvml never
    unloads the library it lasts for the rest of this process (no `end`; only a new
    stand-in, like a restarted agent, works again). `driver_not_loaded` lasts from
    `start` to `end`; with `requires_reinit` (the default) calls keep failing after
    `end` until the caller succeeds in calling nvmlInit again.
    """

    start: float = Field(ge=0)
    end: float | None = None
    error: Literal["lib_rm_version_mismatch", "driver_not_loaded"] = "lib_rm_version_mismatch"
    requires_reinit: bool = True

    @model_validator(mode="after")
    def _ordered(self) -> DriverErrorWindow:
        if self.error == "lib_rm_version_mismatch":
            if self.end is not None:
                raise ValueError(
                    "a version mismatch lasts until the process restarts: give no end "
                    "(error = 'driver_not_loaded' is the fault that ends)"
                )
        elif self.end is None or self.end <= self.start:
            raise ValueError("end must be given and after start")
        return self

    @property
    def code(self) -> int:
        """The NVML return code of every call in the window."""
        if self.error == "driver_not_loaded":
            return ERROR_DRIVER_NOT_LOADED
        return ERROR_LIB_RM_VERSION_MISMATCH

    def active(self, t: float) -> bool:
        """True from `start` to `end` (forever for a version mismatch)."""
        return self.start <= t and (self.end is None or t < self.end)


class Xid(_Fault):
    """An XID critical error `xid` on GPU `gpu` at time `at`."""

    gpu: int = Field(ge=0)
    at: float = Field(ge=0)
    xid: int = Field(gt=0)


class Faults(BaseModel):
    """Every fault of a scenario (all optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_lost: tuple[GpuLost, ...] = ()
    not_supported: tuple[FunctionError, ...] = ()
    no_permission: tuple[FunctionError, ...] = ()
    errors: tuple[InjectedError, ...] = ()
    function_not_found: tuple[str, ...] = ()
    slow_calls: tuple[SlowCall, ...] = ()
    driver_error: tuple[DriverErrorWindow, ...] = ()
    xid: tuple[Xid, ...] = ()

    @field_validator("function_not_found")
    @classmethod
    def _names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        _check_names(names)
        return names

    def gpu_indices(self) -> Iterable[tuple[str, int]]:
        """(field path, gpu index) of every fault that names a GPU, for range checks."""
        groups: dict[str, tuple[GpuLost | FunctionError | SlowCall | Xid, ...]] = {
            "gpu_lost": self.gpu_lost,
            "not_supported": self.not_supported,
            "no_permission": self.no_permission,
            "errors": self.errors,
            "slow_calls": self.slow_calls,
            "xid": self.xid,
        }
        for name, entries in groups.items():
            for i, entry in enumerate(entries):
                if entry.gpu is not None:
                    yield f"faults.{name}[{i}].gpu", entry.gpu


# NVML return codes (nvml.h), kept here so this module needs no pynvml.
ERROR_NOT_SUPPORTED = 3
ERROR_DRIVER_NOT_LOADED = 9
ERROR_NO_PERMISSION = 4
ERROR_GPU_IS_LOST = 15
ERROR_LIB_RM_VERSION_MISMATCH = 18
ERROR_UNKNOWN = 999
ERROR_CODES: dict[str, int] = {
    "uninitialized": 1,
    "invalid_argument": 2,
    "not_supported": ERROR_NOT_SUPPORTED,
    "no_permission": ERROR_NO_PERMISSION,
    "not_found": 6,
    "insufficient_size": 7,
    "insufficient_power": 8,
    "driver_not_loaded": 9,
    "timeout": 10,
    "irq_issue": 11,
    "library_not_found": 12,
    "function_not_found": 13,
    "corrupted_inforom": 14,
    "gpu_is_lost": ERROR_GPU_IS_LOST,
    "reset_required": 16,
    "operating_system": 17,
    "lib_rm_version_mismatch": ERROR_LIB_RM_VERSION_MISMATCH,
    "in_use": 19,
    "memory": 20,
    "no_data": 21,
    "insufficient_resources": 23,
    "argument_version_mismatch": 25,
    "not_ready": 27,
    "gpu_not_found": 28,
    "invalid_state": 29,
    "unknown": ERROR_UNKNOWN,
}
"""`[[faults.errors]]` names: NVML_ERROR_<NAME> in lower case, as nvml.h numbers them."""

_LOST_CODES = {"gpu_is_lost": ERROR_GPU_IS_LOST, "unknown": ERROR_UNKNOWN}


class _Rule:
    __slots__ = ("code", "end", "gpu", "start")

    def __init__(self, gpu: int | None, start: float, end: float | None, code: int) -> None:
        self.gpu = gpu
        self.start = start
        self.end = math.inf if end is None else end
        self.code = code


class FaultPlan:
    """The faults compiled for fast lookup on every call (a few dict probes)."""

    def __init__(self, faults: Faults) -> None:
        self.missing_symbols = frozenset(faults.function_not_found)
        self._errors: dict[str, list[_Rule]] = {}
        coded: list[tuple[FunctionError, int]] = [
            *((entry, ERROR_NOT_SUPPORTED) for entry in faults.not_supported),
            *((entry, ERROR_NO_PERMISSION) for entry in faults.no_permission),
            *((entry, ERROR_CODES[entry.error]) for entry in faults.errors),
        ]
        for entry, code in coded:
            for name in entry.functions:
                self._errors.setdefault(name, []).append(
                    _Rule(entry.gpu, entry.start, entry.end, code)
                )
        self._slow: dict[str, list[tuple[_Rule, float]]] = {}
        for slow in faults.slow_calls:
            self._slow.setdefault(slow.function, []).append(
                (_Rule(slow.gpu, slow.start, slow.end, 0), slow.seconds)
            )
        self._lost: dict[int, list[_Rule]] = {}
        for lost in faults.gpu_lost:
            self._lost.setdefault(lost.gpu, []).append(
                _Rule(lost.gpu, lost.at, lost.until, _LOST_CODES[lost.error])
            )
        self.driver_windows = faults.driver_error
        self.xids = tuple(sorted(faults.xid, key=lambda x: (x.at, x.gpu)))

    def device_error(self, gpu: int, t: float) -> int | None:
        """The error code every call on GPU `gpu` returns at time `t`, if any."""
        rules = self._lost.get(gpu)
        if rules is None:
            return None
        for rule in rules:
            if rule.start <= t < rule.end:
                return rule.code
        return None

    def call_error(self, gpu: int | None, names: tuple[str, ...], t: float) -> int | None:
        """The injected error code of a call named `names` on `gpu` at `t`, if any."""
        for name in names:
            rules = self._errors.get(name)
            if rules is None:
                continue
            for rule in rules:
                if (rule.gpu is None or rule.gpu == gpu) and rule.start <= t < rule.end:
                    return rule.code
        return None

    def delay(self, gpu: int | None, names: tuple[str, ...], t: float) -> float:
        """Extra seconds a call named `names` on `gpu` takes at `t`."""
        total = 0.0
        for name in names:
            for rule, seconds in self._slow.get(name, ()):
                if (rule.gpu is None or rule.gpu == gpu) and rule.start <= t < rule.end:
                    total += seconds
        return total

    def init_error(self, t: float) -> int | None:
        """The code nvmlInit fails with at `t` inside a driver-error window, if any."""
        for window in self.driver_windows:
            if window.active(t):
                return window.code
        return None

    def driver_error(self, t: float, initialised_at: float | None) -> int | None:
        """The code a call other than nvmlInit fails with at `t`, if any.

        `initialised_at` is the time of the caller's last successful nvmlInit: after a
        `requires_reinit` window, calls fail until nvmlInit has succeeded again.
        """
        for window in self.driver_windows:
            if window.active(t):
                return window.code
            end = window.end
            if t < window.start or end is None or not window.requires_reinit:
                continue
            if initialised_at is None or initialised_at < end:
                return window.code
        return None
