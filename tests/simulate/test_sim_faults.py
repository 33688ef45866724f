"""Each fault kind raises the real pynvml exception class at the right simulated time."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import pynvml
import pytest

from gpuwatch.simulate import load_scenario
from tests.simulate.helpers import go_to, start


def test_lost_gpu_fails_every_call_from_its_time_on() -> None:
    nv, clock, _ = start("faults")
    h = nv.nvmlDeviceGetHandleByIndex(3)
    go_to(nv, clock, 119.9)
    assert nv.nvmlDeviceGetPowerUsage(h) > 0
    go_to(nv, clock, 120)
    for call in (
        nv.nvmlDeviceGetPowerUsage,
        nv.nvmlDeviceGetUUID,
        nv.nvmlDeviceGetMemoryInfo,
        nv.nvmlDeviceGetComputeRunningProcesses,
    ):
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            call(h)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nv.nvmlDeviceGetHandleByIndex(3)
    assert nv.nvmlDeviceGetCount() == 4
    other = nv.nvmlDeviceGetHandleByIndex(2)
    assert nv.nvmlDeviceGetPowerUsage(other) > 0


def test_unknown_errors_are_transient() -> None:
    nv, clock, _ = start("faults")
    h = nv.nvmlDeviceGetHandleByIndex(1)
    go_to(nv, clock, 200)
    with pytest.raises(pynvml.NVMLError_Unknown):
        nv.nvmlDeviceGetPowerUsage(h)
    go_to(nv, clock, 210)
    assert nv.nvmlDeviceGetPowerUsage(h) > 0


def test_not_supported_and_no_permission_sets() -> None:
    nv, _, _ = start("faults")
    l4 = nv.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetTotalEnergyConsumption(l4)
    assert nv.nvmlDeviceGetTotalEnergyConsumption(nv.nvmlDeviceGetHandleByIndex(0)) > 10**9
    with pytest.raises(pynvml.NVMLError_NoPermission):
        nv.nvmlSystemGetProcessName(8101)


def test_slow_call_sleeps_on_the_injected_sleep() -> None:
    nv, _, sleeps = start("faults")
    l4 = nv.nvmlDeviceGetHandleByIndex(1)
    before = nv.scenario_time()
    nv.nvmlDeviceGetPcieThroughput(l4, pynvml.NVML_PCIE_UTIL_TX_BYTES)
    assert sleeps.calls == [0.5]
    assert nv.scenario_time() == before + 0.5
    nv.nvmlDeviceGetPcieThroughput(nv.nvmlDeviceGetHandleByIndex(2), 0)
    assert sleeps.calls == [0.5]


def test_driver_error_window_then_reinitialisation() -> None:
    nv, clock, _ = start("faults")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    go_to(nv, clock, 300)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        nv.nvmlDeviceGetPowerUsage(h)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        nv.nvmlSystemGetDriverVersion()
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        nv.nvmlInit()
    go_to(nv, clock, 331)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        nv.nvmlDeviceGetPowerUsage(h)  # still failing: needs a fresh nvmlInit
    nv.nvmlShutdown()
    nv.nvmlInit()
    assert nv.nvmlDeviceGetPowerUsage(nv.nvmlDeviceGetHandleByIndex(0)) > 0


def test_a_version_mismatch_never_recovers_in_process(
    write_scenario: Callable[..., Path],
) -> None:
    path = write_scenario(
        'name = "upgrade"\n[[gpus]]\npreset = "l4"\n[[faults.driver_error]]\nstart = 10\n'
    )
    nv, clock, _ = start(path)
    assert nv.nvmlDeviceGetCount() == 1
    go_to(nv, clock, 10)
    with pytest.raises(pynvml.NVMLError_LibRmVersionMismatch):
        nv.nvmlDeviceGetCount()
    nv.nvmlShutdown()
    for t in (60, 3600):  # re-initialising, however much later, never helps
        go_to(nv, clock, t)
        with pytest.raises(pynvml.NVMLError_LibRmVersionMismatch):
            nv.nvmlInit()


def test_a_version_mismatch_with_an_end_is_refused(write_scenario: Callable[..., Path]) -> None:
    path = write_scenario(
        '[[gpus]]\npreset = "l4"\n[[faults.driver_error]]\nstart = 10\nend = 20\n'
    )
    with pytest.raises(ValueError, match=r"faults\.driver_error\[0\].*lasts until the process"):
        load_scenario(path)


def test_driver_error_shutdown_leaves_it_uninitialised() -> None:
    nv, clock, _ = start("faults")
    go_to(nv, clock, 310)
    nv.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlDeviceGetCount()
    go_to(nv, clock, 330)
    nv.nvmlInit()
    assert nv.nvmlDeviceGetCount() == 4


def test_xid_events_are_delivered_once_when_due() -> None:
    nv, clock, sleeps = start("faults")
    event_set = nv.nvmlEventSetCreate()
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(4)]
    for h in handles:
        nv.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError, event_set)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nv.nvmlEventSetWait(event_set, 0)
    go_to(nv, clock, 61)
    data = nv.nvmlEventSetWait(event_set, 1000)
    assert type(data) is pynvml.c_nvmlEventData_t
    assert data.eventType == pynvml.nvmlEventTypeXidCriticalError
    assert data.eventData == 48
    assert ctypes.addressof(data.device.contents) == ctypes.addressof(handles[0].contents)
    assert nv.nvmlDeviceGetUUID(data.device) == nv.nvmlDeviceGetUUID(handles[0])
    assert sleeps.calls == []
    with pytest.raises(pynvml.NVMLError_Timeout):
        nv.nvmlEventSetWait(event_set, 50)  # delivered once only
    assert sum(sleeps.calls) == pytest.approx(0.05)
    go_to(nv, clock, 119.995)
    data = nv.nvmlEventSetWait_v2(event_set, 1000)  # becomes due while waiting
    assert data.eventData == 79
    assert nv.scenario_time() == pytest.approx(120, abs=0.101)  # polls every 100 ms
    nv.nvmlEventSetFree(event_set)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlEventSetWait(event_set, 0)


def test_xids_before_registration_are_not_delivered() -> None:
    nv, clock, _ = start("faults")
    go_to(nv, clock, 100)
    event_set = nv.nvmlEventSetCreate()
    nv.nvmlDeviceRegisterEvents(
        nv.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlEventTypeXidCriticalError, event_set
    )
    with pytest.raises(pynvml.NVMLError_Timeout):
        nv.nvmlEventSetWait(event_set, 0)


def test_ecc_and_remapped_rows_follow_xid_48() -> None:
    nv, clock, _ = start("faults")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    unc, vol = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
    assert nv.nvmlDeviceGetTotalEccErrors(h, unc, vol) == 0
    assert nv.nvmlDeviceGetRemappedRows(h) == (0, 0, 0, 0)
    go_to(nv, clock, 60)
    assert nv.nvmlDeviceGetTotalEccErrors(h, unc, vol) == 1
    assert nv.nvmlDeviceGetTotalEccErrors(h, unc, pynvml.NVML_AGGREGATE_ECC) == 1
    assert nv.nvmlDeviceGetRemappedRows(h) == (0, 1, 1, 0)


def test_geforce_lacks_serial_ecc_remapping_mig_gpm_and_nvlink() -> None:
    nv, _, _ = start("faults")
    h = nv.nvmlDeviceGetHandleByIndex(2)
    assert nv.nvmlDeviceGetName(h) == "NVIDIA GeForce RTX 4090"
    for call in (
        nv.nvmlDeviceGetSerial,
        nv.nvmlDeviceGetRemappedRows,
        nv.nvmlDeviceGetMigMode,
        nv.nvmlDeviceGetEccMode,
    ):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            call(h)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetTotalEccErrors(h, 1, 0)
    assert nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice == 0
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlGpmSampleGet(h, nv.nvmlGpmSampleAlloc())
    (tx,) = nv.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX])
    assert tx.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    (xorg,) = nv.nvmlDeviceGetGraphicsRunningProcesses(h)
    assert xorg.pid == 1710
    assert nv.nvmlDeviceGetBrand(h) == pynvml.NVML_BRAND_GEFORCE


def test_mig_devices_on_the_a100() -> None:
    nv, _, _ = start("faults")
    gpu = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceGetMigMode(gpu) == [1, 1]
    assert nv.nvmlDeviceGetMaxMigDeviceCount(gpu) == 7
    assert nv.nvmlDeviceIsMigDeviceHandle(gpu).value == 0
    migs = [nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i) for i in range(3)]
    for slot in range(3, 7):
        with pytest.raises(pynvml.NVMLError_NotFound):
            nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, slot)
    assert [nv.nvmlDeviceGetGpuInstanceId(m) for m in migs] == [2, 3, 9]
    assert [nv.nvmlDeviceGetComputeInstanceId(m) for m in migs] == [0, 0, 0]
    assert nv.nvmlDeviceIsMigDeviceHandle(migs[0]).value == 1
    assert nv.nvmlDeviceGetName(migs[0]) == "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    uuid = nv.nvmlDeviceGetUUID(migs[1])
    assert uuid.startswith("MIG-")
    found = nv.nvmlDeviceGetHandleByUUID(uuid)
    assert ctypes.addressof(found.contents) == ctypes.addressof(migs[1].contents)
    parent = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(migs[2])
    assert ctypes.addressof(parent.contents) == ctypes.addressof(gpu.contents)
    memory = nv.nvmlDeviceGetMemoryInfo(migs[0])
    assert memory.total == 40192 * 1024 * 1024
    assert memory.used >= 30 * 1024**3
    (proc,) = nv.nvmlDeviceGetComputeRunningProcesses(migs[1])
    assert (proc.pid, proc.gpuInstanceId, proc.computeInstanceId) == (7002, 3, 0)
    assert {p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses(gpu)} == {7001, 7002}
    assert nv.nvmlDeviceGetMemoryInfo(migs[2]).used < 20 * 1024 * 1024
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetUtilizationRates(gpu)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetProcessUtilization(gpu, 0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetPowerUsage(migs[0])
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetGpuInstanceId(gpu)
    assert nv.nvmlGpmQueryDeviceSupport(gpu).isSupportedDevice == 0
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlGpmMigSampleGet(gpu, 2, nv.nvmlGpmSampleAlloc())
    assert nv.nvmlDeviceGetPowerUsage(gpu) > 100_000
    l4 = nv.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetMigMode(l4)


CUSTOM = """
name = "custom"
[[gpus]]
preset = "h100-sxm"
[[gpus.mig]]
profile = "3g.40gb"
[gpus.mig.activity]
levels = { sm = 0.6 }
[[gpus.mig]]
profile = "4g.40gb"
[[gpus]]
preset = "h200"
[gpus.activity]
levels = { util = 0.5, sm = 0.4 }
[[gpus.processes]]
pid = 12
name = "python3 job.py"
memory = "10 GiB"
memory_visible = false
[faults]
function_not_found = ["nvmlDeviceGetMemoryInfo_v2"]
[[faults.not_supported]]
gpu = 1
functions = ["nvmlDeviceGetPowerUsage"]
start = 10
end = 20
"""


def test_function_not_found_models_an_old_driver(write_scenario: Callable[..., Path]) -> None:
    old_driver = CUSTOM.replace(
        '["nvmlDeviceGetMemoryInfo_v2"]',
        '["nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetComputeRunningProcesses_v3"]',
    )
    nv, _, _ = start(write_scenario(old_driver))
    h = nv.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nv.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert nv.nvmlDeviceGetMemoryInfo(h).total == 143771 * 1024 * 1024
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nv.nvmlDeviceGetComputeRunningProcesses_v3(h)
    with pytest.raises(pynvml.NVMLLibraryMismatchError):
        nv.nvmlDeviceGetComputeRunningProcesses(h)


def test_windowed_not_supported_and_hidden_process_memory(
    write_scenario: Callable[..., Path],
) -> None:
    nv, clock, _ = start(write_scenario(CUSTOM))
    h = nv.nvmlDeviceGetHandleByIndex(1)
    (proc,) = nv.nvmlDeviceGetComputeRunningProcesses(h)
    assert proc.usedGpuMemory is None
    go_to(nv, clock, 10)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetPowerUsage(h)
    go_to(nv, clock, 20)
    assert nv.nvmlDeviceGetPowerUsage(h) > 0


def test_gpm_on_mig_instances_of_a_hopper_gpu(write_scenario: Callable[..., Path]) -> None:
    nv, clock, _ = start(write_scenario(CUSTOM))
    gpu = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlGpmQueryDeviceSupport(gpu).isSupportedDevice == 1
    first, second = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
    nv.nvmlGpmMigSampleGet(gpu, 1, first)
    clock.advance(5)
    nv.nvmlGpmMigSampleGet(gpu, 1, second)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 1
    request.sample1, request.sample2 = first, second
    request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
    nv.nvmlGpmMetricsGet(request)
    assert request.metrics[0].nvmlReturn == pynvml.NVML_SUCCESS
    assert request.metrics[0].value == pytest.approx(60, abs=2)
    other = nv.nvmlGpmSampleAlloc()
    nv.nvmlGpmSampleGet(nv.nvmlDeviceGetHandleByIndex(1), other)
    request.sample2 = other
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlGpmMetricsGet(request)  # samples of two different devices
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlGpmMigSampleGet(gpu, 5, first)
    request.version = 2
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        nv.nvmlGpmMetricsGet(request)
    nv.nvmlGpmSampleFree(first)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlGpmSampleFree(first)
