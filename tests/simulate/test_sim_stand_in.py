"""The stand-in at the library boundary: real pynvml types, errors, strings and handles."""

from __future__ import annotations

import ctypes
import time

import pynvml
import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.simulate import SimulatedNvml, load_scenario
from tests.simulate.helpers import start


def test_calls_before_init_raise_uninitialized() -> None:
    nv, _, _ = start("demo", init=False)
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlDeviceGetCount()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlSystemGetDriverVersion()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlShutdown()


def test_shutdown_counts_references() -> None:
    nv, _, _ = start("demo")
    nv.nvmlInit()
    nv.nvmlShutdown()
    assert nv.nvmlDeviceGetCount() == 4
    nv.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlDeviceGetCount()


def test_system_calls() -> None:
    nv, _, _ = start("demo")
    assert nv.nvmlSystemGetDriverVersion() == "570.133.20"
    assert nv.nvmlSystemGetNVMLVersion() == "12.570.133.20"
    assert nv.nvmlSystemGetCudaDriverVersion() == 12080
    assert nv.nvmlSystemGetCudaDriverVersion_v2() == 12080
    assert nv.nvmlSystemGetProcessName(48213).startswith("python3 train.py")
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlSystemGetProcessName(1)


def test_handles_are_real_device_pointers() -> None:
    nv, _, _ = start("demo")
    handle = nv.nvmlDeviceGetHandleByIndex(2)
    assert isinstance(handle, pynvml.c_nvmlDevice_t)
    again = nv.nvmlDeviceGetHandleByIndex(2)
    assert ctypes.addressof(handle.contents) == ctypes.addressof(again.contents)
    uuid = nv.nvmlDeviceGetUUID(handle)
    by_uuid = nv.nvmlDeviceGetHandleByUUID(uuid)
    assert ctypes.addressof(by_uuid.contents) == ctypes.addressof(handle.contents)
    assert nv.nvmlDeviceGetIndex(by_uuid) == 2
    bus = nv.nvmlDeviceGetPciInfo(handle).busId
    assert nv.nvmlDeviceGetIndex(nv.nvmlDeviceGetHandleByPciBusId(bus)) == 2
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlDeviceGetHandleByIndex(4)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000")
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlDeviceGetName(pynvml.c_nvmlDevice_t())


def test_identity_strings_are_str_and_formatted_like_nvml() -> None:
    nv, _, _ = start("demo")
    handle = nv.nvmlDeviceGetHandleByIndex(0)
    name, uuid, serial = (
        nv.nvmlDeviceGetName(handle),
        nv.nvmlDeviceGetUUID(handle),
        nv.nvmlDeviceGetSerial(handle),
    )
    assert name == "NVIDIA H100 80GB HBM3"
    assert isinstance(uuid, str)
    assert uuid.startswith("GPU-")
    assert [len(part) for part in uuid[4:].split("-")] == [8, 4, 4, 4, 12]
    assert isinstance(serial, str)
    assert len(serial) == 13
    assert serial.isdigit()
    pci = nv.nvmlDeviceGetPciInfo(handle)
    assert type(pci) is pynvml.nvmlPciInfo_t
    assert pci.busId == "00000000:18:00.0"
    assert pci.busIdLegacy == "0000:18:00.0"
    assert (pci.bus, pci.pciDeviceId) == (0x18, 0x233010DE)
    assert nv.nvmlDeviceGetCudaComputeCapability(handle) == (9, 0)
    assert nv.nvmlDeviceGetArchitecture(handle) == pynvml.NVML_DEVICE_ARCH_HOPPER
    assert nv.nvmlDeviceGetBrand(handle) == pynvml.NVML_BRAND_NVIDIA


def test_identity_is_deterministic_per_scenario() -> None:
    a, _, _ = start("demo")
    b, _, _ = start("demo")
    c, _, _ = start("dgx-h100")
    uuids = [a.nvmlDeviceGetUUID(a.nvmlDeviceGetHandleByIndex(i)) for i in range(4)]
    assert uuids == [b.nvmlDeviceGetUUID(b.nvmlDeviceGetHandleByIndex(i)) for i in range(4)]
    assert len(set(uuids)) == 4
    assert a.nvmlDeviceGetUUID(a.nvmlDeviceGetHandleByIndex(0)) != c.nvmlDeviceGetUUID(
        c.nvmlDeviceGetHandleByIndex(0)
    )


