"""NVML calls per GPU per tick, pinned: a regression in batching shows here.

Figures are steady-state (after NotSupported answers are remembered); the history is
in docs/benchmarks.md (`python bench/nvml_calls.py`).
"""

from __future__ import annotations

from pathlib import Path

from gpuwatch.core.clock import ManualClock
from gpuwatch.nvml import NvmlSampler
from gpuwatch.simulate import SimulatedNvml, load_scenario
from tests.support.counting import CountingNvml, calls_per_tick

H100_TICK = {
    "nvmlDeviceGetMemoryInfo": 1,
    "nvmlDeviceGetUtilizationRates": 1,
    "nvmlDeviceGetPowerUsage": 1,
    "nvmlDeviceGetTemperatureV": 1,
    "nvmlDeviceGetEncoderUtilization": 1,  # DCGM_FI_DEV_ENC_UTIL
    "nvmlDeviceGetDecoderUtilization": 1,  # DCGM_FI_DEV_DEC_UTIL
    "nvmlDeviceGetClockInfo": 2,
    "nvmlDeviceGetCurrentClocksEventReasons": 1,
    "nvmlDeviceGetFieldValues": 1,  # energy, NVLink TX/RX and memory temperature together
    "nvmlGpmSampleGet": 1,
    "nvmlGpmMetricsGet": 1,
    "nvmlDeviceGetComputeRunningProcesses_v3": 1,
    "nvmlDeviceGetGraphicsRunningProcesses_v3": 1,
    "nvmlDeviceGetProcessUtilization": 1,
}
H100_SLOW = {
    "nvmlDeviceGetFieldValues": 1,  # ECC totals, remapped rows, PCIe replays together
    "nvmlDeviceGetMigMode": 1,
    "nvmlDeviceGetEnforcedPowerLimit": 1,
}


def test_a_plain_h100_costs_15_calls_a_tick_and_3_a_slow_pass() -> None:
    calls = calls_per_tick("dgx-h100")
    assert calls.gpus == 8
    assert dict(calls.tick) == {name: 8 * n for name, n in H100_TICK.items()}
    assert dict(calls.slow) == {name: 8 * n for name, n in H100_SLOW.items()}
    # 14 before energy joined the NVLink fields; 13 before the encoder and decoder
    assert calls.tick_total == 8 * 15
    assert calls.slow_total == 8 * 3  # 5 before ECC and remapped rows were batched


def test_an_h100_with_7_mig_instances_costs_32_calls_a_tick_and_17_a_slow_pass() -> None:
    calls = calls_per_tick("dgx-h100-mig")
    assert calls.gpus == 8
    # per instance: its memory, a GPM sample of its GPU instance and the comparison
    assert calls.tick["nvmlDeviceGetMemoryInfo"] == 8 * (1 + 7)
    assert calls.tick["nvmlGpmMigSampleGet"] == 8 * 7
    assert calls.tick["nvmlGpmMetricsGet"] == 8 * (1 + 7)
    assert "nvmlDeviceGetUtilizationRates" not in calls.tick  # NotSupported with MIG on
    assert calls.tick_total == 8 * 32  # 33 before
    # the layout: a handle and a UUID per slot; instance ids and slot count only once
    assert calls.slow["nvmlDeviceGetMigDeviceHandleByIndex"] == 8 * 7
    assert calls.slow["nvmlDeviceGetUUID"] == 8 * 7
    assert "nvmlDeviceGetGpuInstanceId" not in calls.slow
    assert "nvmlDeviceGetMaxMigDeviceCount" not in calls.slow
    assert calls.slow_total == 8 * 17  # 34 before


SCENARIO = """
name = "{name}"
description = "one A100 with ECC history"

[[gpus]]
preset = "a100-sxm4-80gb"
ecc_errors = {{ corrected = 40, uncorrected = 5 }}

[[gpus.processes]]
pid = 1
name = "train"
memory = "1 GiB"

[faults]
function_not_found = {missing}

[[faults.xid]]
gpu = 0
at = 30
xid = 48
"""


def _sampled(tmp_path: Path, missing: list[str]) -> tuple[CountingNvml, NvmlSampler, ManualClock]:
    path = tmp_path / "ecc.toml"
    path.write_text(SCENARIO.format(name="ecc", missing=repr(missing)), encoding="utf-8")
    clock = ManualClock()
    counting = CountingNvml(SimulatedNvml(load_scenario(str(path)), clock=clock))
    sampler = NvmlSampler(counting, clock, watch_xid=False)
    sampler.open()
    return counting, sampler, clock


def test_batched_ecc_and_remapped_rows_are_the_volatile_counts(tmp_path: Path) -> None:
    counting, sampler, clock = _sampled(tmp_path, [])
    try:
        clock.advance(31.0)
        sampler.sample_slow()
        gpu = sampler.sample()[0]
    finally:
        sampler.close()
    assert gpu.ecc_uncorrected_errors_total == 1  # since the driver loaded, not aggregate 6
    assert gpu.ecc_corrected_errors_total == 0  # not aggregate 40
    assert gpu.remapped_rows_uncorrectable == 1
    assert gpu.remapped_rows_correctable == 0
    assert gpu.remapped_rows_pending is True
    assert gpu.remapped_rows_failure is False
    assert gpu.energy_joules_total is not None
    assert gpu.energy_joules_total > 0
    assert counting.calls["nvmlDeviceGetTotalEccErrors"] == 0
    assert counting.calls["nvmlDeviceGetTotalEnergyConsumption"] == 0


def test_without_field_values_each_reading_has_its_own_call(tmp_path: Path) -> None:
    counting, sampler, clock = _sampled(tmp_path, ["nvmlDeviceGetFieldValues"])
    try:
        clock.advance(31.0)
        sampler.sample_slow()
        gpu = sampler.sample()[0]
        clock.advance(1.0)
        later = sampler.sample()[0]
    finally:
        sampler.close()
    assert gpu.ecc_uncorrected_errors_total == 1
    assert gpu.remapped_rows_pending is True
    assert gpu.energy_joules_total is not None
    assert later.energy_joules_total is not None
    assert later.energy_joules_total > gpu.energy_joules_total
    assert gpu.nvlink_tx_bytes_total is None  # NVLink is only in the field values
    assert counting.calls["nvmlDeviceGetFieldValues"] == 1  # asked once, remembered
    assert counting.calls["nvmlDeviceGetTotalEnergyConsumption"] == 2
    assert counting.calls["nvmlDeviceGetTotalEccErrors"] == 2 * 2  # open's slow pass and ours
