"""The NVML layer against the pynvml stand-in: normal readings and every fault kind."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest

from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import GpuSample
from gpuwatch.nvml import NvmlSampler
from gpuwatch.nvml.errors import NvmlNotFoundError
from gpuwatch.nvml.parse import PROCESS_UTILIZATION_HOLD_SECONDS
from gpuwatch.simulate import SimulatedNvml, load_scenario
from tests.conftest import make_agent, simulated
from tests.support.counting import CountingNvml

GIB = 1024**3


def open_sampler(scenario: str) -> tuple[NvmlSampler, ManualClock, CountingNvml]:
    nv, clock = simulated(scenario)
    counting = CountingNvml(nv)
    sampler = NvmlSampler(counting, clock)
    sampler.open()
    return sampler, clock, counting


def first_gpu_after(scenario: Path, seconds: float) -> GpuSample:
    """GPU 0 of a scenario file, sampled once `seconds` into it."""
    sampler, clock, _ = open_sampler(str(scenario))
    try:
        clock.advance(seconds)
        return sampler.sample()[0]
    finally:
        sampler.close()


def run_to(sampler: NvmlSampler, clock: ManualClock, seconds: float) -> tuple[GpuSample, ...]:
    """Tick once per simulated second until `seconds` past the start; the last tick."""
    gpus: tuple[GpuSample, ...] = ()
    while clock.time() - 1_767_225_600.0 < seconds:
        clock.advance(1.0)
        try:
            gpus = sampler.sample()
        except Exception:  # noqa: BLE001 - driver failures are asserted by the caller
            gpus = sampler.down_samples()
    return gpus


# -- the demo fleet -------------------------------------------------------------------


def test_demo_readings_are_in_base_units() -> None:
    sampler, clock, _ = open_sampler("demo")
    try:
        gpus = run_to(sampler, clock, 30)
    finally:
        sampler.close()
    assert [g.identity.index for g in gpus] == [0, 1, 2, 3]
    for gpu in gpus:
        assert gpu.up
        assert gpu.identity.name == "NVIDIA H100 80GB HBM3"
        assert gpu.identity.gpm_supported
        assert gpu.identity.memory_total_bytes == 81559 * 1024**2
        assert gpu.memory_reserved_bytes is not None  # v2 memory call
        assert gpu.sm_active_ratio is not None
        assert 0.0 <= gpu.sm_active_ratio <= 1.0
        assert gpu.clock_sm_hertz is not None
        assert gpu.clock_sm_hertz > 1e8  # hertz, not MHz
        assert gpu.power_watts is not None
        assert 30 < gpu.power_watts < 720
    train, idle, held, serve = gpus
    assert train.sm_active_ratio is not None
    assert train.sm_active_ratio > 0.8
    assert idle.processes == ()
    assert idle.throttle_reasons == ("gpu_idle",)
    assert held.processes is not None
    assert len(held.processes) == 1
    assert held.processes[0].memory_used_bytes == 30 * GIB
    # NVML records no sample for a process that never runs a kernel: unknown, not 0
    assert held.processes[0].sm_utilization_ratio is None
    assert "ipykernel" in held.processes[0].name
    assert serve.processes is not None
    assert serve.processes[0].sm_utilization_ratio is not None
    assert serve.processes[0].sm_utilization_ratio > 0.0


def test_training_pause_shows_as_zero_activity_with_memory_held() -> None:
    sampler, clock, _ = open_sampler("demo")
    try:
        busy = run_to(sampler, clock, 1000)[0]
        paused = run_to(sampler, clock, 1100)[0]
        resumed = run_to(sampler, clock, 1250)[0]
    finally:
        sampler.close()
    assert busy.sm_active_ratio is not None
    assert busy.sm_active_ratio > 0.8
    assert paused.sm_active_ratio == 0.0
    assert paused.memory_used_bytes == busy.memory_used_bytes
    assert resumed.sm_active_ratio is not None
    assert resumed.sm_active_ratio > 0.8


def test_energy_counter_is_monotonic_joules() -> None:
    sampler, clock, _ = open_sampler("demo")
    try:
        first = run_to(sampler, clock, 10)[0].energy_joules_total
        second = run_to(sampler, clock, 20)[0].energy_joules_total
    finally:
        sampler.close()
    assert first is not None
    assert second is not None
    assert 600 * 10 * 0.9 < second - first < 720 * 10  # ~660 W for 10 s


def test_pcie_comes_from_gpm_and_the_blocking_call_is_never_made_per_tick() -> None:
    sampler, clock, counting = open_sampler("demo")
    try:
        gpus = run_to(sampler, clock, 5)
    finally:
        sampler.close()
    assert gpus[0].pcie_rx_bytes_per_second is not None
    assert gpus[0].pcie_rx_bytes_per_second > 1e9  # 1800 MiB/s
    assert counting.calls["nvmlDeviceGetPcieThroughput"] == 0


def process_sm(gpu: GpuSample) -> float | None:
    """The SM utilization ratio of the GPU's only process."""
    assert gpu.processes is not None
    (proc,) = gpu.processes
    return proc.sm_utilization_ratio