def test_return_types_are_the_real_structs() -> None:
    nv, clock, _ = start("demo")
    clock.advance(10)
    h = nv.nvmlDeviceGetHandleByIndex(0)
    assert type(nv.nvmlDeviceGetMemoryInfo(h)) is pynvml.c_nvmlMemory_t
    assert (
        type(nv.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2))
        is pynvml.c_nvmlMemory_v2_t
    )
    assert type(nv.nvmlDeviceGetUtilizationRates(h)) is pynvml.c_nvmlUtilization_t
    values = nv.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX])
    assert isinstance(values[0], pynvml.c_nvmlFieldValue_t)
    samples = nv.nvmlDeviceGetProcessUtilization(h, 0)
    assert type(samples) is list
    assert type(samples[0]) is pynvml.c_nvmlProcessUtilizationSample_t
    support = nv.nvmlGpmQueryDeviceSupport(h)
    assert type(support) is pynvml.c_nvmlGpmSupport_t
    sample = nv.nvmlGpmSampleAlloc()
    assert isinstance(sample, pynvml.c_nvmlGpmSample_t)
    event_set = nv.nvmlEventSetCreate()
    assert isinstance(event_set, pynvml.c_nvmlEventSet_t)
    (proc,) = nv.nvmlDeviceGetComputeRunningProcesses(h)
    assert type(proc) is pynvml.nvmlFriendlyObject
    assert sorted(vars(proc)) == ["computeInstanceId", "gpuInstanceId", "pid", "usedGpuMemory"]
    assert proc.gpuInstanceId == 0xFFFFFFFF
    for call in (
        nv.nvmlDeviceGetPowerUsage,
        nv.nvmlDeviceGetEnforcedPowerLimit,
        nv.nvmlDeviceGetTotalEnergyConsumption,
        nv.nvmlDeviceGetCurrentClocksEventReasons,
    ):
        assert type(call(h)) is int
    assert type(nv.nvmlDeviceGetTemperatureV(h, pynvml.NVML_TEMPERATURE_GPU)) is int
    assert type(nv.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)) is int


def test_memory_v1_used_includes_reserved_and_v2_excludes_it() -> None:
    nv, _, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(1)
    v1 = nv.nvmlDeviceGetMemoryInfo(h)
    v2 = nv.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert v1.total == v2.total == 81559 * 1024 * 1024
    assert v2.version == pynvml.nvmlMemory_v2
    assert 300 * 1024 * 1024 <= v2.reserved <= 600 * 1024 * 1024
    assert v2.used == 1024 * 1024
    assert v1.used == v2.used + v2.reserved
    assert v1.free == v1.total - v1.used
    assert v2.free == v2.total - v2.reserved - v2.used == v1.free
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        nv.nvmlDeviceGetMemoryInfo(h, version=7)


def test_constants_classes_and_helpers_pass_through() -> None:
    nv, _, _ = start("demo")
    assert nv.NVML_CLOCK_SM == pynvml.NVML_CLOCK_SM
    assert nv.nvmlMemory_v2 == pynvml.nvmlMemory_v2
    assert nv.c_nvmlGpmMetricsGet_t is pynvml.c_nvmlGpmMetricsGet_t
    assert nv.NVMLError is pynvml.NVMLError
    assert nv.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost
    assert nv.nvmlStructToFriendlyObject is pynvml.nvmlStructToFriendlyObject
    with pytest.raises(AttributeError):
        _ = nv.no_such_thing
    with pytest.raises(AttributeError):
        _ = nv._LoadNvmlLibrary  # private pynvml names are not passed through


def test_unimplemented_nvml_functions_raise_function_not_found() -> None:
    nv, _, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nv.nvmlDeviceGetFanSpeed(h)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nv.nvmlDeviceGetBAR1MemoryInfo(h)
    assert nv.nvmlDeviceGetFanSpeed.__name__ == "nvmlDeviceGetFanSpeed"


def test_errors_are_the_generated_pynvml_classes() -> None:
    nv, _, _ = start("demo")
    with pytest.raises(pynvml.NVMLError) as info:
        nv.nvmlDeviceGetHandleByIndex(9)
    assert type(info.value) is pynvml.NVMLError_InvalidArgument
    assert info.value.value == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert str(info.value) == "Invalid Argument"


def test_start_time_sets_scenario_time_zero() -> None:
    clock = ManualClock()
    nv = SimulatedNvml(load_scenario("demo"), clock=clock, start_time=clock.time() - 1140)
    nv.nvmlInit()
    assert nv.scenario_time() == 1140
    rates = nv.nvmlDeviceGetUtilizationRates(nv.nvmlDeviceGetHandleByIndex(0))
    assert rates.gpu == 0  # inside the 1080-1200 s pause


def test_calls_are_cheap_enough_for_a_dgx_at_25_calls_per_gpu_per_second() -> None:
    nv, clock, _ = start("dgx-h100")
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(8)]
    began = time.perf_counter()
    for _ in range(10):  # ten simulated seconds, 8 GPUs x 25 calls each
        clock.advance(1)
        for h in handles:
            for _ in range(3):
                nv.nvmlDeviceGetUtilizationRates(h)
                nv.nvmlDeviceGetPowerUsage(h)
                nv.nvmlDeviceGetTotalEnergyConsumption(h)
                nv.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
                nv.nvmlDeviceGetTemperatureV(h, 0)
                nv.nvmlDeviceGetClockInfo(h, 1)
                nv.nvmlDeviceGetCurrentClocksEventReasons(h)
                nv.nvmlDeviceGetFieldValues(h, [138, 139])
            nv.nvmlDeviceGetComputeRunningProcesses(h)
    elapsed = time.perf_counter() - began
    assert elapsed < 1.0, f"2000 calls took {elapsed:.3f} s"
