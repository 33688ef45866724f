"""The demo fleet tells its four stories, seen through the NVML calls an agent makes."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest

from gpuwatch.simulate import SimulatedNvml
from tests.simulate.helpers import go_to, start

GIB = 1024**3


def gpm(nv: SimulatedNvml, handle: Any, clock: Any, seconds: float) -> dict[int, float]:
    """GPM metrics over the next `seconds` of simulated time, by metric id."""
    ids = [2, 3, 5, 10, 20, 21, 60, 61, 13]
    first, second = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
    nv.nvmlGpmSampleGet(handle, first)
    clock.advance(seconds)
    nv.nvmlGpmSampleGet(handle, second)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(ids)
    request.sample1 = first
    request.sample2 = second
    for i, metric_id in enumerate(ids):
        request.metrics[i].metricId = metric_id
    result = nv.nvmlGpmMetricsGet(request)
    assert result is request
    values = {
        int(m.metricId): float(m.value)
        for m in request.metrics[: len(ids)]
        if m.nvmlReturn == pynvml.NVML_SUCCESS
    }
    assert request.metrics[len(ids) - 1].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    nv.nvmlGpmSampleFree(first)
    nv.nvmlGpmSampleFree(second)
    return values


def test_training_gpu_is_busy_outside_pauses_and_idle_inside() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice == 1
    clock.advance(500)
    busy = gpm(nv, h, clock, 60)
    assert 85 <= busy[2] <= 95
    assert 55 <= busy[5] <= 65
    assert 45 <= busy[10] <= 55
    assert busy[60] > 0
    assert busy[61] > 0
    rates = nv.nvmlDeviceGetUtilizationRates(h)
    assert rates.gpu >= 90
    assert 600_000 <= nv.nvmlDeviceGetPowerUsage(h) <= 700_000
    assert nv.nvmlDeviceGetCurrentClocksEventReasons(h) & pynvml.nvmlClocksEventReasonGpuIdle == 0
    assert nv.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM) == 1980

    go_to(nv, clock, 1100)  # into the 1080-1200 s pause
    paused = gpm(nv, h, clock, 60)
    assert paused[2] == 0.0
    assert paused[5] == 0.0
    assert nv.nvmlDeviceGetUtilizationRates(h).gpu == 0
    assert nv.nvmlDeviceGetCurrentClocksEventReasons(h) & pynvml.nvmlClocksEventReasonGpuIdle
    assert nv.nvmlDeviceGetPowerUsage(h) < 80_000
    assert nv.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM) == 345
    (proc,) = nv.nvmlDeviceGetComputeRunningProcesses(h)
    assert proc.usedGpuMemory == 72 * GIB  # memory stays held in the pause

    go_to(nv, clock, 1210)
    assert nv.nvmlDeviceGetUtilizationRates(h).gpu >= 90
    go_to(nv, clock, 2290)  # the next pause, 2280-2400 s
    assert nv.nvmlDeviceGetUtilizationRates(h).gpu == 0


def test_gpm_averages_across_a_pause_edge() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    clock.advance(1050)
    half = gpm(nv, h, clock, 60)  # 30 s busy then 30 s paused
    assert 40 <= half[2] <= 50


def test_idle_gpu_has_no_processes_and_idle_power() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(1)
    for _ in range(5):
        clock.advance(300)
        assert nv.nvmlDeviceGetComputeRunningProcesses(h) == []
        assert nv.nvmlDeviceGetGraphicsRunningProcesses(h) == []
        assert 60_000 <= nv.nvmlDeviceGetPowerUsage(h) <= 72_000
        assert nv.nvmlDeviceGetUtilizationRates(h).gpu == 0
        with pytest.raises(pynvml.NVMLError_NotFound):
            nv.nvmlDeviceGetProcessUtilization(h, 0)


def test_held_gpu_keeps_30_gib_with_zero_activity() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(2)
    clock.advance(700)
    (proc,) = nv.nvmlDeviceGetComputeRunningProcesses(h)
    assert proc.usedGpuMemory == 30 * GIB
    assert "ipykernel" in nv.nvmlSystemGetProcessName(proc.pid)
    assert nv.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).used >= 30 * GIB
    rates = nv.nvmlDeviceGetUtilizationRates(h)
    assert (rates.gpu, rates.memory) == (0, 0)
    metrics = gpm(nv, h, clock, 30)
    assert metrics[2] == metrics[5] == metrics[10] == 0.0
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetProcessUtilization(h, 0)  # no activity: no samples


def test_inference_gpu_preallocates_90_percent_and_runs_light() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(3)
    total = nv.nvmlDeviceGetMemoryInfo(h).total
    (proc,) = nv.nvmlDeviceGetComputeRunningProcesses(h)
    assert proc.usedGpuMemory == pytest.approx(0.9 * total, rel=0.01)
    assert "vllm.entrypoints.openai.api_server" in nv.nvmlSystemGetProcessName(proc.pid)
    sm_values = []
    for _ in range(20):
        clock.advance(60)
        metrics = gpm(nv, h, clock, 10)
        assert 8 <= metrics[2] <= 37
        assert 13 <= metrics[10] <= 42
        sm_values.append(metrics[2])
    assert max(sm_values) - min(sm_values) > 5  # it varies


def test_energy_is_monotonic_and_integrates_power() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    first = nv.nvmlDeviceGetTotalEnergyConsumption(h)
    assert first > 70_000 * 86_400 * 2  # since driver load: idle power for 2+ days, in mJ
    previous, integral_mj = first, float(first)
    for _ in range(2400):
        integral_mj += nv.nvmlDeviceGetPowerUsage(h) * 1.0  # mW x 1 s
        clock.advance(1)
        energy = nv.nvmlDeviceGetTotalEnergyConsumption(h)
        assert energy >= previous
        previous = energy
    assert previous == pytest.approx(integral_mj, rel=0.005)


def test_energy_does_not_depend_on_how_often_it_is_read() -> None:
    a, clock_a, _ = start("demo")
    b, clock_b, _ = start("demo")
    ha, hb = a.nvmlDeviceGetHandleByIndex(3), b.nvmlDeviceGetHandleByIndex(3)
    for _ in range(100):
        clock_a.advance(37)
        a.nvmlDeviceGetTotalEnergyConsumption(ha)
    clock_b.advance(3700)
    assert a.nvmlDeviceGetTotalEnergyConsumption(ha) == pytest.approx(
        b.nvmlDeviceGetTotalEnergyConsumption(hb), abs=2
    )


def test_nvlink_counters_are_cumulative_kib_with_timestamps() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    all_links = 0xFFFFFFFF  # nvml.h: scopeId UINT_MAX sums every link
    fields = [
        (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, all_links),
        (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, all_links),
        pynvml.NVML_FI_DEV_POWER_INSTANT,
    ]
    clock.advance(100)
    tx, rx, other = nv.nvmlDeviceGetFieldValues(h, fields)
    assert tx.nvmlReturn == rx.nvmlReturn == pynvml.NVML_SUCCESS
    assert tx.valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    assert tx.value.ullVal == 100 * 1500 * 1024  # 1500 MiB/s for 100 s, in KiB
    (link0,) = nv.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX])
    assert link0.value.ullVal < tx.value.ullVal / 2, "no scope: link 0 only"
    assert tx.timestamp == round(clock.time() * 1_000_000)
    assert other.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    idle = nv.nvmlDeviceGetFieldValues(nv.nvmlDeviceGetHandleByIndex(1), fields[:1])[0]
    assert idle.nvmlReturn == pynvml.NVML_SUCCESS
    assert idle.value.ullVal == 0


def test_process_utilization_returns_newer_samples_then_not_found() -> None:
    nv, clock, _ = start("demo")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetProcessUtilization(h, 0)  # t = 0: nothing sampled yet
    clock.advance(10.5)
    (sample,) = nv.nvmlDeviceGetProcessUtilization(h, 0)
    assert sample.pid == 48213
    assert sample.timeStamp == round((clock.time() - 0.5) * 1_000_000)
    assert 90 <= sample.smUtil <= 100
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetProcessUtilization(h, sample.timeStamp)
    clock.advance(1)
    (newer,) = nv.nvmlDeviceGetProcessUtilization(h, sample.timeStamp)
    assert newer.timeStamp == sample.timeStamp + 1_000_000


def test_same_calls_at_same_times_give_same_answers() -> None:
    def trace() -> list[Any]:
        nv, clock, _ = start("dgx-h100")
        out: list[Any] = []
        for step in range(30):
            clock.advance(97.3)
            for i in range(8):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                rates = nv.nvmlDeviceGetUtilizationRates(h)
                out += [rates.gpu, rates.memory, nv.nvmlDeviceGetPowerUsage(h)]
                out.append(nv.nvmlDeviceGetTemperatureV(h, 0))
                out.append(nv.nvmlDeviceGetTotalEnergyConsumption(h))
                out.append(len(nv.nvmlDeviceGetComputeRunningProcesses(h)))
                if step % 10 == 0:
                    out.append(nv.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).used)
        return out

    assert trace() == trace()
