"""The stand-in's contract against real NVML: values (types, units, ranges) and semantics.

Each check runs the same call on real GPU 0 and on the stand-in's GPU 0 (the preset
with the real card's name when there is one, else an H100) and applies the same
validator to both answers; the semantic checks compare which NVML error each side
raises (or that both answer). Skipped where NVML is absent (see conftest.py).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from typing import Any

import pynvml
import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.simulate import SimulatedNvml
from gpuwatch.simulate.presets import PRESETS
from gpuwatch.simulate.scenario import parse_scenario

Check = Callable[[Any, Any], None]


def stand_in_for(real: Any) -> tuple[SimulatedNvml, ManualClock, str | None]:
    """A one-GPU stand-in of the real GPU 0's part (its preset key, or None), 30 s in."""
    name = real.nvmlDeviceGetName(real.nvmlDeviceGetHandleByIndex(0))
    key = next((k for k, p in PRESETS.items() if p.name == name), None)
    text = f'name = "contract"\n[[gpus]]\npreset = "{key or "h100-sxm"}"\n'
    text += "[gpus.activity]\nlevels = { util = 0.5, sm = 0.4, dram = 0.2 }\n"
    clock = ManualClock()
    fake = SimulatedNvml(parse_scenario(text), clock=clock, sleep=lambda _s: None)
    fake.nvmlInit()
    clock.advance(30)
    return fake, clock, key


def _int(value: Any, low: int, high: int) -> None:
    assert isinstance(value, int), type(value)
    assert low <= value <= high, value


def check_memory_v1(nv: Any, h: Any) -> None:
    memory = nv.nvmlDeviceGetMemoryInfo(h)
    for field in (memory.total, memory.used, memory.free):
        _int(field, 0, 2**50)  # bytes
    assert memory.total > 2**30
    assert memory.used + memory.free == memory.total  # v1: used includes reserved


def check_memory_v2(nv: Any, h: Any) -> None:
    memory = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
    v1 = nv.nvmlDeviceGetMemoryInfo(h)
    assert memory.reserved > 0
    assert memory.total == memory.reserved + memory.used + memory.free
    assert abs(v1.used - (memory.used + memory.reserved)) < 2**30  # read a moment apart


def check_utilization(nv: Any, h: Any) -> None:
    rates = nv.nvmlDeviceGetUtilizationRates(h)
    _int(rates.gpu, 0, 100)  # percent
    _int(rates.memory, 0, 100)


def check_power(nv: Any, h: Any) -> None:
    power = nv.nvmlDeviceGetPowerUsage(h)
    limit = nv.nvmlDeviceGetEnforcedPowerLimit(h)
    _int(limit, 50_000, 2_000_000)  # mW: 50-2000 W
    _int(power, 5_000, int(limit * 1.2))  # mW: an idle board draws more than 5 W


def check_energy(nv: Any, h: Any) -> None:
    first = nv.nvmlDeviceGetTotalEnergyConsumption(h)
    _int(first, 1, 2**64 - 1)  # mJ since the driver loaded: never starts at 0 on a host
    second = nv.nvmlDeviceGetTotalEnergyConsumption(h)
    assert second >= first


def check_temperature(nv: Any, h: Any) -> None:
    _int(nv.nvmlDeviceGetTemperatureV(h, nv.NVML_TEMPERATURE_GPU), 5, 110)  # °C


def check_clocks(nv: Any, h: Any) -> None:
    sm = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
    _int(sm, 100, nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))  # MHz
    _int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM), 100, 20_000)


def check_reasons(nv: Any, h: Any) -> None:
    reasons = nv.nvmlDeviceGetCurrentClocksEventReasons(h)
    _int(reasons, 0, 2**64 - 1)
    assert reasons & ~int(nv.nvmlClocksEventReasonAll) == 0


def check_identity(nv: Any, h: Any) -> None:
    assert re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", nv.nvmlDeviceGetUUID(h))
    assert isinstance(nv.nvmlDeviceGetName(h), str)
    bus = nv.nvmlDeviceGetPciInfo(h).busId
    bus = bus.decode() if isinstance(bus, bytes) else bus
    assert re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]", bus), bus
    _int(nv.nvmlDeviceGetMinorNumber(h), 0, 255)


