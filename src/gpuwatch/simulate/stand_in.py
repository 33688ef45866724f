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
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pynvml

from gpuwatch.core.clock import Clock, SystemClock
from gpuwatch.nvml.api import NvmlApi
from gpuwatch.simulate.device import GpuDevice, MigDevice, build_devices
from gpuwatch.simulate.events import EventSets, InvalidEventSetError
from gpuwatch.simulate.faults import FaultPlan
from gpuwatch.simulate.gpm import GpmSamples, InvalidSampleError
from gpuwatch.simulate.processes import (
    PROCESS_SAMPLE_PERIOD_S,
    SimProcess,
    memory_busy,
    process_utilization_since,
)
from gpuwatch.simulate.scenario import Scenario
from gpuwatch.simulate.slurm_node import SlurmNodeProcesses

Target = GpuDevice | MigDevice


@dataclass(frozen=True, slots=True)
class _GpuInstance:
    """A GPU instance handle (`nvmlDeviceGetGpuInstanceById`): the MIG device it holds."""

    mig: MigDevice


_PURE_HELPERS = frozenset(
    {"nvmlExceptionClass", "nvmlFriendlyObjectToStruct", "nvmlStructToFriendlyObject"}
)
"""pynvml functions that never call NVML: passed through unchanged."""

_ARCHITECTURES = {
    "volta": pynvml.NVML_DEVICE_ARCH_VOLTA,
    "turing": pynvml.NVML_DEVICE_ARCH_TURING,
    "ampere": pynvml.NVML_DEVICE_ARCH_AMPERE,
    "ada": pynvml.NVML_DEVICE_ARCH_ADA,
    "hopper": pynvml.NVML_DEVICE_ARCH_HOPPER,
    "blackwell": pynvml.NVML_DEVICE_ARCH_BLACKWELL,
}
_BRANDS = {
    "nvidia": pynvml.NVML_BRAND_NVIDIA,
    "tesla": pynvml.NVML_BRAND_TESLA,
    "geforce": pynvml.NVML_BRAND_GEFORCE,
    "quadro": pynvml.NVML_BRAND_QUADRO,
}
_NVLINK_FIELDS = {
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: (1, 1.0),
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: (2, 1.0),
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX: (1, 1.06),
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX: (2, 1.06),
}
_FIELD_FUNCTIONS = {
    pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: "nvmlDeviceGetTotalEnergyConsumption",
    pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: "nvmlDeviceGetTotalEccErrors",
    pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: "nvmlDeviceGetTotalEccErrors",
    pynvml.NVML_FI_DEV_ECC_SBE_AGG_TOTAL: "nvmlDeviceGetTotalEccErrors",
    pynvml.NVML_FI_DEV_ECC_DBE_AGG_TOTAL: "nvmlDeviceGetTotalEccErrors",
    pynvml.NVML_FI_DEV_REMAPPED_COR: "nvmlDeviceGetRemappedRows",
    pynvml.NVML_FI_DEV_REMAPPED_UNC: "nvmlDeviceGetRemappedRows",
    pynvml.NVML_FI_DEV_REMAPPED_PENDING: "nvmlDeviceGetRemappedRows",
    pynvml.NVML_FI_DEV_REMAPPED_FAILURE: "nvmlDeviceGetRemappedRows",
    pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER: "nvmlDeviceGetPcieReplayCounter",
}
"""Field ids that answer what an NVML call answers (faults on that call apply)."""
_ECC_EVENTS = pynvml.nvmlEventTypeSingleBitEccError | pynvml.nvmlEventTypeDoubleBitEccError
_BASE_EVENTS = (
    pynvml.nvmlEventTypePState | pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeClock
)
_ALL_LINKS = 0xFFFFFFFF  # field-value scopeId: every NVLink summed
_VIDEO_SAMPLING_PERIOD_US = 167_000  # encoder/decoder utilization: a sixth of a second
_MEMORY_ABOVE_GPU_C = 4  # HBM runs a few degrees above the GPU's own sensor
_POLL_SECONDS = 0.1  # real seconds between looks at the simulated clock while waiting