def test_a_process_keeps_its_last_sm_sample_for_the_hold_then_reads_absent() -> None:
    sampler, clock, _ = open_sampler("demo")
    start = clock.time()
    try:
        fresh = run_to(sampler, clock, 1079)[0]  # training, just before the 1080 s pause
        clock.advance(0.15)  # `gpuwatch status` samples twice, 150 ms apart
        again = sampler.sample()[0]
        clock.set(start + 1080)  # reads the last second before the pause: nothing newer after
        sampler.sample()
        clock.set(start + 1080 + PROCESS_UTILIZATION_HOLD_SECONDS - 1)  # paused: no samples
        held = sampler.sample()[0]
        clock.set(start + 1080 + PROCESS_UTILIZATION_HOLD_SECONDS + 1)
        expired = sampler.sample()[0]
        resumed = run_to(sampler, clock, 1250)[0]
    finally:
        sampler.close()
    value = process_sm(fresh)
    assert value is not None
    assert value > 0.8
    assert again.utilization_ratio is not None
    assert again.utilization_ratio > 0.9  # the GPU is busy ...
    assert process_sm(again) == value  # ... and NVML's "no newer sample" is not 0 %
    assert process_sm(held) == value
    assert held.utilization_ratio == 0.0  # paused: the value shown is up to 10 s old
    assert process_sm(expired) is None  # past the hold: unknown, never a made-up 0.0
    resumed_value = process_sm(resumed)
    assert resumed_value is not None
    assert resumed_value > 0.8


# -- the faults fleet -----------------------------------------------------------------


def test_unsupported_values_are_absent_and_asked_once() -> None:
    sampler, clock, counting = open_sampler("faults")
    try:
        gpus = run_to(sampler, clock, 20)
        sampler.sample_slow()
        sampler.sample_slow()
    finally:
        sampler.close()
    geforce = gpus[2]
    assert geforce.identity.name == "NVIDIA GeForce RTX 4090"
    assert geforce.identity.serial is None
    assert geforce.ecc_uncorrected_errors_total is None
    assert geforce.remapped_rows_pending is None
    assert geforce.sm_active_ratio is None  # no GPM before Hopper
    assert geforce.utilization_ratio is not None
    l4 = gpus[1]
    assert l4.energy_joules_total is None
    assert l4.power_watts is not None
    # NotSupported is remembered: asked once per device, not once per tick. Energy rides
    # in the field-values call; after its first tick the L4 (energy NotSupported, no
    # NVLink, no HBM temperature) makes none: 4 GPUs at open's slow pass and on tick 1,
    # then 3 per tick; every slow pass asks all 4 (the RTX 4090 has neither ECC nor
    # remapped rows, but a PCIe replay counter).
    assert counting.calls["nvmlDeviceGetTotalEnergyConsumption"] == 0
    assert counting.calls["nvmlDeviceGetRemappedRows"] == 0
    assert counting.calls["nvmlDeviceGetPcieReplayCounter"] == 0  # it rides in the fields
    assert counting.calls["nvmlDeviceGetFieldValues"] == 4 + 4 + 19 * 3 + 2 * 4
    assert geforce.memory_temperature_celsius is None  # GDDR6X: no memory sensor
    assert geforce.pcie_replay_errors_total == 0


def test_no_permission_on_process_names_leaves_names_empty() -> None:
    sampler, clock, _ = open_sampler("faults")
    try:
        gpus = run_to(sampler, clock, 5)
    finally:
        sampler.close()
    assert gpus[1].processes is not None
    assert [p.name for p in gpus[1].processes] == [""]
    assert gpus[1].processes[0].pid == 8101


def test_mig_instances_are_read_with_their_memory() -> None:
    sampler, clock, _ = open_sampler("faults")
    try:
        a100 = run_to(sampler, clock, 5)[0]
    finally:
        sampler.close()
    assert a100.mig_enabled is True
    assert [m.gpu_instance_id for m in a100.mig_instances] == [2, 3, 9]
    assert all(m.uuid.startswith("MIG-") for m in a100.mig_instances)
    assert all(m.memory_total_bytes for m in a100.mig_instances)
    assert a100.utilization_ratio is None  # not on MIG-enabled GPUs


def test_a_lost_gpu_is_down_while_the_others_keep_reporting() -> None:
    sampler, clock, _ = open_sampler("faults")
    try:
        before = run_to(sampler, clock, 100)
        after = run_to(sampler, clock, 125)
    finally:
        sampler.close()
    assert [g.up for g in before] == [True, True, True, True]
    assert [g.up for g in after] == [True, True, True, False]
    assert after[3].error is not None
    assert "GpuIsLost" in after[3].error
    assert after[3].identity.uuid == before[3].identity.uuid


