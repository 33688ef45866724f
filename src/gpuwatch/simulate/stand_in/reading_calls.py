"""The stand-in's readings of a GPU: memory, utilization, power and energy, temperature,
clocks, PCIe and NVLink traffic, field values, and the ECC and remapped-row counters.

Every value is the GPU's simulated activity at the call's scenario time
(`GpuDevice.snapshot`, `GpuDevice.counters`), in NVML's units (mW, mJ, °C, MHz, KB/s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pynvml

from gpuwatch.simulate.device import GpuDevice
from gpuwatch.simulate.processes import memory_busy
from gpuwatch.simulate.stand_in.checks import Checks, raise_nvml

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
_ALL_LINKS = 0xFFFFFFFF  # field-value scopeId: every NVLink summed
_VIDEO_SAMPLING_PERIOD_US = 167_000  # encoder/decoder utilization: a sixth of a second
_MEMORY_ABOVE_GPU_C = 4  # HBM runs a few degrees above the GPU's own sensor


class ReadingCalls(Checks):
    """What a GPU measures: memory, activity, power, temperature, clocks, links, errors."""

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
            raise_nvml(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
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
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
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
            raise_nvml(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        return self._temperature(handle, sensor, "nvmlDeviceGetTemperatureV")

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        """GPU temperature in °C (sensor NVML_TEMPERATURE_GPU)."""
        return self._temperature(handle, sensor, "nvmlDeviceGetTemperature")

    def _temperature(self, handle: Any, sensor: int, name: str) -> int:
        device, t = self._device(handle, name)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)
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
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
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
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

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
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

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
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [int(pynvml.NVML_FEATURE_ENABLED), int(pynvml.NVML_FEATURE_ENABLED)]

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:
        """ECC error count; XIDs 48/94/95 each add one uncorrected error."""
        device, t = self._device(handle, "nvmlDeviceGetTotalEccErrors")
        if not device.preset.ecc:
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        uncorrected, corrected = device.ecc_errors(t)
        if errorType == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            count, base = uncorrected, device.ecc_base.uncorrected
        elif errorType == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED:
            count, base = corrected, device.ecc_base.corrected
        else:
            raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if counterType == pynvml.NVML_VOLATILE_ECC:
            return count
        if counterType == pynvml.NVML_AGGREGATE_ECC:
            return base + count
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        """(correctable rows, uncorrectable rows, remap pending, failure occurred)."""
        gpu, t = self._device(device, "nvmlDeviceGetRemappedRows")
        if not gpu.preset.remapped_rows:
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self._remapped_rows(gpu, t)

    @staticmethod
    def _remapped_rows(gpu: GpuDevice, t: float) -> tuple[int, int, int, int]:
        uncorrected, _ = gpu.ecc_errors(t)
        return (0, uncorrected, 1 if uncorrected else 0, 0)
