"""gpuwatch.nvml.parse and gpuwatch.nvml.errors: pure functions on literals and real
pynvml ctypes structs filled by hand (no NVML library call is made)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pynvml
import pytest

from gpuwatch.core.snapshot import CLOCK_EVENT_REASONS
from gpuwatch.nvml import parse
from gpuwatch.nvml.errors import NvmlErrorKind, classify, describe
from gpuwatch.nvml.parse import MemoryReading, RawProcess

NO_INSTANCE = 0xFFFFFFFF

# --- clock-event reasons ---------------------------------------------------------------


def test_no_reason_bits() -> None:
    assert parse.decode_clock_event_reasons(0) == ()


@pytest.mark.parametrize(
    ("bit", "name"),
    [
        (0x1, "gpu_idle"),
        (0x2, "applications_clocks_setting"),
        (0x4, "sw_power_cap"),
        (0x8, "hw_slowdown"),
        (0x10, "sync_boost"),
        (0x20, "sw_thermal_slowdown"),
        (0x40, "hw_thermal_slowdown"),
        (0x80, "hw_power_brake_slowdown"),
        (0x100, "display_clock_setting"),
    ],
)
def test_single_reason_bit(bit: int, name: str) -> None:
    assert parse.decode_clock_event_reasons(bit) == (name,)


def test_combined_reason_bits_in_bit_order() -> None:
    mask = 0x40 | 0x4 | 0x1
    assert parse.decode_clock_event_reasons(mask) == (
        "gpu_idle",
        "sw_power_cap",
        "hw_thermal_slowdown",
    )


def test_all_reason_bits() -> None:
    assert parse.decode_clock_event_reasons(0x1FF) == tuple(CLOCK_EVENT_REASONS.values())


def test_unknown_reason_bits_are_ignored() -> None:
    assert parse.decode_clock_event_reasons(0x200 | 0x8 | 0x8000_0000) == ("hw_slowdown",)


@pytest.mark.parametrize(
    ("constant", "name"),
    [
        ("nvmlClocksEventReasonGpuIdle", "gpu_idle"),
        ("nvmlClocksEventReasonApplicationsClocksSetting", "applications_clocks_setting"),
        ("nvmlClocksEventReasonSwPowerCap", "sw_power_cap"),
        ("nvmlClocksEventReasonHwSlowdown", "hw_slowdown"),
        ("nvmlClocksEventReasonSyncBoost", "sync_boost"),
        ("nvmlClocksEventReasonSwThermalSlowdown", "sw_thermal_slowdown"),
        ("nvmlClocksEventReasonHwThermalSlowdown", "hw_thermal_slowdown"),
        ("nvmlClocksEventReasonHwPowerBrakeSlowdown", "hw_power_brake_slowdown"),
        ("nvmlClocksEventReasonDisplayClockSetting", "display_clock_setting"),
    ],
)
def test_reason_bits_match_pynvml(constant: str, name: str) -> None:
    assert CLOCK_EVENT_REASONS[getattr(pynvml, constant)] == name


# --- ratios and unit conversions -------------------------------------------------------


@pytest.mark.parametrize(
    ("percent", "ratio"),
    [
        (0, 0.0),
        (50, 0.5),
        (100, 1.0),
        (12.5, 0.125),
        (-5, 0.0),
        (150, 1.0),
        (101, 1.0),
    ],
)
def test_percent_to_ratio(percent: float, ratio: float) -> None:
    assert parse.percent_to_ratio(percent) == pytest.approx(ratio)


def test_percent_to_ratio_none() -> None:
    assert parse.percent_to_ratio(None) is None


def test_percent_to_ratio_returns_float() -> None:
    assert type(parse.percent_to_ratio(37)) is float


def test_unit_conversions() -> None:
    assert parse.milliwatts_to_watts(250_500) == 250.5
    assert parse.millijoules_to_joules(1_234_567) == pytest.approx(1234.567)
    assert parse.megahertz_to_hertz(1410) == 1_410_000_000.0
    assert parse.kilobytes_per_second_to_bytes(3) == 3072.0
    assert parse.mebibytes_per_second_to_bytes(2) == 2 * 1024 * 1024
    assert parse.mebibytes_per_second_to_bytes(0.5) == 512 * 1024
    assert parse.milliwatts_to_watts(0) == 0.0


def test_text() -> None:
    assert parse.text("NVIDIA H100") == "NVIDIA H100"
    assert parse.text(b"NVIDIA H100") == "NVIDIA H100"
    assert parse.text(b"bad \xff byte") == "bad \ufffd byte"


def test_format_cuda_version() -> None:
    assert parse.format_cuda_version(12040) == "12.4"
    assert parse.format_cuda_version(11080) == "11.8"
    assert parse.format_cuda_version(12000) == "12.0"
    assert parse.format_cuda_version(13010) == "13.1"


def test_pid_names_drops_exited_processes() -> None:
    names = {1: "init", 42: "python", 7: "gone"}
    assert parse.pid_names(names, [42, 1, 99]) == {42: "python", 1: "init"}
    assert parse.pid_names({}, [1]) == {}


# --- memory ----------------------------------------------------------------------------

GIB = 1024**3


def test_parse_memory_v1_like_object() -> None:
    info = SimpleNamespace(total=80 * GIB, used=10 * GIB, free=70 * GIB)
    assert parse.parse_memory(info) == MemoryReading(80 * GIB, 10 * GIB, 70 * GIB, None)


def test_parse_memory_v2_like_object() -> None:
    info = SimpleNamespace(total=80 * GIB, used=9 * GIB, free=70 * GIB, reserved=GIB)
    assert parse.parse_memory(info) == MemoryReading(80 * GIB, 9 * GIB, 70 * GIB, GIB)


def test_parse_memory_real_v1_struct() -> None:
    info = pynvml.c_nvmlMemory_t()
    info.total = 80 * GIB
    info.free = 60 * GIB
    info.used = 20 * GIB
    reading = parse.parse_memory(info)
    assert reading == MemoryReading(80 * GIB, 20 * GIB, 60 * GIB, None)
    assert type(reading.total_bytes) is int


def test_parse_memory_real_v2_struct() -> None:
    info = pynvml.c_nvmlMemory_v2_t()
    info.version = pynvml.nvmlMemory_v2
    info.total = 80 * GIB
    info.reserved = 512 * 1024 * 1024
    info.free = 60 * GIB
    info.used = 20 * GIB - 512 * 1024 * 1024
    reading = parse.parse_memory(info)
    assert reading.total_bytes == 80 * GIB
    assert reading.reserved_bytes == 512 * 1024 * 1024
    assert reading.used_bytes == 20 * GIB - 512 * 1024 * 1024
    assert reading.free_bytes == 60 * GIB


def test_parse_memory_v2_zero_reserved_is_zero_not_none() -> None:
    info = pynvml.c_nvmlMemory_v2_t()
    info.total = GIB
    info.free = GIB
    assert parse.parse_memory(info).reserved_bytes == 0


# --- processes -------------------------------------------------------------------------


def _proc(pid: int, used: int | None, gi: int = NO_INSTANCE, ci: int = NO_INSTANCE) -> object:
    struct = pynvml.c_nvmlProcessInfo_v3_t(
        pid=pid, usedGpuMemory=0 if used is None else used, gpuInstanceId=gi, computeInstanceId=ci
    )
    entry = pynvml.nvmlStructToFriendlyObject(struct)
    if used is None:
        # What pynvml does for NVML_VALUE_NOT_AVAILABLE (e.g. under WDDM or without rights).
        entry.usedGpuMemory = None
    return entry


def test_merge_processes_empty() -> None:
    assert parse.merge_processes([], []) == ()


def test_merge_processes_compute_and_graphics_same_pid_sums_memory() -> None:
    merged = parse.merge_processes([_proc(10, 100 * 1024)], [_proc(10, 50 * 1024)])
    assert merged == (RawProcess(10, "compute+graphics", 150 * 1024, None, None),)


def test_merge_processes_kinds_and_pid_order() -> None:
    merged = parse.merge_processes(
        [_proc(300, 3), _proc(5, 1)],
        [_proc(42, 2)],
    )
    assert [p.pid for p in merged] == [5, 42, 300]
    assert [p.kind for p in merged] == ["compute", "graphics", "compute"]
    assert [p.memory_used_bytes for p in merged] == [1, 2, 3]


def test_merge_processes_none_memory() -> None:
    merged = parse.merge_processes(
        [_proc(1, None), _proc(2, None), _proc(3, 7)],
        [_proc(1, 50), _proc(2, None), _proc(3, None), _proc(4, None)],
    )
    by_pid = {p.pid: p for p in merged}
    assert by_pid[1].memory_used_bytes == 50  # None + 50
    assert by_pid[2].memory_used_bytes is None  # None + None
    assert by_pid[3].memory_used_bytes == 7  # 7 + None
    assert by_pid[4].memory_used_bytes is None
    assert by_pid[4].kind == "graphics"


def test_merge_processes_instance_ids() -> None:
    merged = parse.merge_processes(
        [_proc(1, 10), _proc(2, 10, gi=1, ci=0), _proc(3, 10, gi=0, ci=NO_INSTANCE)], []
    )
    ids = {p.pid: (p.gpu_instance_id, p.compute_instance_id) for p in merged}
    assert ids == {1: (None, None), 2: (1, 0), 3: (0, None)}


def test_merge_processes_objects_without_instance_fields() -> None:
    # Older (v1) process info has no gpuInstanceId / computeInstanceId.
    entry = SimpleNamespace(pid=9, usedGpuMemory=4096)
    assert parse.merge_processes([entry], []) == (RawProcess(9, "compute", 4096, None, None),)


def test_merge_processes_same_pid_twice_in_one_list_keeps_its_kind() -> None:
    # A process on two MIG compute instances appears twice in the compute list.
    merged = parse.merge_processes([_proc(7, 10, gi=1, ci=0), _proc(7, 20, gi=2, ci=0)], [])
    assert len(merged) == 1
    assert merged[0].memory_used_bytes == 30
    assert merged[0].kind == "compute", (
        "BUG parse.py merge_processes (line ~130): a pid seen twice in the *compute* list "
        f"is labelled {merged[0].kind!r}; it has no graphics context"
    )


# --- per-process utilization -----------------------------------------------------------


def _sample(pid: int, stamp: int, sm: int) -> pynvml.c_nvmlProcessUtilizationSample_t:
    return pynvml.c_nvmlProcessUtilizationSample_t(
        pid=pid, timeStamp=stamp, smUtil=sm, memUtil=0, encUtil=0, decUtil=0
    )


def test_process_utilization_no_samples_keeps_timestamp() -> None:
    assert parse.latest_process_utilization([], 1000) == ({}, 1000)


def test_process_utilization_ignores_samples_not_newer_than_last_seen() -> None:
    samples = [_sample(1, 900, 80), _sample(2, 1000, 70), _sample(3, 1001, 60)]
    ratios, last = parse.latest_process_utilization(samples, 1000)
    assert ratios == {3: pytest.approx(0.6)}
    assert last == 1001


def test_process_utilization_newest_per_pid_wins() -> None:
    samples = [
        _sample(1, 2000, 10),
        _sample(1, 3000, 90),
        _sample(1, 2500, 50),
        _sample(2, 2100, 5),
    ]
    ratios, last = parse.latest_process_utilization(samples, 0)
    assert ratios == {1: pytest.approx(0.9), 2: pytest.approx(0.05)}
    assert last == 3000


def test_process_utilization_timestamp_only_moves_forward() -> None:
    samples = [_sample(1, 10, 50), _sample(2, 20, 50)]
    ratios, last = parse.latest_process_utilization(samples, 5000)
    assert ratios == {}
    assert last == 5000


def test_process_utilization_clamps_and_works_with_a_ctypes_array() -> None:
    array = (pynvml.c_nvmlProcessUtilizationSample_t * 2)()
    array[0].pid, array[0].timeStamp, array[0].smUtil = 4, 1_700_000_000_000_000, 250
    array[1].pid, array[1].timeStamp, array[1].smUtil = 5, 1_700_000_000_000_001, 0
    ratios, last = parse.latest_process_utilization(array, 1_699_999_999_999_999)
    assert ratios == {4: 1.0, 5: 0.0}
    assert last == 1_700_000_000_000_001


def test_process_utilization_successive_calls() -> None:
    first, last = parse.latest_process_utilization([_sample(1, 100, 30)], 0)
    second, last2 = parse.latest_process_utilization(
        [_sample(1, 100, 30), _sample(1, 200, 40)], last
    )
    assert first == {1: pytest.approx(0.3)}
    assert second == {1: pytest.approx(0.4)}
    assert (last, last2) == (100, 200)


def test_held_process_utilization_keeps_a_sample_for_the_hold_then_drops_it() -> None:
    held = parse.held_process_utilization({}, {7: 0.97}, now=100.0)
    assert held == {7: (0.97, 100.0)}
    held = parse.held_process_utilization(held, {}, now=100.15)  # NotFound: nothing newer
    assert held == {7: (0.97, 100.0)}
    held = parse.held_process_utilization(
        held, {}, now=100.0 + parse.PROCESS_UTILIZATION_HOLD_SECONDS
    )
    assert held == {7: (0.97, 100.0)}
    assert parse.held_process_utilization(held, {}, now=110.01) == {}


def test_held_process_utilization_fresh_samples_replace_held_ones() -> None:
    held = {1: (0.5, 90.0), 2: (0.2, 95.0), 3: (0.9, 80.0)}
    merged = parse.held_process_utilization(held, {1: 0.6, 4: 0.0}, now=100.0, hold_seconds=8.0)
    assert merged == {1: (0.6, 100.0), 2: (0.2, 95.0), 4: (0.0, 100.0)}


# --- field values and GPM --------------------------------------------------------------


def test_field_values_read_each_entry_by_its_type_and_return_code() -> None:
    values = (pynvml.c_nvmlFieldValue_t * 4)()
    values[0].nvmlReturn = pynvml.NVML_SUCCESS
    values[0].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    values[0].value.ullVal = 2**40 + 3
    values[1].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
    values[1].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    values[1].value.ullVal = 12345
    values[2].nvmlReturn = pynvml.NVML_SUCCESS
    values[2].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
    values[2].value.uiVal = 7
    values[3].nvmlReturn = pynvml.NVML_SUCCESS
    values[3].valueType = pynvml.NVML_VALUE_TYPE_DOUBLE
    values[3].value.dVal = 1.5
    assert parse.field_values(values) == [
        (pynvml.NVML_SUCCESS, 2**40 + 3),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, None),
        (pynvml.NVML_SUCCESS, 7),
        (pynvml.NVML_SUCCESS, 1.5),
    ]


def test_field_values_unknown_type_and_custom_success_code() -> None:
    values = (pynvml.c_nvmlFieldValue_t * 2)()
    values[0].nvmlReturn = 7
    values[0].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    values[0].value.ullVal = 1
    values[1].nvmlReturn = 7
    values[1].valueType = 99
    assert parse.field_values(values, success_code=7) == [(7, 1), (7, None)]
    assert parse.field_values([]) == []
    assert parse.kibibytes_to_bytes(2**40) == float(2**50)


def test_gpm_values() -> None:
    get = pynvml.c_nvmlGpmMetricsGet_t()
    get.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    get.numMetrics = 3
    sm_occupancy = pynvml.NVML_GPM_METRIC_SM_OCCUPANCY
    sm_util = pynvml.NVML_GPM_METRIC_SM_UTIL
    pcie_tx = pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC
    get.metrics[0].metricId = sm_util
    get.metrics[0].nvmlReturn = pynvml.NVML_SUCCESS
    get.metrics[0].value = 87.5
    get.metrics[1].metricId = sm_occupancy
    get.metrics[1].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
    get.metrics[1].value = 11.0
    get.metrics[2].metricId = pcie_tx
    get.metrics[2].nvmlReturn = pynvml.NVML_SUCCESS
    get.metrics[2].value = 0.0
    # Beyond numMetrics: must be ignored even though it looks successful.
    get.metrics[3].metricId = 99
    get.metrics[3].nvmlReturn = pynvml.NVML_SUCCESS
    get.metrics[3].value = 1.0
    values = parse.gpm_values(get.metrics, get.numMetrics)
    assert values == {sm_util: 87.5, pcie_tx: 0.0}
    assert all(type(v) is float for v in values.values())


def test_gpm_values_nan_is_passed_through() -> None:
    get = pynvml.c_nvmlGpmMetricsGet_t()
    get.metrics[0].metricId = 5
    get.metrics[0].value = math.nan
    values = parse.gpm_values(get.metrics, 1)
    assert math.isnan(values[5])
    assert parse.gpm_values(get.metrics, 0) == {}


# --- error classification --------------------------------------------------------------


@pytest.mark.parametrize(
    ("error_class", "kind"),
    [
        ("NVMLError_NotSupported", NvmlErrorKind.UNSUPPORTED),
        ("NVMLError_FunctionNotFound", NvmlErrorKind.UNSUPPORTED),
        ("NVMLError_NoPermission", NvmlErrorKind.UNSUPPORTED),
        ("NVMLError_ArgumentVersionMismatch", NvmlErrorKind.UNSUPPORTED),
        ("NVMLError_NotFound", NvmlErrorKind.NOT_FOUND),
        ("NVMLError_GpuIsLost", NvmlErrorKind.DEVICE_LOST),
        ("NVMLError_Unknown", NvmlErrorKind.DEVICE_LOST),
        ("NVMLError_ResetRequired", NvmlErrorKind.DEVICE_LOST),
        ("NVMLError_LibRmVersionMismatch", NvmlErrorKind.DRIVER),
        ("NVMLError_DriverNotLoaded", NvmlErrorKind.DRIVER),
        ("NVMLError_LibraryNotFound", NvmlErrorKind.DRIVER),
        ("NVMLError_Uninitialized", NvmlErrorKind.DRIVER),
        ("NVMLError_Timeout", NvmlErrorKind.TRANSIENT),
        ("NVMLError_InsufficientSize", NvmlErrorKind.TRANSIENT),
        ("NVMLError_InvalidArgument", NvmlErrorKind.TRANSIENT),
        ("NVMLError_IrqIssue", NvmlErrorKind.TRANSIENT),
    ],
)
def test_classify_real_pynvml_errors(error_class: str, kind: NvmlErrorKind) -> None:
    error = getattr(pynvml, error_class)()
    assert isinstance(error, pynvml.NVMLError)
    assert classify(error) is kind


def test_classify_error_built_from_a_return_code() -> None:
    error = pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
    assert type(error).__name__ == "NVMLError_GpuIsLost"
    assert classify(error) is NvmlErrorKind.DEVICE_LOST
    assert classify(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)) is NvmlErrorKind.UNSUPPORTED


def test_classify_non_nvml_errors_are_transient() -> None:
    assert classify(RuntimeError("boom")) is NvmlErrorKind.TRANSIENT
    assert classify(OSError()) is NvmlErrorKind.TRANSIENT


def test_classify_by_class_name_for_the_stand_in() -> None:
    # The simulator raises its own classes with NVML's names; they classify alike.
    stand_in = type("NVMLError_GpuIsLost", (Exception,), {})
    assert classify(stand_in()) is NvmlErrorKind.DEVICE_LOST


def test_describe_real_errors() -> None:
    assert describe(pynvml.NVMLError_GpuIsLost()) == "GpuIsLost (GPU is lost)"
    assert describe(pynvml.NVMLError_NotSupported()) == "NotSupported (Not Supported)"
    assert describe(pynvml.NVMLError_Timeout()) == "Timeout"  # text equals the name


def test_describe_error_whose_str_fails() -> None:
    class NVMLError_Broken(Exception):  # noqa: N801, N818 - NVML's naming
        def __str__(self) -> str:
            raise RuntimeError("NVML is gone")

    assert describe(NVMLError_Broken()) == "Broken"


def test_describe_plain_exceptions() -> None:
    assert describe(ValueError("bad value")) == "ValueError (bad value)"
    assert describe(ValueError()) == "ValueError"


def test_a_nan_from_gpm_is_no_reading() -> None:
    assert parse.percent_to_ratio(float("nan")) is None
    assert parse.percent_to_ratio(float("inf")) is None