def check_system(nv: Any, _h: Any) -> None:
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", nv.nvmlSystemGetDriverVersion())
    cuda = nv.nvmlSystemGetCudaDriverVersion()
    _int(cuda, 10_000, 99_990)  # 1000 * major + 10 * minor
    assert cuda % 10 == 0


def check_nvlink_fields(nv: Any, h: Any) -> None:
    fields = [(nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0xFFFFFFFF)]
    (entry,) = nv.nvmlDeviceGetFieldValues(h, fields)
    assert int(entry.nvmlReturn) in (nv.NVML_SUCCESS, nv.NVML_ERROR_NOT_SUPPORTED)
    if int(entry.nvmlReturn) == nv.NVML_SUCCESS:
        assert entry.valueType == nv.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG  # KiB counter
        assert entry.timestamp > 1_600_000_000 * 10**6  # epoch µs


def _memory_temperature(nv: Any, h: Any) -> Any:
    (entry,) = nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_MEMORY_TEMP])
    return entry


def check_memory_temperature_field(nv: Any, h: Any) -> None:
    entry = _memory_temperature(nv, h)
    assert int(entry.nvmlReturn) in (nv.NVML_SUCCESS, nv.NVML_ERROR_NOT_SUPPORTED)
    if int(entry.nvmlReturn) == nv.NVML_SUCCESS:  # HBM parts: °C
        value = entry.value.uiVal if entry.valueType == nv.NVML_VALUE_TYPE_UNSIGNED_INT else None
        value = entry.value.ullVal if value is None else value
        _int(int(value), 5, 120)


def check_video_utilization(nv: Any, h: Any) -> None:
    for call in (nv.nvmlDeviceGetEncoderUtilization, nv.nvmlDeviceGetDecoderUtilization):
        utilization, period_us = call(h)
        _int(utilization, 0, 100)  # percent
        _int(period_us, 1, 10_000_000)  # µs


def check_pcie_replays(nv: Any, h: Any) -> None:
    count = nv.nvmlDeviceGetPcieReplayCounter(h)
    _int(count, 0, 2**32 - 1)
    (entry,) = nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_PCIE_REPLAY_COUNTER])
    assert int(entry.nvmlReturn) == nv.NVML_SUCCESS


def check_processes(nv: Any, h: Any) -> None:
    for proc in nv.nvmlDeviceGetComputeRunningProcesses(h):
        _int(proc.pid, 1, 2**32 - 1)
        assert proc.usedGpuMemory is None or proc.usedGpuMemory >= 0  # bytes or hidden


def check_gpm_support(nv: Any, h: Any) -> None:
    assert nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice in (0, 1)


CHECKS: dict[str, Check] = {
    "memory_v1": check_memory_v1,
    "memory_v2": check_memory_v2,
    "utilization": check_utilization,
    "power": check_power,
    "energy": check_energy,
    "temperature": check_temperature,
    "clocks": check_clocks,
    "reasons": check_reasons,
    "identity": check_identity,
    "system": check_system,
    "nvlink_fields": check_nvlink_fields,
    "processes": check_processes,
    "gpm_support": check_gpm_support,
    "memory_temperature_field": check_memory_temperature_field,
    "video_utilization": check_video_utilization,
    "pcie_replays": check_pcie_replays,
}


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_both_answer_with_valid_values(real_nvml: Any, check: str) -> None:
    fake, _, _ = stand_in_for(real_nvml)
    try:
        CHECKS[check](real_nvml, real_nvml.nvmlDeviceGetHandleByIndex(0))
    except real_nvml.NVMLError_NotSupported as exc:
        pytest.skip(f"this GPU does not answer {check}: {exc}")
    CHECKS[check](fake, fake.nvmlDeviceGetHandleByIndex(0))


