"""Running-process lists read with the entry size the driver really writes.

`nvmlDevice{Compute,Graphics}RunningProcesses_v3` kept its symbol while the entry it
fills changed: R535 drivers write 32-byte entries (a `usedGpuCcProtectedMemory` field
appended) where R510-R530 and R545+ write 24 bytes. A binding whose struct differs from
the driver's reads every entry after the first at the wrong offset: wrong pids and
memory (nvitop PR #79 / issue #88, gpuopenanalytics/pynvml #48/#50). nvidia-ml-py
12.535.77 reads 32 bytes, every later release 24.

The driver is recognised by its exported symbols, once per NVML session, the way
nvitop does it: `_v3` with `nvmlDeviceGetConfComputeMemSizeInfo` (R535+) but without
`nvmlDeviceGetRunningProcessDetailList` (R545+) means 32-byte entries. When the
binding's own wrapper reads the same size it is used; otherwise the C function is
called here with a struct of the driver's size.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuwatch.core.clock import Clock
from gpuwatch.core.snapshot import ProcessSample
from gpuwatch.nvml import parse
from gpuwatch.nvml.api import Handle, NvmlApi
from gpuwatch.nvml.calls import DeviceCalls
from gpuwatch.nvml.errors import NvmlErrorKind, classify

log = logging.getLogger(__name__)

_V3 = "_v3"
_V2 = "_v2"
_said: set[tuple[int, int]] = set()


class ProcessInfo24(ctypes.Structure):
    """`nvmlProcessInfo_v2_t`: what every driver but R535 writes (24 bytes)."""

    _fields_ = (
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    )


class ProcessInfo32(ctypes.Structure):
    """R535's `nvmlProcessInfo_t` behind the `_v3` symbol (32 bytes)."""

    _fields_ = (
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
        ("usedGpuCcProtectedMemory", ctypes.c_ulonglong),
    )


_STRUCTS: dict[int, type[ctypes.Structure]] = {
    ctypes.sizeof(ProcessInfo24): ProcessInfo24,
    ctypes.sizeof(ProcessInfo32): ProcessInfo32,
}


@dataclass(frozen=True, slots=True)
class ProcessEntry:
    """One running-process entry, with the binding's attribute names (memory None: hidden)."""

    pid: int
    usedGpuMemory: int | None
    gpuInstanceId: int
    computeInstanceId: int


@dataclass(frozen=True, slots=True)
class ProcessCalls:
    """How this NVML session reads the running-process lists."""

    suffix: str  # "_v3" or "_v2": the C symbol's version
    entry_bytes: int  # bytes per entry the driver writes
    raw: bool  # True: the C function is called here, the binding's wrapper would misread

    def reader(self, nv: NvmlApi, kind: str) -> Callable[[Handle], Sequence[Any]]:
        """The call that lists `kind` ("Compute" or "Graphics") processes of a handle."""
        symbol = f"nvmlDeviceGet{kind}RunningProcesses{self.suffix}"
        if not self.raw:
            wrapper: Callable[[Handle], Sequence[Any]] = getattr(nv, symbol)
            return wrapper
        struct = _STRUCTS[self.entry_bytes]
        return lambda handle: read_raw(nv, symbol, struct, handle)


def _exported(nv: NvmlApi, symbol: str) -> bool:
    try:
        nv._nvmlGetFunctionPointer(symbol)
    except nv.NVMLError:
        return False
    return True


def _binding_entry_bytes(nv: NvmlApi, suffix: str) -> int | None:
    """Bytes per entry the binding's own wrapper for `suffix` reads; None: no wrapper."""
    if not hasattr(nv, f"nvmlDeviceGetComputeRunningProcesses{suffix}"):
        return None
    if suffix == _V2:
        struct = getattr(nv, "c_nvmlProcessInfo_v2_t", None)
    else:  # 12.535.x: `c_nvmlProcessInfo_t`; 12.555+: `c_nvmlProcessInfo_v3_t`
        struct = getattr(nv, "c_nvmlProcessInfo_v3_t", None) or getattr(
            nv, "c_nvmlProcessInfo_t", None
        )
    return None if struct is None else ctypes.sizeof(struct)


def detect(nv: NvmlApi) -> ProcessCalls | None:
    """The running-process calls of this driver and binding (after nvmlInit).

    None when the binding cannot look symbols up or the driver has neither `_v3` nor
    `_v2` (the process lists are then absent).
    """
    if not hasattr(nv, "_nvmlGetFunctionPointer"):
        return None
    if _exported(nv, "nvmlDeviceGetComputeRunningProcesses_v3"):
        r535 = _exported(nv, "nvmlDeviceGetConfComputeMemSizeInfo") and not _exported(
            nv, "nvmlDeviceGetRunningProcessDetailList"
        )
        suffix, driver_bytes = _V3, ctypes.sizeof(ProcessInfo32 if r535 else ProcessInfo24)
    elif _exported(nv, "nvmlDeviceGetComputeRunningProcesses_v2"):
        suffix, driver_bytes = _V2, ctypes.sizeof(ProcessInfo24)
    else:
        return None
    binding_bytes = _binding_entry_bytes(nv, suffix)
    calls = ProcessCalls(suffix, driver_bytes, raw=binding_bytes != driver_bytes)
    if calls.raw and binding_bytes is not None and (driver_bytes, binding_bytes) not in _said:
        _said.add((driver_bytes, binding_bytes))  # one line per process, not one per GPU
        log.info(
            "the driver writes %d-byte process entries where nvidia-ml-py reads %d: "
            "gpuwatch reads them itself",
            driver_bytes,
            binding_bytes,
        )
    return calls


