"""The stand-in's return shapes match the real structs, call by call, on device 0."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpuwatch.clock import ManualClock
from gpuwatch.simulate import SimulatedNvml, load_scenario


def shape(value: Any) -> Any:
    """A comparable description: struct class and field names, list element shapes."""
    if isinstance(value, list | tuple):
        return ("list", shape(value[0]) if value else None)
    fields = getattr(type(value), "_fields_", None)
    if fields is not None:
        return (type(value).__name__, tuple(name for name, *_ in fields))
    if hasattr(value, "__dict__") and type(value).__name__ == "nvmlFriendlyObject":
        return ("nvmlFriendlyObject", tuple(sorted(vars(value))))
    return type(value).__name__


CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "name": lambda nv, h: nv.nvmlDeviceGetName(h),
    "uuid": lambda nv, h: nv.nvmlDeviceGetUUID(h),
    "memory_v1": lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h),
    "memory_v2": lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2),
    "utilization": lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h),
    "pci": lambda nv, h: nv.nvmlDeviceGetPciInfo(h),
    "power": lambda nv, h: nv.nvmlDeviceGetPowerUsage(h),
    "energy": lambda nv, h: nv.nvmlDeviceGetTotalEnergyConsumption(h),
    "temperature": lambda nv, h: nv.nvmlDeviceGetTemperatureV(h, nv.NVML_TEMPERATURE_GPU),
    "clock": lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
    "reasons": lambda nv, h: nv.nvmlDeviceGetCurrentClocksEventReasons(h),
    "gpm_support": lambda nv, h: nv.nvmlGpmQueryDeviceSupport(h),
    "fields": lambda nv, h: list(
        nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX])
    ),
    "driver": lambda nv, h: nv.nvmlSystemGetDriverVersion(),
    "cuda": lambda nv, h: nv.nvmlSystemGetCudaDriverVersion(),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_stand_in_matches_real_nvml(real_nvml: Any, call: str) -> None:
    fake = SimulatedNvml(load_scenario("demo"), clock=ManualClock())
    fake.nvmlInit()
    try:
        real_value = CALLS[call](real_nvml, real_nvml.nvmlDeviceGetHandleByIndex(0))
    except real_nvml.NVMLError as exc:
        pytest.skip(f"this GPU does not answer {call}: {exc}")
    fake_value = CALLS[call](fake, fake.nvmlDeviceGetHandleByIndex(0))
    assert shape(fake_value) == shape(real_value)