def test_the_preset_matches_the_real_part(real_nvml: Any) -> None:
    fake, _, key = stand_in_for(real_nvml)
    if key is None:
        pytest.skip("no preset carries this GPU's name")
    real_h, fake_h = real_nvml.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(0)
    assert (
        fake.nvmlDeviceGetMemoryInfo(fake_h).total
        == real_nvml.nvmlDeviceGetMemoryInfo(real_h).total
    )
    for clock in (real_nvml.NVML_CLOCK_SM, real_nvml.NVML_CLOCK_MEM):
        assert fake.nvmlDeviceGetMaxClockInfo(fake_h, clock) == real_nvml.nvmlDeviceGetMaxClockInfo(
            real_h, clock
        )
    assert fake.nvmlGpmQueryDeviceSupport(fake_h).isSupportedDevice == (
        real_nvml.nvmlGpmQueryDeviceSupport(real_h).isSupportedDevice
    )
    # presets.toml `memory_temperature`: whether the part has a memory sensor (HBM)
    assert int(_memory_temperature(fake, fake_h).nvmlReturn) == int(
        _memory_temperature(real_nvml, real_h).nvmlReturn
    )


def outcome(call: Callable[[], Any], nv: Any) -> str:
    """'ok', or the NVML error class name a call raises."""
    try:
        call()
    except nv.NVMLError as exc:
        return type(exc).__name__
    return "ok"


def _gpm_pair(nv: Any, h: Any, pause: Callable[[], None]) -> tuple[Any, Any]:
    first, second = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
    nv.nvmlGpmSampleGet(h, first)
    pause()
    nv.nvmlGpmSampleGet(h, second)
    return first, second


def _gpm_get(nv: Any, sample1: Any, sample2: Any) -> Any:
    request = nv.c_nvmlGpmMetricsGet_t()
    request.version = nv.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 1
    request.sample1, request.sample2 = sample1, sample2
    request.metrics[0].metricId = nv.NVML_GPM_METRIC_SM_UTIL
    return nv.nvmlGpmMetricsGet(request)


Semantic = Callable[[Any, Any, Callable[[], None]], Callable[[], Any]]
SEMANTICS: dict[str, Semantic] = {
    "handle_out_of_range": lambda nv, h, _p: (
        lambda: nv.nvmlDeviceGetHandleByIndex(nv.nvmlDeviceGetCount())
    ),
    "process_utilization_from_the_future": lambda nv, h, _p: (
        lambda: nv.nvmlDeviceGetProcessUtilization(h, int((time.time() + 3600) * 1e6))
    ),
    "temperature_bad_sensor": lambda nv, h, _p: lambda: nv.nvmlDeviceGetTemperatureV(h, 99),
    "clock_bad_type": lambda nv, h, _p: lambda: nv.nvmlDeviceGetClockInfo(h, 99),
    "mig_handle_of_a_gpu_without_mig_on": lambda nv, h, _p: (
        lambda: nv.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)
    ),
    "gpu_instance_id_of_a_physical_gpu": lambda nv, h, _p: lambda: nv.nvmlDeviceGetGpuInstanceId(h),
}
"""Calls whose error (or answer) must be the same class on both sides."""

GPM_SEMANTICS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "in_order": _gpm_get,
    "swapped": lambda nv, a, b: _gpm_get(nv, b, a),
    "same_buffer_twice": lambda nv, a, b: _gpm_get(nv, b, b),
}


@pytest.mark.parametrize("case", sorted(SEMANTICS))
def test_both_raise_the_same_error(real_nvml: Any, case: str) -> None:
    fake, clock, _ = stand_in_for(real_nvml)
    real_h, fake_h = real_nvml.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(0)
    if case.startswith("mig_") and _mig_on(real_nvml, real_h):
        pytest.skip("MIG is on on this GPU")
    real = outcome(SEMANTICS[case](real_nvml, real_h, lambda: time.sleep(0.2)), real_nvml)
    simulated = outcome(SEMANTICS[case](fake, fake_h, lambda: clock.advance(0.2)), fake)
    assert simulated == real