def read_raw(
    nv: NvmlApi, symbol: str, struct: type[ctypes.Structure], handle: Handle
) -> list[ProcessEntry]:
    """Call the C function `symbol` with an array of `struct`; raises the NVML error."""
    fn = nv._nvmlGetFunctionPointer(symbol)
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == nv.NVML_SUCCESS:
        return []
    if ret != nv.NVML_ERROR_INSUFFICIENT_SIZE:
        raise nv.NVMLError(ret)
    count.value = count.value * 2 + 5  # room for processes that start in between
    entries = (struct * count.value)()
    ret = fn(handle, ctypes.byref(count), entries)
    if ret != nv.NVML_SUCCESS:
        raise nv.NVMLError(ret)
    not_available = nv.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
    return [
        ProcessEntry(
            pid=int(e.pid),
            usedGpuMemory=None if e.usedGpuMemory == not_available else int(e.usedGpuMemory),
            gpuInstanceId=int(e.gpuInstanceId),
            computeInstanceId=int(e.computeInstanceId),
        )
        for e in entries[: count.value]
    ]


class ProcessReads(DeviceCalls):
    """A device's running processes, their names (cached) and SM utilization (each
    pid's last sample held up to `parse.PROCESS_UTILIZATION_HOLD_SECONDS`)."""

    _clock: Clock
    _process_util_last_us: int
    _process_util: dict[int, tuple[float, float]]
    _process_names: dict[int, str]
    _process_calls: ProcessCalls | None
    _process_calls_known: bool

    def _process_lists(self) -> tuple[Sequence[Any] | None, Sequence[Any] | None]:
        """(compute, graphics) running-process lists; None where the device cannot say."""
        nv = self._nv
        if not self._process_calls_known:  # probed once per device and NVML session
            self._process_calls = detect(nv)
            self._process_calls_known = True
        calls = self._process_calls
        if calls is None:
            # the versioned calls: pynvml's unversioned ones raise a non-NVML exception on
            # drivers without the _v3 symbol (before R510); fall back to _v2 there
            compute = self._first_answer(
                ("processes_compute_v3", nv.nvmlDeviceGetComputeRunningProcesses_v3),
                ("processes_compute_v2", nv.nvmlDeviceGetComputeRunningProcesses_v2),
            )
            graphics = self._first_answer(
                ("processes_graphics_v3", nv.nvmlDeviceGetGraphicsRunningProcesses_v3),
                ("processes_graphics_v2", nv.nvmlDeviceGetGraphicsRunningProcesses_v2),
            )
            return compute, graphics
        h = self.handle
        compute = self._optional("processes_compute", calls.reader(nv, "Compute"), h)
        graphics = self._optional("processes_graphics", calls.reader(nv, "Graphics"), h)
        return compute, graphics

    def _process_name(self, pid: int) -> str:
        """The process's name; invalid UTF-8 bytes come back as `\\xNN` escapes, "" unknown.

        pynvml decodes names strictly (UnicodeDecodeError, not an NVML error): only this
        one name is affected, never the rest of the sample.
        """
        try:
            found = self._optional("process_name", self._nv.nvmlSystemGetProcessName, pid)
        except UnicodeDecodeError as exc:
            raw = exc.object if isinstance(exc.object, bytes) else bytes(exc.object)
            return parse.escaped_text(raw)
        return "" if found is None else parse.text(found)

    def _read_processes(self) -> tuple[ProcessSample, ...] | None:
        compute, graphics = self._process_lists()
        if compute is None and graphics is None:
            return None
        raw = parse.merge_processes(compute or (), graphics or ())
        utilization = self._read_process_utilization(raw)
        self._process_names = parse.pid_names(self._process_names, (p.pid for p in raw))
        samples = []
        for proc in raw:
            name = self._process_names.get(proc.pid)
            if name is None:
                name = self._process_name(proc.pid)
                self._process_names[proc.pid] = name
            samples.append(
                ProcessSample(
                    pid=proc.pid,
                    name=name,
                    kind=proc.kind,
                    memory_used_bytes=proc.memory_used_bytes,
                    sm_utilization_ratio=None if utilization is None else utilization.get(proc.pid),
                    gpu_instance_id=proc.gpu_instance_id,
                    compute_instance_id=proc.compute_instance_id,
                )
            )
        return tuple(samples)

    def _read_process_utilization(
        self, running_processes: Sequence[parse.RawProcess]
    ) -> dict[int, float] | None:
        """Per-pid SM utilization ratio; None when the device cannot say at all.

        A pid without a sample newer than `parse.PROCESS_UTILIZATION_HOLD_SECONDS` is
        left out (its value is unknown, not 0): NotFound only means that NVML has no
        sample newer than the last one read.
        """
        nv = self._nv
        key = "process_utilization"
        if key in self.unsupported:
            return None
        fresh: dict[int, float] = {}
        try:
            samples = self._call(
                key, nv.nvmlDeviceGetProcessUtilization, self.handle, self._process_util_last_us
            )
        except nv.NVMLError as exc:
            if classify(exc) not in (NvmlErrorKind.NOT_FOUND, NvmlErrorKind.TRANSIENT):
                return None
        else:
            fresh, self._process_util_last_us = parse.latest_process_utilization(
                samples, self._process_util_last_us
            )
        running = {p.pid for p in running_processes}
        held = parse.held_process_utilization(self._process_util, fresh, self._clock.monotonic())
        self._process_util = {pid: entry for pid, entry in held.items() if pid in running}
        return {pid: ratio for pid, (ratio, _) in self._process_util.items()}