def test_unknown_errors_take_a_gpu_down_only_while_they_last() -> None:
    sampler, clock, _ = open_sampler("faults")
    try:
        during = run_to(sampler, clock, 205)
        after = run_to(sampler, clock, 215)
    finally:
        sampler.close()
    assert during[1].up is False
    assert during[0].up is True
    assert after[1].up is True


def wait_for_xids(
    sampler: NvmlSampler, clock: ManualClock, seconds: float
) -> tuple[GpuSample, ...]:
    """Tick to `seconds` into `faults`, then until XIDs 48 (GPU 0) and 79 (GPU 3) are in."""
    run_to(sampler, clock, seconds)
    deadline = time.monotonic() + 5
    gpus = sampler.sample()
    while (not gpus[0].xid_errors_total or not gpus[3].xid_errors_total) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)  # the event thread waits in real time
        gpus = sampler.sample()
    return gpus


def test_xid_events_are_counted_per_gpu_even_for_a_lost_gpu() -> None:
    sampler, clock, _ = open_sampler("faults")
    try:
        gpus = wait_for_xids(sampler, clock, 125)
    finally:
        sampler.close()
    assert gpus[0].xid_errors_total == ((48, 1),)
    assert gpus[3].xid_errors_total == ((79, 1),)


def test_xid_counts_survive_a_driver_error_and_a_gpu_lost_at_reinit() -> None:
    sampler, clock, _ = open_sampler("faults")
    try:
        wait_for_xids(sampler, clock, 125)
        during = run_to(sampler, clock, 310)  # NVML down: every GPU from down_samples()
        after = run_to(sampler, clock, 400)  # re-initialised; GPU 3 is lost at open
    finally:
        sampler.close()
    for gpus in (during, after):
        assert gpus[0].xid_errors_total == ((48, 1),)
        assert gpus[3].up is False
        assert gpus[3].xid_errors_total == ((79, 1),)
        assert gpus[3].last_xid == 79


def test_driver_error_marks_all_down_then_reinitialises_with_backoff() -> None:
    sampler, clock, counting = open_sampler("faults")
    try:
        run_to(sampler, clock, 299)
        assert sampler.initialized
        during = run_to(sampler, clock, 320)
        assert not sampler.initialized
        assert [g.up for g in during] == [False, False, False, False]
        inits_during = counting.calls["nvmlInit"]
        # backoff 1, 2, 4, 8, ... s: far fewer than one attempt per tick
        assert 2 <= inits_during <= 1 + 6
        after = run_to(sampler, clock, 400)
    finally:
        sampler.close()
    assert sampler.last_error is None
    assert [g.up for g in after] == [True, True, True, False]  # GPU 3 is still lost


def test_lost_gpu_at_start_is_reported_down_not_fatal() -> None:
    nv, clock = simulated("faults")
    nv = SimulatedNvml(load_scenario("faults"), clock=clock, start_time=clock.time() - 130)
    sampler = NvmlSampler(nv, clock)
    sampler.open()
    try:
        clock.advance(1)
        gpus = sampler.sample()
    finally:
        sampler.close()
    assert [g.up for g in gpus] == [True, True, True, False]


def test_memory_v2_missing_falls_back_to_v1(tmp_path: Path) -> None:
    scenario = tmp_path / "old-driver.toml"
    scenario.write_text(
        'name = "old-driver"\n'
        "[[gpus]]\n"
        'preset = "a100-sxm4-40gb"\n'
        "[faults]\n"
        'function_not_found = ["nvmlDeviceGetMemoryInfo_v2"]\n'
    )
    gpu = first_gpu_after(scenario, 1)
    assert gpu.up
    assert gpu.memory_reserved_bytes is None  # v1 has no reserved field
    assert gpu.memory_used_bytes is not None
    assert gpu.memory_used_bytes > 0  # v1 `used` includes the reserved memory


def test_no_driver_raises_nvml_not_found() -> None:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this host has an NVIDIA driver")
    with pytest.raises(NvmlNotFoundError, match="LibraryNotFound"):
        NvmlSampler(pynvml, ManualClock()).open()


# -- what the exporter makes of it -------------------------------------------------------