def _raise(code: int) -> NoReturn:
    raise pynvml.NVMLError(code)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A call the stand-in refused as misuse: the caller's bug, not the device's state."""

    function: str
    reason: str


def _missing(name: str) -> Callable[..., NoReturn]:
    def missing(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise pynvml.NVMLError_FunctionNotFound()

    missing.__name__ = missing.__qualname__ = name
    missing.__doc__ = f"{name}: not implemented by the stand-in (FunctionNotFound)."
    return missing


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class SimulatedNvml:
    """A stand-in for the `pynvml` module over a simulated fleet."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        clock: Clock | None = None,
        start_time: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`start_time` (epoch s) is scenario time 0 (default: clock.time() now).

        `sleep(seconds)` is used for slow-call faults and between event-wait polls.
        """
        self.scenario = scenario
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._start = self._clock.time() if start_time is None else start_time
        self._sleep = sleep
        self._faults = FaultPlan(scenario.faults)
        self._init_lock = threading.Lock()
        self._refcount = 0
        self._loaded = False
        self._initialised_at: float | None = None
        self._devices = build_devices(scenario, self._faults)
        self._targets: dict[int, Target] = {}
        self._by_uuid: dict[str, Target] = {}
        for device in self._devices:
            targets: list[Target] = [device, *device.mig]
            for target in targets:
                target.handle_struct = pynvml.struct_c_nvmlDevice_t()
                self._targets[ctypes.addressof(target.handle_struct)] = target
                self._by_uuid[target.uuid] = target
        self._process_names = {p.pid: p for d in self._devices for p in d.every_process()}
        self._slurm: SlurmNodeProcesses | None = None
        if scenario.slurm.enabled:
            node = SlurmNodeProcesses(Path(scenario.slurm.proc_root))
            self._slurm = node
            for device in self._devices:
                device.host_processes = functools.partial(node.on_gpu, device.minor_number)
        self._gpm = GpmSamples()
        self._events = EventSets(self._faults.xids)
        self.refusals: list[Refusal] = []
        """Every call refused as misuse (InvalidArgument, ArgumentVersionMismatch), in order."""

    # -- module-like fallback ------------------------------------------------------------

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

    # -- time and the common checks ------------------------------------------------------

    @property
    def devices(self) -> tuple[GpuDevice, ...]:
        """The simulated GPUs in index order (the simulated cluster names them in its
        device IDs)."""
        return tuple(self._devices)

    def scenario_time(self) -> float:
        """Seconds since scenario start (0 before it)."""
        return max(0.0, self._clock.time() - self._start)

    def _micros(self, t: float) -> int:
        return round((self._start + t) * 1_000_000)

    def _gate(self, name: str, symbol: str | None = None) -> float:
        """Checks every call makes; returns the scenario time."""
        t = self.scenario_time()
        if not self._loaded:
            _raise(pynvml.NVML_ERROR_UNINITIALIZED)
        if (symbol or name) in self._faults.missing_symbols:
            _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if self._refcount == 0:
            _raise(pynvml.NVML_ERROR_UNINITIALIZED)
        driver_error = self._faults.driver_error(t, self._initialised_at)
        if driver_error is not None:
            _raise(driver_error)
        return t

    def _refuse(
        self, function: str, reason: str, code: int = pynvml.NVML_ERROR_INVALID_ARGUMENT
    ) -> NoReturn:
        """Record a misuse in `refusals` and raise its error (InvalidArgument by default)."""
        self.refusals.append(Refusal(function, reason))
        _raise(code)

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
            _raise(lost)
        if isinstance(target, MigDevice) and not target.parent.mig_current(t):
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # its GPU left MIG mode: a stale handle
        if isinstance(target, MigDevice) and not mig:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        names = (name,) if symbol is None else (name, symbol)
        code = self._faults.call_error(gpu, names, t)
        if code is not None:
            _raise(code)
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
            _raise(code)
        delay = self._faults.delay(None, names, t)
        if delay > 0:
            self._sleep(delay)
            t = self.scenario_time()
        return t

    @staticmethod
    def _handle(target: Target) -> Any:
        return ctypes.pointer(target.handle_struct)

    # -- initialisation --------------------------------------------------------------------

    def nvmlInitWithFlags(self, flags: int) -> None:  # noqa: ARG002 - flags are accepted, unused
        """Initialise; fails inside a driver-error window (a version mismatch: for good)."""
        with self._init_lock:
            self._loaded = True
            if "nvmlInitWithFlags" in self._faults.missing_symbols:
                _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            t = self.scenario_time()
            init_error = self._faults.init_error(t)
            if init_error is not None:
                _raise(init_error)
            self._refcount += 1
            self._initialised_at = t

    def nvmlInit(self) -> None:
        """nvmlInitWithFlags(0)."""
        self.nvmlInitWithFlags(0)

    def nvmlShutdown(self) -> None:
        """Drop one reference; Uninitialized when there is none."""
        with self._init_lock:
            if not self._loaded or self._refcount == 0:
                _raise(pynvml.NVML_ERROR_UNINITIALIZED)
            self._refcount -= 1

    # -- system ----------------------------------------------------------------------------

    def nvmlSystemGetDriverVersion(self) -> str:
        """Driver version, e.g. '570.133.20'."""
        self._system("nvmlSystemGetDriverVersion")
        return self.scenario.driver.version

    def nvmlSystemGetNVMLVersion(self) -> str:
        """NVML version, e.g. '12.570.133.20'."""
        self._system("nvmlSystemGetNVMLVersion")
        return self.scenario.driver.nvml_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        """CUDA driver version as 1000 * major + 10 * minor (12080 = 12.8)."""
        self._system("nvmlSystemGetCudaDriverVersion")
        return self.scenario.driver.cuda_version

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        """Same as nvmlSystemGetCudaDriverVersion."""
        self._system("nvmlSystemGetCudaDriverVersion_v2")
        return self.scenario.driver.cuda_version

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
            _raise(pynvml.NVML_ERROR_NOT_FOUND)
        return proc.name.encode(proc.name_encoding).decode()

    # -- enumeration and identity --------------------------------------------------------------

    def nvmlDeviceGetCount(self) -> int:
        """Number of GPUs."""
        self._system("nvmlDeviceGetCount", "nvmlDeviceGetCount_v2")
        return len(self._devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        """A `c_nvmlDevice_t`; InvalidArgument out of range, the GPU's error if it is lost."""
        t = self._system("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2")
        if not 0 <= int(index) < len(self._devices):
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        lost = self._faults.device_error(int(index), t)
        if lost is not None:
            _raise(lost)
        return self._handle(self._devices[int(index)])

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> Any:
        """A GPU (GPU-...) or MIG device (MIG-...) handle; NotFound when unknown."""
        t = self._system("nvmlDeviceGetHandleByUUID")
        target = self._by_uuid.get(_text(uuid))
        if target is None:
            _raise(pynvml.NVML_ERROR_NOT_FOUND)
        lost = self._faults.device_error(target.gpu_index, t)
        if lost is not None:
            _raise(lost)
        return self._handle(target)

    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: str | bytes) -> Any:
        """A GPU handle by bus id ('00000000:18:00.0' or '0000:18:00.0')."""
        t = self._system("nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByPciBusId_v2")
        wanted = _text(pciBusId).upper()
        for device in self._devices:
            if wanted in (device.pci_bus_id, device.pci_bus_id[4:]):
                lost = self._faults.device_error(device.index, t)
                if lost is not None:
                    _raise(lost)
                return self._handle(device)
        _raise(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        """The GPU's index."""
        device, _ = self._device(handle, "nvmlDeviceGetIndex")
        return device.index

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        """/dev/nvidiaN number: not the index (default: reversed order; `minor_number`)."""
        device, _ = self._device(handle, "nvmlDeviceGetMinorNumber")
        return device.minor_number

    def nvmlDeviceGetName(self, handle: Any) -> str:
        """Product name (a MIG device: '<GPU name> MIG <profile>')."""
        target, _ = self._target(handle, "nvmlDeviceGetName", mig=True)
        return target.name if isinstance(target, MigDevice) else target.preset.name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        """'GPU-…' or, for a MIG device, 'MIG-…'."""
        target, _ = self._target(handle, "nvmlDeviceGetUUID", mig=True)
        return target.uuid

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        """Board serial number; NotSupported on GeForce."""
        device, _ = self._device(handle, "nvmlDeviceGetSerial")
        if not device.preset.serial:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return device.serial

    def nvmlDeviceGetBrand(self, handle: Any) -> int:
        """NVML_BRAND_* of the part."""
        device, _ = self._device(handle, "nvmlDeviceGetBrand")
        return int(_BRANDS[device.preset.brand])

    def nvmlDeviceGetArchitecture(self, device: Any) -> int:
        """NVML_DEVICE_ARCH_* of the part."""
        gpu, _ = self._device(device, "nvmlDeviceGetArchitecture")
        return int(_ARCHITECTURES[gpu.preset.architecture])

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        """(major, minor)."""
        target, _ = self._target(handle, "nvmlDeviceGetCudaComputeCapability", mig=True)
        preset = target.parent.preset if isinstance(target, MigDevice) else target.preset
        return preset.compute_capability

    def nvmlDeviceGetPciInfo_v3(self, handle: Any) -> Any:
        """`nvmlPciInfo_t`: bus id '00000000:18:00.0', device/subsystem ids."""
        device, _ = self._device(handle, "nvmlDeviceGetPciInfo_v3")
        info = pynvml.nvmlPciInfo_t()
        info.busIdLegacy = f"{device.pci_domain:04X}:{device.pci_bus:02X}:00.0"
        info.domain = device.pci_domain
        info.bus = device.pci_bus
        info.device = 0
        info.pciDeviceId = (device.preset.pci_device_id << 16) | 0x10DE
        info.pciSubSystemId = (device.preset.pci_subsystem_id << 16) | 0x10DE
        info.busId = device.pci_bus_id
        return info

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        """Same as nvmlDeviceGetPciInfo_v3."""
        return self.nvmlDeviceGetPciInfo_v3(handle)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        """PCIe generation of the part."""
        device, _ = self._device(handle, "nvmlDeviceGetMaxPcieLinkGeneration")
        return device.preset.pcie_gen

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        """Current PCIe generation (the maximum)."""
        device, _ = self._device(handle, "nvmlDeviceGetCurrPcieLinkGeneration")
        return device.preset.pcie_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        """PCIe lanes of the part."""
        device, _ = self._device(handle, "nvmlDeviceGetMaxPcieLinkWidth")
        return device.preset.pcie_width

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        """Current PCIe lanes (the maximum)."""
        device, _ = self._device(handle, "nvmlDeviceGetCurrPcieLinkWidth")
        return device.preset.pcie_width

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        """NVML_FEATURE_ENABLED (persistence mode on, as on servers)."""
        self._device(handle, "nvmlDeviceGetPersistenceMode")
        return int(pynvml.NVML_FEATURE_ENABLED)

    def nvmlDeviceGetComputeMode(self, handle: Any) -> int:
        """NVML_COMPUTEMODE_DEFAULT."""
        self._device(handle, "nvmlDeviceGetComputeMode")
        return int(pynvml.NVML_COMPUTEMODE_DEFAULT)

    # -- memory ------------------------------------------------------------------------------

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        """`c_nvmlMemory_t` (v1: used includes reserved) or, with
        `version=nvmlMemory_v2`, `c_nvmlMemory_v2_t` (used excludes reserved).
        """
        symbol = "nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo"
        target, t = self._target(handle, "nvmlDeviceGetMemoryInfo", symbol, mig=True)
        total, reserved, used = target.memory(t)
        if not version:
            memory = pynvml.c_nvmlMemory_t()
            memory.total = total
            memory.used = used + reserved
            memory.free = total - used - reserved
            return memory
        if version != pynvml.nvmlMemory_v2:
            _raise(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        memory = pynvml.c_nvmlMemory_v2_t()
        memory.version = version
        memory.total = total
        memory.reserved = reserved
        memory.used = used
        memory.free = total - reserved - used
        return memory

    # -- activity, power, temperature, clocks --------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        """`c_nvmlUtilization_t` in percent (memory: busy time); NotSupported with MIG on."""
        device, t = self._device(handle, "nvmlDeviceGetUtilizationRates")
        if device.mig_current(t):
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        act = device.snapshot(t).act
        rates = pynvml.c_nvmlUtilization_t()
        rates.gpu = round(100 * act.util)
        rates.memory = round(100 * memory_busy(act.dram))  # not GPM's DRAM bandwidth
        return rates

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        """Board power in mW."""
        device, t = self._device(handle, "nvmlDeviceGetPowerUsage")
        return device.snapshot(t).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        """Enforced power limit in mW."""
        device, _ = self._device(handle, "nvmlDeviceGetEnforcedPowerLimit")
        return round(device.power_limit_w * 1000)

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        """Power management limit in mW (= the enforced limit)."""
        device, _ = self._device(handle, "nvmlDeviceGetPowerManagementLimit")
        return round(device.power_limit_w * 1000)

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: Any) -> int:
        """The part's default power limit in mW."""
        device, _ = self._device(handle, "nvmlDeviceGetPowerManagementDefaultLimit")
        return round(device.preset.power_limit_w * 1000)

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: Any) -> list[int]:
        """[min, max] settable power limit in mW."""
        device, _ = self._device(handle, "nvmlDeviceGetPowerManagementLimitConstraints")
        preset = device.preset
        return [round(preset.power_min_limit_w * 1000), round(preset.power_limit_w * 1000)]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        """Energy in mJ since driver load: a large start value + ∫ power dt from t = 0."""
        device, t = self._device(handle, "nvmlDeviceGetTotalEnergyConsumption")
        return device.counters(t)[0]

    def nvmlDeviceGetTemperatureV(
        self, handle: Any, sensor: int, version: int = pynvml.nvmlTemperature_v1
    ) -> int:
        """GPU temperature in °C (sensor NVML_TEMPERATURE_GPU)."""
        if version != pynvml.nvmlTemperature_v1:
            _raise(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        return self._temperature(handle, sensor, "nvmlDeviceGetTemperatureV")

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        """GPU temperature in °C (sensor NVML_TEMPERATURE_GPU)."""
        return self._temperature(handle, sensor, "nvmlDeviceGetTemperature")

    def _temperature(self, handle: Any, sensor: int, name: str) -> int:
        device, t = self._device(handle, name)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return device.snapshot(t).temperature_c

    def nvmlDeviceGetEncoderUtilization(self, handle: Any) -> list[int]:
        """[NVENC utilization %, sampling period µs]; NotSupported with MIG on.

        Scenarios run no video work: 0 % (parts without NVENC, A100 and H100, answer 0 too).
        """
        return self._video_utilization(handle, "nvmlDeviceGetEncoderUtilization")

    def nvmlDeviceGetDecoderUtilization(self, handle: Any) -> list[int]:
        """[NVDEC utilization %, sampling period µs]; NotSupported with MIG on (0 %)."""
        return self._video_utilization(handle, "nvmlDeviceGetDecoderUtilization")

    def _video_utilization(self, handle: Any, name: str) -> list[int]:
        device, t = self._device(handle, name)
        if device.mig_current(t):
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [0, _VIDEO_SAMPLING_PERIOD_US]

    def nvmlDeviceGetClockInfo(self, handle: Any, type: int) -> int:
        """Current clock in MHz (NVML_CLOCK_GRAPHICS/SM/MEM/VIDEO)."""
        device, t = self._device(handle, "nvmlDeviceGetClockInfo")
        snap = device.snapshot(t)
        return self._clock_of(type, snap.sm_clock_mhz, snap.mem_clock_mhz)

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, type: int) -> int:
        """Maximum clock in MHz."""
        device, _ = self._device(handle, "nvmlDeviceGetMaxClockInfo")
        preset = device.preset
        return self._clock_of(type, preset.max_sm_clock_mhz, preset.max_mem_clock_mhz)

    @staticmethod
    def _clock_of(clock_type: int, sm: int, mem: int) -> int:
        if clock_type in (pynvml.NVML_CLOCK_GRAPHICS, pynvml.NVML_CLOCK_SM):
            return sm
        if clock_type == pynvml.NVML_CLOCK_MEM:
            return mem
        if clock_type == pynvml.NVML_CLOCK_VIDEO:
            return round(sm * 0.78 / 15) * 15
        _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        """nvmlClocksEventReason* bits: GpuIdle when idle, SwPowerCap at the power limit."""
        device, t = self._device(handle, "nvmlDeviceGetCurrentClocksEventReasons")
        return device.snapshot(t).clock_event_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        """Deprecated name of nvmlDeviceGetCurrentClocksEventReasons."""
        device, t = self._device(handle, "nvmlDeviceGetCurrentClocksThrottleReasons")
        return device.snapshot(t).clock_event_reasons

    def nvmlDeviceGetSupportedClocksEventReasons(self, handle: Any) -> int:
        """Every reason bit."""
        self._device(handle, "nvmlDeviceGetSupportedClocksEventReasons")
        return int(pynvml.nvmlClocksEventReasonAll)

    def nvmlDeviceGetPerformanceState(self, handle: Any) -> int:
        """P0 when busy (and always on HBM parts), else P8."""
        device, t = self._device(handle, "nvmlDeviceGetPerformanceState")
        snap = device.snapshot(t)
        busy = not snap.clock_event_reasons & pynvml.nvmlClocksEventReasonGpuIdle
        hbm = device.preset.idle_mem_clock_mhz == device.preset.max_mem_clock_mhz
        return 0 if busy or hbm else 8

    # -- interconnect ----------------------------------------------------------------------

    def nvmlDeviceGetPcieThroughput(self, device: Any, counter: int) -> int:
        """PCIe TX/RX in KB/s (KB = 1024 bytes) over the last 20 ms.

        The real call blocks ~20 ms; add a `slow_calls` fault to model that.
        """
        gpu, t = self._device(device, "nvmlDeviceGetPcieThroughput")
        act = gpu.snapshot(t).act
        if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES:
            return round(act.pcie_tx * 1024)
        if counter == pynvml.NVML_PCIE_UTIL_RX_BYTES:
            return round(act.pcie_rx * 1024)
        _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetPcieReplayCounter(self, handle: Any) -> int:
        """PCIe replays since driver load: 0 (no scenario models a bad link)."""
        self._device(handle, "nvmlDeviceGetPcieReplayCounter")
        return 0

    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: Sequence[Any]) -> Any:
        """`c_nvmlFieldValue_t` array: NVLink throughput, energy, ECC, remapped rows and
        the memory temperature (°C, HBM parts only) and the PCIe replay counter.

        As in nvml.h, the scopeId picks the link: UINT_MAX sums all links, link `i`
        (0 when no scope is given) carries its share of the traffic. Energy (mJ), the
        ECC totals (volatile and aggregate) and the remapped rows answer what their own
        calls answer, NotSupported and NoPermission faults on those calls included.
        Other fields, and fields the part lacks, get a per-entry nvmlReturn of
        NOT_SUPPORTED.
        """
        device, t = self._device(handle, "nvmlDeviceGetFieldValues")
        values = (pynvml.c_nvmlFieldValue_t * len(fieldIds))()
        stamp = self._micros(t)
        for i, field_id in enumerate(fieldIds):
            entry = values[i]
            try:
                entry.fieldId, entry.scopeId = field_id
            except TypeError:
                entry.fieldId = field_id
            entry.timestamp = stamp
            entry.latencyUsec = 0
            code, value = self._field(device, int(entry.fieldId), int(entry.scopeId), t)
            entry.nvmlReturn = code
            if value is not None:
                entry.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                entry.value.ullVal = value
        return values

    def _field(
        self, device: GpuDevice, field_id: int, scope: int, t: float
    ) -> tuple[int, int | None]:
        """(nvmlReturn, value) of one field entry."""
        nvlink = _NVLINK_FIELDS.get(field_id)
        if nvlink is not None:
            if not device.preset.has_nvlink:
                return pynvml.NVML_ERROR_NOT_SUPPORTED, None
            links = device.preset.nvlink_links
            if scope != _ALL_LINKS and scope >= links:
                return pynvml.NVML_ERROR_INVALID_ARGUMENT, None
            position, overhead = nvlink
            share = 1.0 if scope == _ALL_LINKS else 1.0 / links
            return pynvml.NVML_SUCCESS, int(device.counters(t)[position] * overhead * share)
        if field_id == pynvml.NVML_FI_DEV_MEMORY_TEMP:
            if not device.preset.memory_temperature:
                return pynvml.NVML_ERROR_NOT_SUPPORTED, None
            return pynvml.NVML_SUCCESS, device.snapshot(t).temperature_c + _MEMORY_ABOVE_GPU_C
        function = _FIELD_FUNCTIONS.get(field_id)
        if function is None:
            return pynvml.NVML_ERROR_NOT_SUPPORTED, None
        code = self._faults.call_error(device.index, (function,), t)
        if code is not None:
            return code, None
        if field_id == pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
            return pynvml.NVML_SUCCESS, device.counters(t)[0]
        if field_id == pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER:
            return pynvml.NVML_SUCCESS, 0
        if function == "nvmlDeviceGetTotalEccErrors":
            if not device.preset.ecc:
                return pynvml.NVML_ERROR_NOT_SUPPORTED, None
            uncorrected, corrected = device.ecc_errors(t)
            base = device.ecc_base
            return pynvml.NVML_SUCCESS, {
                pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: corrected,
                pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: uncorrected,
                pynvml.NVML_FI_DEV_ECC_SBE_AGG_TOTAL: base.corrected + corrected,
                pynvml.NVML_FI_DEV_ECC_DBE_AGG_TOTAL: base.uncorrected + uncorrected,
            }[field_id]
        if not device.preset.remapped_rows:
            return pynvml.NVML_ERROR_NOT_SUPPORTED, None
        rows = self._remapped_rows(device, t)
        return pynvml.NVML_SUCCESS, rows[field_id - pynvml.NVML_FI_DEV_REMAPPED_COR]

    # -- reliability -----------------------------------------------------------------------

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        """[current, pending]: enabled on data-centre parts; NotSupported on GeForce."""
        device, _ = self._device(handle, "nvmlDeviceGetEccMode")
        if not device.preset.ecc:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [int(pynvml.NVML_FEATURE_ENABLED), int(pynvml.NVML_FEATURE_ENABLED)]

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:
        """ECC error count; XIDs 48/94/95 each add one uncorrected error."""
        device, t = self._device(handle, "nvmlDeviceGetTotalEccErrors")
        if not device.preset.ecc:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        uncorrected, corrected = device.ecc_errors(t)
        if errorType == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            count, base = uncorrected, device.ecc_base.uncorrected
        elif errorType == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED:
            count, base = corrected, device.ecc_base.corrected
        else:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if counterType == pynvml.NVML_VOLATILE_ECC:
            return count
        if counterType == pynvml.NVML_AGGREGATE_ECC:
            return base + count
        _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        """(correctable rows, uncorrectable rows, remap pending, failure occurred)."""
        gpu, t = self._device(device, "nvmlDeviceGetRemappedRows")
        if not gpu.preset.remapped_rows:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self._remapped_rows(gpu, t)

    @staticmethod
    def _remapped_rows(gpu: GpuDevice, t: float) -> tuple[int, int, int, int]:
        uncorrected, _ = gpu.ecc_errors(t)
        return (0, uncorrected, 1 if uncorrected else 0, 0)

    # -- MIG -----------------------------------------------------------------------------------

    def _mig_capable(self, handle: Any, name: str) -> tuple[GpuDevice, float]:
        device, t = self._device(handle, name)
        if device.preset.mig_max == 0:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return device, t

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        """[current, pending] (NVML_DEVICE_MIG_ENABLE/DISABLE); NotSupported without MIG.

        They differ between `nvidia-smi -mig` and the GPU reset that applies it.
        """
        gpu, t = self._mig_capable(device, "nvmlDeviceGetMigMode")
        return [_mig_flag(gpu.mig_current(t)), _mig_flag(gpu.mig_pending(t))]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        """How many MIG devices the GPU can have (7); 0 while MIG is off, as in NVML."""
        gpu, t = self._mig_capable(device, "nvmlDeviceGetMaxMigDeviceCount")
        return gpu.preset.mig_max if gpu.mig_current(t) else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        """The MIG device in slot `index`; NotFound for an empty slot or with MIG off."""
        name = "nvmlDeviceGetMigDeviceHandleByIndex"
        gpu, t = self._mig_capable(device, name)
        if not 0 <= int(index) < gpu.preset.mig_max:
            self._refuse(name, f"slot {index} of {gpu.preset.mig_max}")
        if not gpu.mig_current(t) or int(index) >= len(gpu.mig):
            _raise(pynvml.NVML_ERROR_NOT_FOUND)
        return self._handle(gpu.mig[int(index)])

    def nvmlDeviceIsMigDeviceHandle(self, device: Any) -> Any:
        """A `ctypes.c_uint` (1 for a MIG device) — pynvml returns the c_uint, not .value."""
        target, _ = self._target(device, "nvmlDeviceIsMigDeviceHandle", mig=True)
        return ctypes.c_uint(1 if isinstance(target, MigDevice) else 0)

    def _mig_device(self, handle: Any, name: str) -> MigDevice:
        target, _ = self._target(handle, name, mig=True)
        if not isinstance(target, MigDevice):
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return target

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        """GPU instance id of a MIG device; NotSupported on a physical GPU."""
        return self._mig_device(device, "nvmlDeviceGetGpuInstanceId").gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        """Compute instance id of a MIG device; NotSupported on a physical GPU."""
        return self._mig_device(device, "nvmlDeviceGetComputeInstanceId").compute_instance_id

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> Any:
        """The GPU instance `gpuInstanceId` of a MIG-enabled GPU (a handle for
        `nvmlGpuInstanceGetInfo`); NotFound when it has none by that id, NotSupported
        without MIG or with MIG off (as NVML's reference says)."""
        gpu, t = self._mig_capable(device, "nvmlDeviceGetGpuInstanceById")
        if not gpu.mig_current(t):
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        for mig in gpu.mig:
            if mig.gpu_instance_id == int(gpuInstanceId):
                return _GpuInstance(mig)
        _raise(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        """A `c_nvmlGpuInstanceInfo_t`: the instance's id, profile ID and placement."""
        self._gate("nvmlGpuInstanceGetInfo")
        if not isinstance(gpuInstance, _GpuInstance):
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        mig = gpuInstance.mig
        info = pynvml.c_nvmlGpuInstanceInfo_t()
        info.id = mig.gpu_instance_id
        info.profileId = mig.gpu_instance_profile_id
        info.placement.start = mig.placement_start
        info.placement.size = mig.slices if mig.slices != 7 else 8
        return info

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> Any:
        """The physical GPU of a MIG device; InvalidArgument for a physical handle."""
        target, _ = self._target(
            migDevice, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", mig=True
        )
        if not isinstance(target, MigDevice):
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._handle(target.parent)

    # -- processes -------------------------------------------------------------------------

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
            _raise(pynvml.NVML_ERROR_UNINITIALIZED)
        r535 = self.scenario.driver.process_struct_bytes == _R535_PROCESS_STRUCT_BYTES
        if (
            name in self._faults.missing_symbols
            or not name.startswith("nvml")
            or (r535 and name == "nvmlDeviceGetRunningProcessDetailList")
        ):
            _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
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
            _raise(ret)
        count.value = count.value * 2 + 5
        entries = (struct * count.value)()
        ret = fn(handle, ctypes.byref(count), entries)
        if ret != pynvml.NVML_SUCCESS:
            _raise(ret)
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
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        samples = process_utilization_since(
            device.processes, device.source, self._first_period_after(int(timeStamp)), t
        )
        if not samples:
            _raise(pynvml.NVML_ERROR_NOT_FOUND)
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

    # -- events ----------------------------------------------------------------------------

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
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        try:
            self._events.register(eventSet, device.index, int(eventTypes), t)
        except InvalidEventSetError:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlEventSetWait_v2(self, eventSet: Any, timeoutms: int) -> Any:
        """The next due XID as `c_nvmlEventData_t`, waiting up to `timeoutms` real ms.

        Polls scenario time every 10 ms (through the injected `sleep`); Timeout when
        nothing became due.
        """
        remaining = max(int(timeoutms), 0) / 1000.0
        names = ("nvmlEventSetWait", "nvmlEventSetWait_v2")
        while True:
            t = self._gate(*names)
            code = self._faults.call_error(None, names, t)
            if code is not None:
                _raise(code)
            try:
                xid = self._events.take_due(eventSet, self.scenario_time())
            except InvalidEventSetError:
                _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            if xid is not None:
                data = pynvml.c_nvmlEventData_t()
                data.device = self._handle(self._devices[xid.gpu])
                data.eventType = pynvml.nvmlEventTypeXidCriticalError
                data.eventData = xid.xid
                data.gpuInstanceId = 0xFFFFFFFF
                data.computeInstanceId = 0xFFFFFFFF
                return data
            if remaining <= 0:
                _raise(pynvml.NVML_ERROR_TIMEOUT)
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
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    # -- GPM -------------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, device: Any) -> Any:
        """`c_nvmlGpmSupport_t`: isSupportedDevice 1 on Hopper and newer GPUs."""
        target, _ = self._target(device, "nvmlGpmQueryDeviceSupport", mig=True)
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(isinstance(target, GpuDevice) and target.preset.gpm)
        return support

    def nvmlGpmQueryIfStreamingEnabled(self, device: Any) -> int:
        """0: sample streaming is off."""
        gpu, _ = self._device(device, "nvmlGpmQueryIfStreamingEnabled")
        if not gpu.preset.gpm:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 0

    def nvmlGpmSampleAlloc(self) -> Any:
        """A new `c_nvmlGpmSample_t`."""
        self._system("nvmlGpmSampleAlloc")
        return self._gpm.alloc()

    def nvmlGpmSampleFree(self, gpmSample: Any) -> None:
        """Free a sample."""
        self._system("nvmlGpmSampleFree")
        try:
            self._gpm.free(gpmSample)
        except InvalidSampleError:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlGpmSampleGet(self, device: Any, gpmSample: Any) -> Any:
        """Take a sample of the whole GPU now; NotSupported before Hopper."""
        gpu, t = self._device(device, "nvmlGpmSampleGet")
        if not gpu.preset.gpm:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        self._record(gpmSample, gpu, gpu.preset.has_nvlink, t)
        return gpmSample

    def nvmlGpmMigSampleGet(self, device: Any, gpuInstanceId: int, gpmSample: Any) -> Any:
        """Take a sample of one GPU instance (by id) of a MIG-enabled GPU."""
        gpu, t = self._device(device, "nvmlGpmMigSampleGet")
        if not gpu.preset.gpm:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        found = [m for m in gpu.mig if m.gpu_instance_id == int(gpuInstanceId)]
        if not gpu.mig_current(t) or not found:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._record(gpmSample, found[0], False, t)
        return gpmSample

    def _record(self, sample: Any, source: GpuDevice | MigDevice, nvlink: bool, t: float) -> None:
        try:
            self._gpm.record(sample, source, nvlink, t)
        except InvalidSampleError:
            self._refuse("nvmlGpmSampleGet", "not an allocated GPM sample buffer")

    def nvmlGpmMetricsGet(self, metricsGet: Any) -> Any:
        """Fill `metricsGet.metrics[:numMetrics]` from its two samples; returns it."""
        self._system("nvmlGpmMetricsGet")
        name = "nvmlGpmMetricsGet"
        if metricsGet.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            self._refuse(name, "version", pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        if not 0 < metricsGet.numMetrics <= pynvml.NVML_GPM_METRIC_MAX:
            self._refuse(name, f"numMetrics {metricsGet.numMetrics}")
        why = self._gpm.fill(metricsGet)
        if why is not None:
            self._refuse(name, why)
        return metricsGet


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


def _mig_flag(enabled: bool) -> int:
    return int(pynvml.NVML_DEVICE_MIG_ENABLE if enabled else pynvml.NVML_DEVICE_MIG_DISABLE)


def _version_checked(call: Callable[[Any], list[Any]], handle: Any) -> list[Any]:
    try:
        return call(handle)
    except pynvml.NVMLError_FunctionNotFound:
        raise pynvml.NVMLLibraryMismatchError(
            "Unversioned function called and the pyNVML version does not match the NVML "
            "lib version. Either use matching pyNVML and NVML lib versions or use a "
            "versioned function such as " + call.__name__
        ) from None


def as_nvml_api(nv: SimulatedNvml) -> NvmlApi:
    """`nv` as the NVML surface gpuwatch calls. Also mypy's check that the stand-in
    satisfies `NvmlApi`: every function it defines has the protocol's signature (the
    rest it answers from pynvml, as `__getattr__` says)."""
    return nv
