"""The stand-in refuses what real NVML refuses, so wrong adapter code fails in tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from gpuwatch.simulate import ScenarioError, load_scenario
from gpuwatch.simulate.faults import ERROR_CODES
from tests.simulate.helpers import go_to, start


def gpm_request(nv: Any, sample1: Any, sample2: Any) -> Any:
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 1
    request.sample1, request.sample2 = sample1, sample2
    request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
    return request


def test_gpm_refuses_swapped_samples_one_buffer_twice_and_a_zero_interval() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    older, newer, same_time = (nv.nvmlGpmSampleAlloc() for _ in range(3))
    go_to(nv, clock, 10)
    nv.nvmlGpmSampleGet(h, older)
    go_to(nv, clock, 11)
    nv.nvmlGpmSampleGet(h, newer)
    nv.nvmlGpmSampleGet(h, same_time)
    ok = gpm_request(nv, older, newer)
    nv.nvmlGpmMetricsGet(ok)
    assert ok.metrics[0].nvmlReturn == pynvml.NVML_SUCCESS
    assert nv.refusals == []
    for first, second in ((newer, older), (newer, newer), (newer, same_time)):
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            nv.nvmlGpmMetricsGet(gpm_request(nv, first, second))
    reasons = [r.reason for r in nv.refusals]
    assert [r.function for r in nv.refusals] == ["nvmlGpmMetricsGet"] * 3
    assert "swapped" in reasons[0]
    assert "same buffer" in reasons[1]
    assert "zero interval" in reasons[2]


def test_process_utilization_returns_only_samples_newer_than_last_seen() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    go_to(nv, clock, 30.5)
    (first,) = nv.nvmlDeviceGetProcessUtilization(h, 0)
    last = first.timeStamp
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetProcessUtilization(h, last)  # nothing newer yet
    go_to(nv, clock, 31.2)
    (second,) = nv.nvmlDeviceGetProcessUtilization(h, last)
    assert second.timeStamp == last + 1_000_000
    assert second.pid == first.pid
    assert 0 < second.smUtil <= 100


def test_process_utilization_with_last_seen_zero_averages_the_whole_buffer() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    go_to(nv, clock, 1079.5)  # training until the 1080 s pause
    (busy,) = nv.nvmlDeviceGetProcessUtilization(h, 0)
    go_to(nv, clock, 1100.5)  # 20 s into the pause
    (stale,) = nv.nvmlDeviceGetProcessUtilization(h, 0)  # the buffer still holds training
    assert stale.smUtil < busy.smUtil
    assert stale.smUtil > 0.7 * busy.smUtil  # 100 of the 120 buffered seconds were busy
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetProcessUtilization(h, busy.timeStamp + 1_000_000)  # the pause: none


MIG_CHANGE = """
name = "mig-change"
[[gpus]]
preset = "h100-sxm"
[gpus.activity]
levels = { util = 0.9, sm = 0.8 }
[[gpus.processes]]
pid = 100
name = "train"
memory = "10 GiB"
[[gpus.mig]]
profile = "3g.40gb"
[gpus.mig.activity]
levels = { util = 0.5, sm = 0.4 }
[[gpus.mig_changes]]
at = 100
enabled = true
applied = 160
[[gpus]]
preset = "h100-sxm"
minor_number = 7
"""


def test_mig_mode_pending_then_current_and_the_calls_that_follow_it(
    write_scenario: Callable[..., Path],
) -> None:
    nv, clock, _ = start(write_scenario(MIG_CHANGE))
    gpu = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceGetMigMode(gpu) == [0, 0]
    assert nv.nvmlDeviceGetMaxMigDeviceCount(gpu) == 0  # MIG off: none can exist
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)
    go_to(nv, clock, 120)
    assert nv.nvmlDeviceGetMigMode(gpu) == [0, 1]  # set, waiting for a GPU reset
    assert nv.nvmlDeviceGetMaxMigDeviceCount(gpu) == 0
    assert nv.nvmlDeviceGetUtilizationRates(gpu).gpu == pytest.approx(90, abs=3)
    go_to(nv, clock, 170)
    assert nv.nvmlDeviceGetMigMode(gpu) == [1, 1]
    assert nv.nvmlDeviceGetMaxMigDeviceCount(gpu) == 7
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetUtilizationRates(gpu)
    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)
    mig_memory = nv.nvmlDeviceGetMemoryInfo(mig, version=pynvml.nvmlMemory_v2)
    gpu_memory = nv.nvmlDeviceGetMemoryInfo(gpu, version=pynvml.nvmlMemory_v2)
    assert mig_memory.total == 40 * 1000 * 1024**2 - 256 * 1024**2
    assert gpu_memory.total == 81559 * 1024**2  # the parent handle: the whole GPU
    assert nv.nvmlDeviceGetComputeRunningProcesses(gpu) == []  # pid 100 ran with MIG off
    assert [nv.nvmlDeviceGetMinorNumber(nv.nvmlDeviceGetHandleByIndex(i)) for i in (0, 1)] == [
        1,
        7,
    ]


def test_any_nvml_error_is_injectable_per_call(write_scenario: Callable[..., Path]) -> None:
    text = """