@pytest.mark.parametrize("case", sorted(GPM_SEMANTICS))
def test_gpm_misuse_is_refused_on_both(real_nvml: Any, case: str) -> None:
    fake, clock, _ = stand_in_for(real_nvml)
    real_h, fake_h = real_nvml.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(0)
    if not real_nvml.nvmlGpmQueryDeviceSupport(real_h).isSupportedDevice:
        pytest.skip("no GPM on this GPU (Hopper and newer)")
    real_pair = _gpm_pair(real_nvml, real_h, lambda: time.sleep(0.2))
    fake_pair = _gpm_pair(fake, fake_h, lambda: clock.advance(0.2))
    real = outcome(lambda: GPM_SEMANTICS[case](real_nvml, *real_pair), real_nvml)
    simulated = outcome(lambda: GPM_SEMANTICS[case](fake, *fake_pair), fake)
    assert simulated == real
    assert (real == "ok") == (case == "in_order")  # what issue 8 states of real NVML


def test_mig_mode_and_max_count_agree(real_nvml: Any) -> None:
    fake, _, key = stand_in_for(real_nvml)
    real_h, fake_h = real_nvml.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(0)
    real_mode = outcome(lambda: real_nvml.nvmlDeviceGetMigMode(real_h), real_nvml)
    if key is not None:
        assert outcome(lambda: fake.nvmlDeviceGetMigMode(fake_h), fake) == real_mode
    if real_mode != "ok":
        pytest.skip("no MIG on this GPU")
    current, pending = real_nvml.nvmlDeviceGetMigMode(real_h)
    assert current in (0, 1)
    assert pending in (0, 1)
    count = real_nvml.nvmlDeviceGetMaxMigDeviceCount(real_h)
    assert (count > 0) == bool(current)  # 0 while MIG is off, as the stand-in answers


def _mig_on(nv: Any, h: Any) -> bool:
    try:
        return bool(nv.nvmlDeviceGetMigMode(h)[0])
    except nv.NVMLError:
        return False


def test_process_utilization_honours_the_last_seen_timestamp(real_nvml: Any) -> None:
    h = real_nvml.nvmlDeviceGetHandleByIndex(0)
    try:
        samples = real_nvml.nvmlDeviceGetProcessUtilization(h, 0)
    except (real_nvml.NVMLError_NotFound, real_nvml.NVMLError_NotSupported) as exc:
        pytest.skip(f"no process-utilization samples here ({exc}): run a GPU job")
    newest = max(int(s.timeStamp) for s in samples)
    for sample in samples:
        _int(int(sample.smUtil), 0, 100)
        assert int(sample.timeStamp) > 1_600_000_000 * 10**6  # epoch µs
    try:
        again = real_nvml.nvmlDeviceGetProcessUtilization(h, newest)
    except real_nvml.NVMLError_NotFound:
        return  # nothing newer: what the stand-in answers too
    assert all(int(s.timeStamp) > newest for s in again)


def test_errors_are_the_generated_classes_on_both(real_nvml: Any) -> None:
    fake, _, _ = stand_in_for(real_nvml)
    for code in (pynvml.NVML_ERROR_NOT_FOUND, pynvml.NVML_ERROR_INVALID_ARGUMENT):
        assert type(real_nvml.NVMLError(code)) is type(fake.NVMLError(code))


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_the_stand_in_meets_every_check_itself(check: str) -> None:
    """Runs without a GPU: a check that fails here is a stand-in or validator bug."""
    clock = ManualClock()
    fake = SimulatedNvml(
        parse_scenario('name = "self"\n[[gpus]]\npreset = "h100-sxm"\n'), clock=clock
    )
    fake.nvmlInit()
    clock.advance(30)
    CHECKS[check](fake, fake.nvmlDeviceGetHandleByIndex(0))
    pair = _gpm_pair(fake, fake.nvmlDeviceGetHandleByIndex(0), lambda: clock.advance(0.2))
    assert [
        outcome(functools.partial(GPM_SEMANTICS[c], fake, *pair), fake)
        for c in sorted(GPM_SEMANTICS)
    ] == [
        "ok",
        "NVMLError_InvalidArgument",
        "NVMLError_InvalidArgument",
    ]
