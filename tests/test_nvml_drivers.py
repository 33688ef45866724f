"""Driver quirks the adapter survives: R535's process entries, a driver upgraded under
the agent, process names that are not UTF-8, and XID counting through a driver outage."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest

from gpuwatch.agent import Agent, AgentOptions
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.nvml import NvmlSampler
from gpuwatch.nvml.sampler import VERSION_MISMATCH_ATTEMPTS
from gpuwatch.simulate import SimulatedNvml, load_scenario
from tests.conftest import free_port, make_agent

GIB = 1024**3

THREE_PROCESSES = """
[[gpus]]
preset = "l4"
[[gpus.processes]]
pid = 1001
name = "python3 a.py"
memory = "1 GiB"
[[gpus.processes]]
pid = 1002
name = "python3 b.py"
memory = "2 GiB"
[[gpus.processes]]
pid = 1003
name = "python3 c.py"
memory = "3 GiB"
"""


def scenario_file(tmp_path: Path, text: str, name: str = "custom") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{text}')
    return path


def stand_in(path: Path, clock: ManualClock | None = None) -> tuple[SimulatedNvml, ManualClock]:
    clock = clock or ManualClock()
    return SimulatedNvml(load_scenario(path), clock=clock, sleep=lambda s: None), clock


def agent_on(path: Path, *, per_process_metrics: bool = True) -> tuple[Agent, ManualClock]:
    nv, clock = stand_in(path)
    config = Config(agent=AgentConfig(hostname="h", per_process_metrics=per_process_metrics))
    agent = Agent(config, nv, clock, AgentOptions(environ={}))
    agent.open()
    return agent, clock


def results(snapshot: FleetSnapshot) -> dict[str, bool]:
    return {r.name: r.success for r in snapshot.collectors}


# -- R535: 32-byte process entries -------------------------------------------------------


def r535(tmp_path: Path) -> Path:
    driver = '[driver]\nversion = "535.183.01"\nnvml_version = "12.535.183.01"\n'
    return scenario_file(tmp_path, driver + "process_struct_bytes = 32\n" + THREE_PROCESSES)


def test_the_binding_misreads_an_r535_drivers_process_entries(tmp_path: Path) -> None:
    nv, clock = stand_in(r535(tmp_path))
    nv.nvmlInit()
    clock.advance(1)
    procs = nv.nvmlDeviceGetComputeRunningProcesses_v3(nv.nvmlDeviceGetHandleByIndex(0))
    assert procs[0].pid == 1001  # the first entry is at the right offset
    assert [p.pid for p in procs] != [1001, 1002, 1003]  # the others are read 8 bytes off


def test_the_adapter_reads_r535_process_entries_right(tmp_path: Path) -> None:
    nv, clock = stand_in(r535(tmp_path))
    sampler = NvmlSampler(nv, clock, watch_xid=False)
    sampler.open()
    try:
        clock.advance(1)
        (gpu,) = sampler.sample()
    finally:
        sampler.close()
    assert gpu.processes is not None
    got = [(p.pid, p.memory_used_bytes, p.name) for p in gpu.processes]
    assert got == [
        (1001, 1 * GIB, "python3 a.py"),
        (1002, 2 * GIB, "python3 b.py"),
        (1003, 3 * GIB, "python3 c.py"),
    ]


def test_a_24_byte_driver_is_read_through_the_binding(tmp_path: Path) -> None:
    nv, clock = stand_in(scenario_file(tmp_path, THREE_PROCESSES))
    nv.nvmlInit()
    clock.advance(1)
    procs = nv.nvmlDeviceGetComputeRunningProcesses_v3(nv.nvmlDeviceGetHandleByIndex(0))
    assert [p.pid for p in procs] == [1001, 1002, 1003]
    assert [p.usedGpuMemory for p in procs] == [GIB, 2 * GIB, 3 * GIB]


# -- a driver upgraded under the agent: LibRmVersionMismatch ---------------------------


UPGRADE = '[[gpus]]\npreset = "l4"\n[[faults.driver_error]]\nstart = 5\n'


def test_a_version_mismatch_is_reported_then_given_up(tmp_path: Path) -> None:
    agent, clock = agent_on(scenario_file(tmp_path, UPGRADE, "upgrade"))
    snapshots = []
    try:
        for _ in range(120):
            clock.advance(1.0)
            snapshots.append(agent.tick())
    finally:
        agent.stop()
    assert results(snapshots[2])["nvml"] is True
    after = snapshots[-1]
    assert results(after)["nvml"] is False
    assert results(after)["xid"] is False  # no event set while NVML is down
    assert [g.up for g in after.gpus] == [False]
    assert agent.fatal_reason is not None
    assert "LibRmVersionMismatch" in agent.fatal_reason
    assert "restart" in agent.fatal_reason
    # the first failure and the retries, then no more attempts in this process
    assert agent.sampler._mismatches == VERSION_MISMATCH_ATTEMPTS


def test_run_exits_1_with_one_line_after_a_driver_upgrade(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, UPGRADE, "upgrade")
    args = ["run", "--simulate", str(path), "--speed", "20", "--listen", f"127.0.0.1:{free_port()}"]
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "gpuwatch", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert time.monotonic() - started < 30
    assert "Traceback" not in result.stderr
    ours = [line for line in result.stderr.splitlines() if line.startswith("gpuwatch: ")]
    assert len(ours) == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == ours[0]
    assert "LibRmVersionMismatch" in ours[0]
    assert "restart" in ours[0]


# -- process names that are not UTF-8 ------------------------------------------------------


def latin1_names(tmp_path: Path, start: float) -> Path:
    return scenario_file(
        tmp_path,
        '[[gpus]]\npreset = "l4"\n'
        '[[gpus.processes]]\npid = 501\nname = "python3 ok.py"\nmemory = "1 GiB"\n'
        f'[[gpus.processes]]\npid = 502\nname = "python3 café.py"\nmemory = "2 GiB"\n'
        f'name_encoding = "latin-1"\nstart = {start}\n',
        "latin1",
    )


def test_the_stand_in_fails_on_a_latin1_name_like_pynvml(tmp_path: Path) -> None:
    nv, clock = stand_in(latin1_names(tmp_path, 0))
    nv.nvmlInit()
    clock.advance(1)
    assert nv.nvmlSystemGetProcessName(501) == "python3 ok.py"
    with pytest.raises(UnicodeDecodeError):
        nv.nvmlSystemGetProcessName(502)


@pytest.mark.parametrize("start", [0, 30])
def test_a_name_that_is_not_utf8_costs_only_that_name(tmp_path: Path, start: float) -> None:
    agent, clock = agent_on(latin1_names(tmp_path, start))
    try:
        snapshots = []
        for _ in range(40):
            clock.advance(1.0)
            snapshots.append(agent.tick())
        text = generate_latest(agent.registry).decode()
    finally:
        agent.stop()
    for snapshot in snapshots:
        assert results(snapshot)["nvml"] is True
        assert snapshot.gpus[0].up
    last = snapshots[-1].gpus[0].processes
    assert last is not None
    assert {(p.pid, p.name, p.memory_used_bytes) for p in last} == {
        (501, "python3 ok.py", GIB),
        (502, "python3 caf\\xe9.py", 2 * GIB),
    }
    assert 'process_name="python3 caf\\\\xe9.py"' in text  # the escape, itself escaped


class BrokenBinding:
    """The stand-in with one call raising what no NVML call should (a binding bug)."""

    def __init__(self, inner: Any, broken: str) -> None:
        self._inner = inner
        self._broken = broken
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name != self._broken:
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.broken:
                raise ValueError("binding bug")
            return value(*args, **kwargs)

        return call


def test_an_unexpected_sampling_error_is_a_failed_collector_not_a_frozen_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    inner = SimulatedNvml(load_scenario("demo"), clock=clock, sleep=lambda s: None)
    broken = BrokenBinding(inner, "nvmlDeviceGetPowerUsage")
    agent = Agent(Config(agent=AgentConfig(hostname="h")), broken, clock, AgentOptions(environ={}))
    agent.open()
    try:
        clock.advance(1)
        good = agent.tick()
        broken.broken = True
        bad = []
        for _ in range(3):
            clock.advance(1)
            bad.append(agent.tick())
    finally:
        agent.stop()
    assert results(good)["nvml"] is True
    for snapshot in bad:
        assert results(snapshot)["nvml"] is False
        assert not any(g.up for g in snapshot.gpus)
        assert snapshot.timestamp_seconds > good.timestamp_seconds  # published, not frozen
    logged = [r for r in caplog.records if "failed unexpectedly" in r.getMessage()]
    assert len(logged) == 1  # once per exception type, not once per tick


# -- XIDs through a driver outage ---------------------------------------------------------


def test_xid_counting_is_reported_down_while_nvml_is_and_counts_survive() -> None:
    agent, clock = make_agent("faults")
    start = clock.time()

    def tick_to(seconds: float) -> FleetSnapshot:
        snapshot = agent.tick()
        while clock.time() - start < seconds:
            clock.advance(1.0)
            snapshot = agent.tick()
        return snapshot

    def settled(seconds: float) -> tuple[FleetSnapshot, str]:
        tick_to(seconds)
        deadline = time.monotonic() + 5
        snapshot = agent.tick()
        text = generate_latest(agent.registry).decode()
        # the event thread waits in real time: give it until both XIDs were delivered
        while not all(f'xid="{x}"}} 1.0' in text for x in (48, 79)):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
            snapshot = agent.tick()
            text = generate_latest(agent.registry).decode()
        return snapshot, text

    try:
        before, before_text = settled(125)
        during = tick_to(315)  # the driver is not loaded from 300 to 330 s
        time.sleep(0.2)
        during = agent.tick()
        during_text = generate_latest(agent.registry).decode()
        after, after_text = settled(400)
    finally:
        agent.stop()
    assert results(before)["xid"] is True
    assert results(during)["xid"] is False
    assert results(after)["xid"] is True
    for text in (before_text, during_text, after_text):
        assert 'xid="48"} 1.0' in text
        assert 'xid="79"} 1.0' in text
    assert 'gpuwatch_collector_success{collector="xid"} 0.0' in during_text
    assert 'gpuwatch_collector_success{collector="xid"} 1.0' in after_text


class _NoSymbolLookup:
    """The stand-in seen through a binding that cannot look driver symbols up."""

    def __init__(self, inner: SimulatedNvml) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "_nvmlGetFunctionPointer":
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_without_symbol_lookup_the_versioned_calls_fall_back_to_v2(tmp_path: Path) -> None:
    """Kills `processes_v2_fallback_removed`: a driver without the `_v3` calls, seen
    through a binding that cannot probe symbols, still lists its processes."""
    path = scenario_file(
        tmp_path,
        "[[gpus]]\n"
        'preset = "a100-sxm4-40gb"\n'
        "[[gpus.processes]]\n"
        "pid = 4243\n"
        'name = "python3 job.py"\n'
        'memory = "8 GiB"\n'
        "[faults]\n"
        'function_not_found = ["nvmlDeviceGetComputeRunningProcesses_v3",'
        ' "nvmlDeviceGetGraphicsRunningProcesses_v3"]\n',
    )
    nv, clock = stand_in(path)
    sampler = NvmlSampler(_NoSymbolLookup(nv), clock)
    sampler.open()
    try:
        clock.advance(1.0)
        gpu = sampler.sample()[0]
    finally:
        sampler.close()
    assert gpu.processes is not None
    assert [p.pid for p in gpu.processes] == [4243]
