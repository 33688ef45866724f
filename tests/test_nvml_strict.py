"""The NVML adapter against the strict stand-in: what a wrong adapter would get wrong.

Each test here kills one of the named mutants of `make mutation` (bench/mutation.py);
the mutant's name is in the test's docstring.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuwatch.collectors.nvml import NvmlCollector
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import GpuSample
from gpuwatch.nvml import NvmlSampler
from gpuwatch.simulate import SimulatedNvml, load_scenario
from tests.support.counting import CountingNvml

START = 1_767_225_600.0  # ManualClock's default start (epoch s)
MIB = 1024**2


def opened(scenario: str | Path) -> tuple[NvmlSampler, SimulatedNvml, ManualClock]:
    clock = ManualClock()
    nv = SimulatedNvml(
        load_scenario(scenario), clock=clock, sleep=lambda s: time.sleep(min(s, 0.01))
    )
    sampler = NvmlSampler(nv, clock)
    sampler.open()
    return sampler, nv, clock


def tick_to(sampler: NvmlSampler, clock: ManualClock, seconds: float) -> tuple[GpuSample, ...]:
    """One tick per simulated second up to `seconds` into the scenario; the last one."""
    gpus: tuple[GpuSample, ...] = ()
    while clock.time() - START < seconds - 1e-9:
        clock.advance(min(1.0, seconds - (clock.time() - START)))
        gpus = sampler.sample()
    return gpus


@pytest.fixture
def write_scenario(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = tmp_path / "strict.toml"
        path.write_text(text)
        return path

    return write


@pytest.mark.parametrize("scenario", ["demo", "dgx-h100", "faults"])
def test_the_adapter_never_makes_a_call_nvml_refuses(scenario: str) -> None:
    """Kills `gpm_sample_swap`, `gpm_same_buffer`, `gpm_interval_guard_removed`."""
    sampler, nv, clock = opened(scenario)
    try:
        gpus = tick_to(sampler, clock, 5)
        sampler.sample_slow()
        sampler.sample()  # a second tick at the same instant (`status` right after a tick)
        clock.advance(0.05)
        sampler.sample()  # and one 50 ms later
        later = tick_to(sampler, clock, 8)
    finally:
        sampler.close()
    assert nv.refusals == []
    for gpu in (*gpus, *later):
        if gpu.up and gpu.identity.gpm_supported and not gpu.mig_enabled:
            assert gpu.sm_active_ratio is not None, gpu.identity.name


def process_sm(gpu: GpuSample) -> float | None:
    assert gpu.processes is not None
    (proc,) = gpu.processes
    return proc.sm_utilization_ratio


def test_process_utilization_follows_the_last_seen_timestamp() -> None:
    """Kills `last_seen_never_advances`: asking with 0 gives the buffer's stale average."""
    sampler, _, clock = opened("demo")
    try:
        busy = tick_to(sampler, clock, 1079)[0]  # training until the 1080 s pause
        paused = tick_to(sampler, clock, 1100)[0]  # 20 s into the pause: past the 10 s hold
    finally:
        sampler.close()
    value = process_sm(busy)
    assert value is not None
    assert value > 0.8
    assert process_sm(paused) is None  # no sample for 20 s: unknown, not a stale average


MIG = """
name = "mig-h100"
[[gpus]]
preset = "h100-sxm"
[[gpus.mig]]
profile = "3g.40gb"
[gpus.mig.activity]
levels = { util = 0.8, sm = 0.6 }
jitter = 0
[[gpus.mig]]
profile = "1g.10gb"
[gpus.mig.activity]
levels = { util = 0.2, sm = 0.1 }
jitter = 0
"""