name = "errors"
[[gpus]]
preset = "h100-sxm"
[[gpus]]
preset = "h100-sxm"
[[faults.errors]]
error = "timeout"
functions = ["nvmlDeviceGetPowerUsage"]
gpu = 1
start = 10
end = 20
[[faults.errors]]
error = "unknown"
functions = ["nvmlDeviceGetTemperatureV"]
[[faults.errors]]
error = "gpu_is_lost"
functions = ["nvmlDeviceGetClockInfo"]
gpu = 0
"""
    nv, clock, _ = start(write_scenario(text))
    gpu0, gpu1 = nv.nvmlDeviceGetHandleByIndex(0), nv.nvmlDeviceGetHandleByIndex(1)
    assert nv.nvmlDeviceGetPowerUsage(gpu1) > 0
    go_to(nv, clock, 15)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nv.nvmlDeviceGetPowerUsage(gpu1)
    assert nv.nvmlDeviceGetPowerUsage(gpu0) > 0  # only GPU 1
    with pytest.raises(pynvml.NVMLError_Unknown):
        nv.nvmlDeviceGetTemperatureV(gpu0, pynvml.NVML_TEMPERATURE_GPU)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nv.nvmlDeviceGetClockInfo(gpu0, pynvml.NVML_CLOCK_SM)
    assert nv.nvmlDeviceGetClockInfo(gpu1, pynvml.NVML_CLOCK_SM) > 0
    go_to(nv, clock, 25)
    assert nv.nvmlDeviceGetPowerUsage(gpu1) > 0


def test_error_names_are_nvml_return_codes() -> None:
    for name, code in ERROR_CODES.items():
        assert getattr(pynvml, f"NVML_ERROR_{name.upper()}") == code, name


def test_an_unknown_error_name_is_a_scenario_error(write_scenario: Callable[..., Path]) -> None:
    path = write_scenario('[[faults.errors]]\nerror = "exploded"\nfunctions = ["nvmlInit"]\n')
    with pytest.raises(ScenarioError, match=r"faults\.errors\[0\]\.error: unknown NVML error"):
        load_scenario(path)


def test_energy_starts_large_and_memory_busy_is_not_dram_bandwidth() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceGetTotalEnergyConsumption(h) > 10**10  # mJ since driver load
    sample1, sample2 = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
    go_to(nv, clock, 100)
    nv.nvmlGpmSampleGet(h, sample1)
    go_to(nv, clock, 101)
    nv.nvmlGpmSampleGet(h, sample2)
    request = gpm_request(nv, sample1, sample2)
    request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL
    nv.nvmlGpmMetricsGet(request)
    bandwidth = request.metrics[0].value
    busy = nv.nvmlDeviceGetUtilizationRates(h).memory
    assert 0 < bandwidth < 100
    assert busy > bandwidth + 10  # busy time is well above the share of peak bandwidth