def test_exporter_leaves_out_what_a_gpu_cannot_give() -> None:
    agent, clock = make_agent("faults")
    try:
        for _ in range(130):
            clock.advance(1.0)
            agent.tick()
        text = generate_latest(agent.registry).decode()
    finally:
        agent.stop()
    lines = text.splitlines()
    geforce = [line for line in lines if 'gpu="2"' in line]
    assert any(line.startswith("gpuwatch_gpu_utilization_ratio") for line in geforce)
    assert not any(line.startswith("gpuwatch_gpu_sm_active_ratio") for line in geforce)
    assert not any(line.startswith("gpuwatch_gpu_ecc_") for line in geforce)
    lost = [line for line in lines if 'gpu="3"' in line and not line.startswith("#")]
    families = {line.split("{")[0] for line in lost}
    # identity and up; the XID counter too once the event thread has delivered XID 79
    assert {"gpuwatch_gpu_info", "gpuwatch_gpu_up"} <= families
    assert families <= {"gpuwatch_gpu_info", "gpuwatch_gpu_up", "gpuwatch_gpu_xid_errors_total"}
    assert any(line.startswith("gpuwatch_gpu_up{") and line.endswith(" 0.0") for line in lost)


def test_a_lost_gpus_xid_count_reaches_metrics_through_a_driver_error() -> None:
    agent, clock = make_agent("faults")
    start = clock.time()

    def tick_to(seconds: float) -> str:
        while clock.time() - start < seconds:
            clock.advance(1.0)
            agent.tick()
        return generate_latest(agent.registry).decode()

    try:
        tick_to(125)
        deadline = time.monotonic() + 5
        while not agent.tick().gpus[3].xid_errors_total and time.monotonic() < deadline:
            time.sleep(0.05)  # the event thread waits in real time
        texts = [tick_to(125), tick_to(310), tick_to(400)]  # lost; NVML down; re-initialised
        uuid = agent.sampler.identities[3].uuid
    finally:
        agent.stop()
    for text in texts:
        assert f'gpuwatch_gpu_up{{gpu="3",uuid="{uuid}"}} 0.0' in text
        assert f'gpuwatch_gpu_xid_errors_total{{gpu="3",uuid="{uuid}",xid="79"}} 1.0' in text
        assert 'xid="48"} 1.0' in text  # GPU 0's, while NVML is down too


def test_collector_success_goes_to_zero_during_a_driver_error() -> None:
    agent, clock = make_agent("faults")
    try:
        for _ in range(310):
            clock.advance(1.0)
            snapshot = agent.tick()
    finally:
        agent.stop()
    results = {r.name: r.success for r in snapshot.collectors}
    assert results["nvml"] is False
    assert all(not g.up for g in snapshot.gpus)


def test_old_driver_falls_back_to_v2_processes_and_throttle_reasons(tmp_path: Path) -> None:
    scenario = tmp_path / "old-driver.toml"
    scenario.write_text(
        'name = "old-driver"\n'
        "[[gpus]]\n"
        'preset = "a100-sxm4-40gb"\n'
        "[[gpus.processes]]\n"
        "pid = 4242\n"
        'name = "python3 job.py"\n'
        'memory = "8 GiB"\n'
        "[faults]\n"
        'function_not_found = ["nvmlDeviceGetCurrentClocksEventReasons",'
        ' "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3"]\n'
    )
    gpu = first_gpu_after(scenario, 2)
    assert gpu.processes is not None
    assert [p.pid for p in gpu.processes] == [4242]
    assert gpu.throttle_reasons == ("gpu_idle",)


def test_nvlink_counters_sum_every_link() -> None:
    sampler, clock, _ = open_sampler("demo")
    try:
        first = run_to(sampler, clock, 10)[0].nvlink_tx_bytes_total
        second = run_to(sampler, clock, 110)[0].nvlink_tx_bytes_total
    finally:
        sampler.close()
    assert first is not None
    assert second is not None
    assert second - first == pytest.approx(100 * 1500 * 1024 * 1024, rel=0.05)  # 1500 MiB/s


def test_a_gpu_back_after_a_loss_at_start_is_watched_for_xids(tmp_path: Path) -> None:
    scenario = tmp_path / "comeback.toml"
    scenario.write_text(
        'name = "comeback"\n'
        "[[gpus]]\n"
        'preset = "h100-sxm"\n'
        "[[faults.gpu_lost]]\n"
        "gpu = 0\nat = 0\nuntil = 30\n"
        "[[faults.xid]]\n"
        "gpu = 0\nat = 60\nxid = 31\n"
    )
    sampler, clock, _ = open_sampler(str(scenario))
    try:
        clock.advance(1)
        assert [g.up for g in sampler.sample()] == [False]
        clock.advance(39)
        sampler.sample_slow()  # retries the lost GPU: it is back
        clock.advance(25)
        deadline = time.monotonic() + 5
        gpu = sampler.sample()[0]
        while not gpu.xid_errors_total and time.monotonic() < deadline:
            time.sleep(0.05)
            gpu = sampler.sample()[0]
    finally:
        sampler.close()
    assert gpu.up
    assert gpu.xid_errors_total == ((31, 1),)
    assert gpu.last_xid == 31