def test_mig_instances_have_their_own_memory_and_activity(
    write_scenario: Callable[[str], Path],
) -> None:
    """Kills `mig_memory_from_parent` and `mig_gpm_from_whole_gpu`."""
    sampler, nv, clock = opened(write_scenario(MIG))
    try:
        gpu = tick_to(sampler, clock, 5)[0]
    finally:
        sampler.close()
    assert nv.refusals == []
    big, small = gpu.mig_instances
    assert big.memory_total_bytes == 40 * 1000 * MIB - 256 * MIB
    assert small.memory_total_bytes == 10 * 1000 * MIB - 256 * MIB
    assert gpu.identity.memory_total_bytes == 81559 * MIB  # the parent: the whole GPU
    assert big.sm_active_ratio == pytest.approx(0.6, abs=0.01)
    assert small.sm_active_ratio == pytest.approx(0.1, abs=0.01)


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
[[gpus.processes]]
pid = 101
name = "Xorg"
kind = "graphics"
memory = "64 MiB"
share = 0
[[gpus.mig]]
profile = "7g.80gb"
memory = "79 GiB"
[gpus.mig.activity]
levels = { util = 0.5, sm = 0.4 }
[[gpus.mig_changes]]
at = 10
enabled = true
applied = 20
[[gpus.mig_changes]]
at = 40
enabled = false
applied = 50
"""


def test_what_mig_made_unsupported_is_asked_again_when_the_mode_changes(
    write_scenario: Callable[[str], Path],
) -> None:
    """Kills `mig_mode_pending_read` and `mig_change_keeps_unsupported`."""
    sampler, nv, clock = opened(write_scenario(MIG_CHANGE))
    try:
        before = tick_to(sampler, clock, 15)[0]
        sampler.sample_slow()  # MIG set, pending: nothing changes yet
        pending = tick_to(sampler, clock, 16)[0]
        tick_to(sampler, clock, 25)
        sampler.sample_slow()
        mig = tick_to(sampler, clock, 30)[0]
        tick_to(sampler, clock, 55)
        sampler.sample_slow()
        after = tick_to(sampler, clock, 60)[0]
    finally:
        sampler.close()
    assert before.mig_enabled is False
    assert pending.mig_enabled is False
    assert pending.utilization_ratio is not None
    assert mig.mig_enabled is True
    assert mig.utilization_ratio is None  # NotSupported with MIG on
    assert len(mig.mig_instances) == 1
    assert after.mig_enabled is False
    assert after.mig_instances == ()
    assert after.utilization_ratio == pytest.approx(0.9, abs=0.03)  # asked again
    assert after.processes is not None
    by_pid = {p.pid: p for p in after.processes}
    assert by_pid[100].kind == "compute"
    assert by_pid[100].sm_utilization_ratio is not None
    assert by_pid[101].kind == "graphics"
    assert not [r for r in nv.refusals if r.function != "nvmlGpmMetricsGet"]


ECC = """
name = "ecc"
[[gpus]]
preset = "h100-sxm"
ecc_errors = { corrected = 3, uncorrected = 5 }
[[faults.xid]]
gpu = 0
at = 2
xid = 48
"""


def test_ecc_is_volatile_and_remapped_rows_keep_their_order(
    write_scenario: Callable[[str], Path],
) -> None:
    """Kills `ecc_aggregate_read` and `remapped_pending_failure_swapped`."""
    sampler, _, clock = opened(write_scenario(ECC))
    try:
        tick_to(sampler, clock, 5)
        sampler.sample_slow()
        gpu = tick_to(sampler, clock, 6)[0]
    finally:
        sampler.close()
    assert gpu.ecc_uncorrected_errors_total == 1  # since the driver loaded, not lifetime 5 + 1
    assert gpu.ecc_corrected_errors_total == 0
    assert gpu.remapped_rows_uncorrectable == 1
    assert gpu.remapped_rows_pending is True
    assert gpu.remapped_rows_failure is False


WAIT_FAILS = """
name = "wait-fails"
[[gpus]]
preset = "h100-sxm"
[[faults.errors]]
error = "{error}"
functions = ["nvmlEventSetWait"]
start = 3
"""


@pytest.mark.parametrize("error", ["unknown", "lib_rm_version_mismatch"])
def test_the_xid_collector_is_unhealthy_once_the_event_wait_fails(
    write_scenario: Callable[[str], Path], error: str
) -> None:
    """Kills `xid_never_unhealthy` (and any change that hides the stopped watcher)."""
    sampler, _, clock = opened(write_scenario(WAIT_FAILS.replace("{error}", error)))
    collector = NvmlCollector(sampler, clock)
    try:
        _, results = collector.collect()
        healthy_at_start = {r.name: r.success for r in results}
        tick_to(sampler, clock, 5)
        deadline = time.monotonic() + 5
        while sampler.xid_healthy and time.monotonic() < deadline:
            time.sleep(0.02)  # the event thread waits in real time
        gpus, results = collector.collect()
    finally:
        sampler.close()
    assert healthy_at_start["xid"] is True
    by_name = {r.name: r.success for r in results}
    assert by_name["xid"] is False
    assert by_name["nvml"] is True  # the rest of the monitoring goes on
    assert gpus[0].up


SLOW_FAILS = """
name = "slow-fails"
[[gpus]]
preset = "h100-sxm"
[[faults.gpu_lost]]
gpu = 0
at = 8
until = 12
error = "unknown"
"""


def test_a_failed_slow_pass_exports_no_stale_values(
    write_scenario: Callable[[str], Path],
) -> None:
    """Kills `slow_failure_keeps_stale_values`."""
    sampler, _, clock = opened(write_scenario(SLOW_FAILS))
    try:
        tick_to(sampler, clock, 5)
        sampler.sample_slow()
        read = tick_to(sampler, clock, 6)[0]
        tick_to(sampler, clock, 9)
        sampler.sample_slow()  # the GPU is down: the slow pass fails
        back = tick_to(sampler, clock, 14)[0]
    finally:
        sampler.close()
    assert read.ecc_uncorrected_errors_total == 0
    assert back.up
    assert back.ecc_uncorrected_errors_total is None  # unknown until the next slow pass
    assert back.remapped_rows_pending is None


MIG_MODE_FLAKY = """
name = "mig-mode-flaky"
[[gpus]]
preset = "h100-sxm"
[[faults.not_supported]]
functions = ["nvmlDeviceGetEnforcedPowerLimit"]
[[faults.errors]]
error = "timeout"
functions = ["nvmlDeviceGetMigMode"]
start = 3
end = 6
"""


def test_a_failed_mig_mode_read_is_not_a_mode_change(
    write_scenario: Callable[[str], Path],
) -> None:
    """Kills the generic mutant that reads an unknown MIG mode as a change."""
    clock = ManualClock()
    nv = CountingNvml(SimulatedNvml(load_scenario(write_scenario(MIG_MODE_FLAKY)), clock=clock))
    sampler = NvmlSampler(nv, clock)
    sampler.open()
    try:
        for second in range(1, 10):
            tick_to(sampler, clock, second)
            sampler.sample_slow()
    finally:
        sampler.close()
    # NotSupported, asked once: a MIG mode that could not be read is not a change
    assert nv.calls["nvmlDeviceGetEnforcedPowerLimit"] == 1


NO_GRAPHICS_LIST = """
name = "no-graphics-list"
[[gpus]]
preset = "l4"
[gpus.activity]
levels = { util = 0.5, sm = 0.4 }
[[gpus.processes]]
pid = 300
name = "serve"
memory = "4 GiB"
[[faults.not_supported]]
functions = ["nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2"]
"""


def test_compute_processes_are_listed_when_the_graphics_list_is_unsupported(
    write_scenario: Callable[[str], Path],
) -> None:
    """Kills the generic mutant that drops the processes when one list is missing."""
    sampler, _, clock = opened(write_scenario(NO_GRAPHICS_LIST))
    try:
        gpu = tick_to(sampler, clock, 3)[0]
    finally:
        sampler.close()
    assert gpu.processes is not None
    assert [p.pid for p in gpu.processes] == [300]
