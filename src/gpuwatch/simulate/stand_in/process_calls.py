"""The stand-in's process calls: running-process lists, per-process utilization, names.

The process lists are served as the driver serves them: `_nvmlGetFunctionPointer` hands
out C-like functions that write the driver's own entry struct (24 bytes, or R535's 32)
into the caller's array, and the pynvml-level calls read them back as the installed
binding does. On a Slurm node (`[slurm] enabled`) the GPU processes, and their names,
are the live processes whose environment names the GPU (`gpuwatch.simulate.slurm_node`).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import Any

import pynvml

from gpuwatch.simulate.device import MigDevice
from gpuwatch.simulate.processes import (
    PROCESS_SAMPLE_PERIOD_S,
    SimProcess,
    process_utilization_since,
)
from gpuwatch.simulate.stand_in.checks import Checks, raise_nvml

_R535_PROCESS_STRUCT_BYTES = 32
_DRIVER_PROCESS_STRUCTS = {
    24: pynvml.c_nvmlProcessInfo_v2_t,
    _R535_PROCESS_STRUCT_BYTES: pynvml.c_nvmlProcessDetail_v1_t,  # R535's 32-byte layout
}
"""The entry each simulated driver writes, by `DriverInfo.process_struct_bytes`."""


def _not_supported_symbol(name: str) -> Callable[..., int]:
    def symbol(*_args: Any) -> int:
        return int(pynvml.NVML_ERROR_NOT_SUPPORTED)

    symbol.__name__ = name
    return symbol


def _version_checked(call: Callable[[Any], list[Any]], handle: Any) -> list[Any]:
    try:
        return call(handle)
    except pynvml.NVMLError_FunctionNotFound:
        raise pynvml.NVMLLibraryMismatchError(
            "Unversioned function called and the pyNVML version does not match the NVML "
            "lib version. Either use matching pyNVML and NVML lib versions or use a "
            "versioned function such as " + call.__name__
        ) from None


class ProcessCalls(Checks):
    """The running-process lists, nvmlDeviceGetProcessUtilization, nvmlSystemGetProcessName."""

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        """Name of a scenario process while it runs; NotFound otherwise.

        Decoded strictly from its `name_encoding` bytes, as pynvml does: a Latin-1 name
        that is not valid UTF-8 raises UnicodeDecodeError (not an NVML error).
        """
        t = self._system("nvmlSystemGetProcessName")
        proc = self._process_names.get(int(pid))
        if proc is None and self._slurm is not None:
            name = self._slurm.name(int(pid))
            if name is not None:
                return name
        alive = proc is not None and any(
            p.pid == proc.pid and p.running(t) for d in self._devices for p in d.all_processes(t)
        )
        if proc is None or not alive:
            raise_nvml(pynvml.NVML_ERROR_NOT_FOUND)
        return proc.name.encode(proc.name_encoding).decode()

    def _running(self, handle: Any, name: str, kind: str) -> list[Any]:
        """The processes of `kind` a handle lists, as the driver's entry structs."""
        target, t = self._target(handle, name, name, mig=True)
        if isinstance(target, MigDevice):
            processes: tuple[SimProcess, ...] = target.processes
        else:
            processes = target.all_processes(t)
        struct = _DRIVER_PROCESS_STRUCTS[self.scenario.driver.process_struct_bytes]
        result = []
        for proc in processes:
            if proc.kind != kind or not proc.running(t):
                continue
            info = struct()
            info.pid = proc.pid
            info.usedGpuMemory = (
                proc.memory_bytes
                if proc.memory_visible
                else pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
            )
            info.gpuInstanceId = proc.gpu_instance_id
            info.computeInstanceId = proc.compute_instance_id
            result.append(info)
        return result

    def _c_running(self, symbol: str, kind: str) -> Callable[[Any, Any, Any], int]:
        """The C function `symbol`: fills the caller's array with the driver's entries.

        The entries are `scenario.driver.process_struct_bytes` apart (32 on R535) whatever
        struct the caller's array has, as the real driver writes them.
        """

        def call(handle: Any, count_ref: Any, buffer: Any) -> int:
            try:
                entries = self._running(handle, symbol, kind)
            except pynvml.NVMLError as exc:
                return int(exc.value)
            count = count_ref._obj
            if buffer is None or count.value < len(entries):
                count.value = len(entries)
                return int(pynvml.NVML_ERROR_INSUFFICIENT_SIZE if entries else pynvml.NVML_SUCCESS)
            stride = self.scenario.driver.process_struct_bytes
            room, start = ctypes.sizeof(buffer), ctypes.addressof(buffer)
            for i, entry in enumerate(entries):
                if (i + 1) * stride <= room:  # never past the caller's buffer
                    ctypes.memmove(start + i * stride, ctypes.byref(entry), stride)
            count.value = len(entries)
            return int(pynvml.NVML_SUCCESS)

        call.__name__ = symbol
        return call

    def _nvmlGetFunctionPointer(self, name: str) -> Callable[..., int]:
        """pynvml's symbol lookup: the process-list C functions, or a stub for a symbol
        the simulated driver exports (FunctionNotFound for one it lacks).

        R535 (`process_struct_bytes = 32`) lacks `nvmlDeviceGetRunningProcessDetailList`.
        """
        if not self._loaded:
            raise_nvml(pynvml.NVML_ERROR_UNINITIALIZED)
        r535 = self.scenario.driver.process_struct_bytes == _R535_PROCESS_STRUCT_BYTES
        if (
            name in self._faults.missing_symbols
            or not name.startswith("nvml")
            or (r535 and name == "nvmlDeviceGetRunningProcessDetailList")
        ):
            raise_nvml(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        for kind in ("Compute", "Graphics"):
            for version in ("_v3", "_v2"):
                if name == f"nvmlDeviceGet{kind}RunningProcesses{version}":
                    return self._c_running(name, kind.lower())
        return _not_supported_symbol(name)

    def _binding_running(self, symbol: str, struct: Any, handle: Any) -> list[Any]:
        """What nvidia-ml-py's wrapper of `symbol` does: two calls, its own struct."""
        fn = self._nvmlGetFunctionPointer(symbol)
        count = ctypes.c_uint(0)
        ret = fn(handle, ctypes.byref(count), None)
        if ret == pynvml.NVML_SUCCESS:
            return []
        if ret != pynvml.NVML_ERROR_INSUFFICIENT_SIZE:
            raise_nvml(ret)
        count.value = count.value * 2 + 5
        entries = (struct * count.value)()
        ret = fn(handle, ctypes.byref(count), entries)
        if ret != pynvml.NVML_SUCCESS:
            raise_nvml(ret)
        result = []
        for i in range(count.value):
            obj = pynvml.nvmlStructToFriendlyObject(entries[i])
            if obj.usedGpuMemory == pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value:
                obj.usedGpuMemory = None
            result.append(obj)
        return result

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any) -> list[Any]:
        """Running compute processes as pynvml's friendly objects (usedGpuMemory may be None).

        Read as the installed binding reads them (24-byte entries): on an R535 driver
        every entry after the first is garbage, as with the real binding.
        """
        return self._binding_running(
            "nvmlDeviceGetComputeRunningProcesses_v3", pynvml.c_nvmlProcessInfo_v3_t, handle
        )

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle: Any) -> list[Any]:
        """Running graphics processes, like the compute list."""
        return self._binding_running(
            "nvmlDeviceGetGraphicsRunningProcesses_v3", pynvml.c_nvmlProcessInfo_v3_t, handle
        )

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any) -> list[Any]:
        """The pre-R510 symbol: the same entries (pynvml's v2 and v3 structs are one)."""
        return self._binding_running(
            "nvmlDeviceGetComputeRunningProcesses_v2", pynvml.c_nvmlProcessInfo_v2_t, handle
        )

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: Any) -> list[Any]:
        """The pre-R510 symbol, like the compute list."""
        return self._binding_running(
            "nvmlDeviceGetGraphicsRunningProcesses_v2", pynvml.c_nvmlProcessInfo_v2_t, handle
        )

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        """The _v3 call; a missing symbol raises NVMLLibraryMismatchError, as in pynvml."""
        return _version_checked(self.nvmlDeviceGetComputeRunningProcesses_v3, handle)

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]:
        """The _v3 call; a missing symbol raises NVMLLibraryMismatchError, as in pynvml."""
        return _version_checked(self.nvmlDeviceGetGraphicsRunningProcesses_v3, handle)

    def nvmlDeviceGetProcessUtilization(self, handle: Any, timeStamp: int) -> list[Any]:
        """`c_nvmlProcessUtilizationSample_t`s for the periods after `timeStamp` (epoch µs).

        Only samples newer than `timeStamp`: one entry per process active since then,
        averaged over those periods (0 averages the driver's whole buffer, as NVML
        does); NotFound when there is none newer; NotSupported with MIG on.
        """
        device, t = self._device(handle, "nvmlDeviceGetProcessUtilization")
        if device.mig_current(t):
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        samples = process_utilization_since(
            device.processes, device.source, self._first_period_after(int(timeStamp)), t
        )
        if not samples:
            raise_nvml(pynvml.NVML_ERROR_NOT_FOUND)
        result = []
        for sample in samples:
            entry = pynvml.c_nvmlProcessUtilizationSample_t()
            entry.pid = sample.pid
            entry.timeStamp = self._micros(sample.tick)
            entry.smUtil = sample.sm_percent
            entry.memUtil = sample.mem_percent
            entry.encUtil = 0
            entry.decUtil = 0
            result.append(entry)
        return result

    def _first_period_after(self, stamp_us: int) -> int:
        """The first process-sample period whose timeStamp (epoch µs) is after `stamp_us`."""
        period = PROCESS_SAMPLE_PERIOD_S
        k = max(math.floor((stamp_us / 1_000_000 - self._start) / period), 0)
        while self._micros(k * period) <= stamp_us:
            k += 1
        while k > 0 and self._micros((k - 1) * period) > stamp_us:
            k -= 1
        return k
