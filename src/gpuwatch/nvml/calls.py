"""The call policy of one device: every NVML call a device makes goes through `_call`.

`DeviceCalls` classifies each NVML error once: NotSupported, FunctionNotFound and
NoPermission are remembered per call key (`unsupported`) and never asked again; a lost
GPU raises `DeviceLostError`, a driver failure `DriverError`; a transient error is one
DEBUG line and no value. Also the two calls every reader shares: the versioned memory
call (v2, else v1) and one field-values call with a return code per entry. What the
device reads, and when, lives in `device.py` and the readers beside it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from gpuwatch.nvml import parse
from gpuwatch.nvml.api import Handle, NvmlApi
from gpuwatch.nvml.errors import (
    DeviceLostError,
    DriverError,
    NvmlErrorKind,
    classify,
    describe,
)

log = logging.getLogger("gpuwatch.nvml.device")

T = TypeVar("T")


class DeviceCalls:
    """One GPU's NVML binding, handle and remembered unsupported calls, and the calls
    made through them. `NvmlDevice` sets the attributes."""

    _nv: NvmlApi
    index: int
    handle: Handle
    unsupported: set[str]

    def _call(self, key: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call NVML; raise DeviceLostError/DriverError, or the error for the caller.

        Unsupported errors are remembered under `key` and re-raised once.
        """
        try:
            return fn(*args, **kwargs)
        except self._nv.NVMLError as exc:
            kind = classify(exc)
            if kind is NvmlErrorKind.UNSUPPORTED:
                if key not in self.unsupported:
                    log.debug("GPU %d: %s unsupported: %s", self.index, key, describe(exc))
                    self.unsupported.add(key)
                raise
            if kind is NvmlErrorKind.DEVICE_LOST:
                raise DeviceLostError(describe(exc)) from exc
            if kind is NvmlErrorKind.DRIVER:
                raise DriverError(describe(exc), error_name=type(exc).__name__) from exc
            raise

    def _optional(self, key: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """A value the device may not have: None when unsupported (asked once) or absent."""
        if key in self.unsupported:
            return None
        try:
            return self._call(key, fn, *args, **kwargs)
        except self._nv.NVMLError as exc:
            if classify(exc) is NvmlErrorKind.TRANSIENT:
                log.debug("GPU %d: %s failed: %s", self.index, key, describe(exc))
            return None

    def _first_answer(self, *calls: tuple[str, Callable[[Handle], T]]) -> T | None:
        """The first of several versions of a call that this device supports."""
        for key, fn in calls:
            value = self._optional(key, fn, self.handle)
            if value is not None or key not in self.unsupported:
                return value
        return None

    def _guard(self, key: str, fn: Callable[[], T]) -> T | None:
        return self._optional(key, fn)

    def _read_memory(
        self, handle: Handle = None, key_prefix: str = ""
    ) -> parse.MemoryReading | None:
        nv = self._nv
        h = self.handle if handle is None else handle
        info = self._optional(
            key_prefix + "memory_v2", nv.nvmlDeviceGetMemoryInfo, h, version=nv.nvmlMemory_v2
        )
        if info is None:
            info = self._optional(key_prefix + "memory_v1", nv.nvmlDeviceGetMemoryInfo, h)
        return None if info is None else parse.parse_memory(info)

    def _read_fields(self, fields: Sequence[tuple[str, int, int]]) -> dict[str, float | None]:
        """One `nvmlDeviceGetFieldValues` call for (key, field id, scope id) entries.

        Returns {key: value or None}. A key whose entry answered NotSupported or
        NoPermission is remembered in `self.unsupported` (and its value is None).
        """
        if not fields:
            return {}
        nv = self._nv
        request = [(field_id, scope) for _, field_id, scope in fields]
        values = self._optional("field_values", nv.nvmlDeviceGetFieldValues, self.handle, request)
        if values is None:
            return {}
        unsupported = (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_NO_PERMISSION)
        got: dict[str, float | None] = {}
        for (key, _, _), (code, value) in zip(
            fields, parse.field_values(values, nv.NVML_SUCCESS), strict=True
        ):
            if code in unsupported and key not in self.unsupported:
                log.debug("GPU %d: field %s unsupported (NVML return %d)", self.index, key, code)
                self.unsupported.add(key)
            got[key] = value
        return got
