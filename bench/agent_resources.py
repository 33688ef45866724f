"""CPU and memory of the agent process, against a minimal prometheus-client process.

The agent is the real daemon, `python -m gpuwatch run --simulate dgx-h100 --config C
--listen 127.0.0.1:PORT`, with `per_process_metrics = true` in C. The simulated NVML
stand-in runs inside it, so its cost is in the agent's numbers.

The baseline is `baseline_exporter.py`: a process that imports prometheus_client,
serves a static registry of the same series (the agent's /metrics text, parsed once)
with `start_http_server`, and runs an APScheduler `BackgroundScheduler` job every
second that does nothing. It runs alongside the agent in the same window, so both see
the same machine.

* CPU: speed 1 (one sample a second). After a warm-up, utime + stime of each process
  (/proc/PID/stat, every thread, children excluded) over the window, while one scraper
  fetches /metrics from each every 15 s, as a fraction of one core. Target: <= 1 %.
* Memory: the agent under `--speed 60` (one simulated hour per real minute). VmRSS
  (/proc/PID/status) 10 and 60 real seconds after it first answered, i.e. at simulated
  10 and 60 min. Targets: RSS after one simulated hour <= 60 MiB, growth between the
  two readings < 2 MiB. Under `--speed 60` the agent samples every 50 ms real
  (interval / speed, floored at 50 ms), 20x the sampling work per real second of
  speed 1: that makes the memory test stricter, not looser.

A diagnostic third process runs the same CLI with the stand-in's XID event-wait poll
period raised from the stand-in's own (`_POLL_SECONDS`: 10 ms until commit 53c8ee4,
100 ms since) to 500 ms, once per wait timeout. A real driver blocks in
`nvmlEventSetWait` without waking the process, so this takes out a cost that exists
only under `--simulate`; the stand-in's Python emulation of every NVML call of a tick
is still included.

`--quick`: a 30 s CPU window after 3 s of warm-up, memory readings at 10 and 20 s.

An in-process attribution (thread CPU time of one tick, one render, one slow pass, and
the stand-in's XID event-wait polling) explains where the agent's CPU goes.
Run alone: `python bench/agent_resources.py [--quick]`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib import (
    BENCH_DIR,
    MIB,
    SCENARIO,
    cpu_seconds,
    format_table,
    free_port,
    http_get,
    rss_bytes,
    series_lines,
    verdict,
    wait_until_serving,
)

CPU_TARGET = 0.01  # of one core
RSS_TARGET = 60 * MIB
GROWTH_TARGET = 2 * MIB
SCRAPE_EVERY = 15.0
XID_POLL = 0.5  # the diagnostic agent's stand-in poll: once per 500 ms wait
MIG_SCENARIO = "dgx-h100-mig"  # the same host with 7 MIG instances per GPU
MEMORY_SPEED = 60.0
CONFIG = """\
[agent]
per_process_metrics = true
state_dir = "{state_dir}"

[logging]
level = "warning"
"""


@dataclass(frozen=True, slots=True)
class Plan:
    """How long each phase runs."""

    warmup: float
    cpu_window: float
    memory_checkpoints: tuple[float, float]  # real seconds = simulated minutes at speed 60


FULL = Plan(warmup=5.0, cpu_window=60.0, memory_checkpoints=(10.0, 60.0))
QUICK = Plan(warmup=3.0, cpu_window=30.0, memory_checkpoints=(10.0, 20.0))


# -- processes --------------------------------------------------------------------------------


class Process:
    """A child process whose output goes to a log file; stopped with SIGTERM."""

    def __init__(self, name: str, argv: list[str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=BENCH_DIR.parent
            )
        self.pid = self.proc.pid

    def check_alive(self) -> None:
        """Raise RuntimeError, with the end of its log, if the process has exited."""
        if self.proc.poll() is not None:
            tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{tail}")

    def stop(self) -> int:
        """SIGTERM, then SIGKILL after 10 s; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)


def _start_agent(
    tmp: Path,
    port: int,
    speed: float | None,
    name: str,
    xid_poll: float | None = None,
    *,
    scenario: str = SCENARIO,
) -> Process:
    """`python -m gpuwatch run ...`; with `xid_poll`, the same CLI with the stand-in's
    event-wait poll period set to `xid_poll` seconds (diagnostic)."""
    config = tmp / "gpuwatch.toml"
    if not config.exists():
        config.write_text(CONFIG.format(state_dir=tmp / "state"), encoding="utf-8")
    args = ["run", "--simulate", scenario, "--config", str(config)]
    args += ["--listen", f"127.0.0.1:{port}"]
    if speed is not None:
        args += ["--speed", f"{speed:g}"]
    if xid_poll is None:
        argv = [sys.executable, "-m", "gpuwatch", *args]
    else:
        argv = [sys.executable, "-c", _POLL_WRAPPER, f"{xid_poll:g}", *args]
    return Process(name, argv, tmp)


_POLL_WRAPPER = """\
import sys
import gpuwatch.simulate.stand_in.event_calls as event_calls
event_calls._POLL_SECONDS = float(sys.argv[1])
from gpuwatch.cli import main
raise SystemExit(main(sys.argv[2:]))
"""


def _stand_in_polls() -> bool:
    """True when the stand-in has the poll period that the diagnostic agent changes."""
    from gpuwatch.simulate.stand_in import event_calls

    return hasattr(event_calls, "_POLL_SECONDS")


def _start_baseline(tmp: Path, metrics_file: Path, port: int, name: str) -> Process:
    argv = [sys.executable, str(BENCH_DIR / "baseline_exporter.py")]
    argv += ["--metrics-file", str(metrics_file), "--port", str(port)]
    return Process(name, argv, tmp)


def _serving(process: Process, port: int) -> float:
    """Wait until `process` answers /metrics; returns time.monotonic() of that moment."""
    try:
        wait_until_serving(port)
    except TimeoutError:
        process.check_alive()
        raise
    return time.monotonic()


def _wakeups(pid: int) -> int:
    """Voluntary context switches of every thread of `pid` (how often it went to sleep)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text(encoding="ascii")
        except FileNotFoundError:  # a thread that just ended
            continue
        match = re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.MULTILINE)
        total += int(match.group(1)) if match else 0
    return total


def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _scrape(port: int) -> None:
    status, _ = http_get(port)
    if status != 200:
        raise RuntimeError(f"/metrics on port {port} answered {status}")


# -- phase 1: CPU at speed 1 ------------------------------------------------------------------


def measure_cpu(tmp: Path, plan: Plan) -> dict[str, Any]:
    """CPU of the agent (speed 1), its diagnostic variant and the baseline, same window."""
    ports = {
        "agent": free_port(),
        "agent_mig": free_port(),
        "agent_xid_poll": free_port(),
        "baseline": free_port(),
    }
    agent = _start_agent(tmp, ports["agent"], None, "agent-cpu")
    processes = {"agent": agent}
    try:
        ready = [_serving(agent, ports["agent"])]
        time.sleep(1.5)  # a second tick: GPM ratios are in the text from then on
        status, body = http_get(ports["agent"])
        if status != 200:
            raise RuntimeError(f"agent /metrics answered {status}")
        metrics_file = tmp / "agent-metrics.txt"
        metrics_file.write_bytes(body)
        processes["baseline"] = _start_baseline(
            tmp, metrics_file, ports["baseline"], "baseline-cpu"
        )
        processes["agent_mig"] = _start_agent(
            tmp, ports["agent_mig"], None, "agent-cpu-mig", scenario=MIG_SCENARIO
        )
        if _stand_in_polls():
            processes["agent_xid_poll"] = _start_agent(
                tmp, ports["agent_xid_poll"], None, "agent-cpu-xid-poll", xid_poll=XID_POLL
            )
        ready += [_serving(processes[k], ports[k]) for k in processes if k != "agent"]
        _sleep_until(max(ready) + plan.warmup)

        pids = {k: p.pid for k, p in processes.items()}
        start = time.monotonic()
        cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
        wake0 = {k: _wakeups(p) for k, p in pids.items()}
        scrapes = 0
        while (at := start + scrapes * SCRAPE_EVERY) < start + plan.cpu_window:
            _sleep_until(at)
            for key in pids:
                _scrape(ports[key])
            scrapes += 1
        _sleep_until(start + plan.cpu_window)
        cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
        wake1 = {k: _wakeups(p) for k, p in pids.items()}
        wall = time.monotonic() - start
        for process in processes.values():
            process.check_alive()
    finally:
        codes = {p.name: p.stop() for p in reversed(processes.values())}
    result: dict[str, Any] = {
        "window_seconds": wall,
        "warmup_seconds": plan.warmup,
        "scrapes_each": scrapes,
        "series": len(series_lines(body.decode("utf-8"))),
        "metrics_file": str(metrics_file),
        "xid_poll_seconds": XID_POLL,
        "exit_codes": codes,
        "processes": {},
    }
    for key in pids:
        used = cpu1[key] - cpu0[key]
        result["processes"][key] = {
            "cpu_seconds": used,
            "cpu_fraction": used / wall,
            "wakeups_per_second": (wake1[key] - wake0[key]) / wall,
        }
    base = max(result["processes"]["baseline"]["cpu_fraction"], 1e-9)
    for entry in result["processes"].values():
        entry["ratio"] = entry["cpu_fraction"] / base
    result["ratio"] = result["processes"]["agent"]["ratio"]
    plain = max(result["processes"]["agent"]["cpu_fraction"], 1e-9)
    result["mig_vs_plain"] = result["processes"]["agent_mig"]["cpu_fraction"] / plain
    return result


# -- phase 2: memory at speed 60 --------------------------------------------------------------


def measure_memory(tmp: Path, metrics_file: Path, plan: Plan) -> dict[str, Any]:
    """RSS of the agent under --speed 60 at simulated 10 and 60 min, and of the baseline."""
    agent_port, base_port = free_port(), free_port()
    wall_start = time.time()
    agent = _start_agent(tmp, agent_port, MEMORY_SPEED, "agent-memory")
    processes = [agent]
    try:
        base = _start_baseline(tmp, metrics_file, base_port, "baseline-memory")
        processes.append(base)
        ready = _serving(agent, agent_port)
        _serving(base, base_port)
        first, last = plan.memory_checkpoints
        pids = {"agent": agent.pid, "baseline": base.pid}
        trace: dict[str, list[int]] = {k: [] for k in pids}
        readings: dict[str, dict[str, int]] = {k: {} for k in pids}
        next_scrape = 0.0
        second = 0
        while second <= last:
            _sleep_until(ready + second)
            for key, pid in pids.items():  # RSS first, so a scrape never inflates a reading
                rss = rss_bytes(pid)
                trace[key].append(rss)
                if second in (first, last):
                    readings[key][f"{second:g}"] = rss
            if second < last and second >= next_scrape:
                _scrape(agent_port)
                _scrape(base_port)
                next_scrape += SCRAPE_EVERY
            second += 1
        simulated_minutes = _simulated_minutes(agent_port, wall_start)
        for process in processes:
            process.check_alive()
    finally:
        codes = {p.name: p.stop() for p in reversed(processes)}
    result: dict[str, Any] = {
        "speed": MEMORY_SPEED,
        "real_interval_seconds": max(1.0 / MEMORY_SPEED, 0.05),
        "checkpoints_real_seconds": [first, last],
        "simulated_minutes_at_end": simulated_minutes,
        "exit_codes": codes,
    }
    for key in pids:
        at_first, at_last = readings[key][f"{first:g}"], readings[key][f"{last:g}"]
        result[key] = {
            "rss_first_bytes": at_first,
            "rss_last_bytes": at_last,
            "growth_bytes": at_last - at_first,
            "rss_max_bytes": max(trace[key]),
            "rss_trace_bytes": trace[key],
        }
    result["ratio"] = result["agent"]["rss_last_bytes"] / result["baseline"]["rss_last_bytes"]
    return result


def _simulated_minutes(port: int, wall_start: float) -> float:
    """Simulated minutes since the agent started, from its last sample's timestamp."""
    text = http_get(port)[1].decode("utf-8")
    match = re.search(r"^gpuwatch_last_sample_timestamp_seconds (\S+)$", text, re.MULTILINE)
    if match is None:
        return float("nan")
    return (float(match.group(1)) - wall_start) / 60.0


# -- attribution (in-process) -----------------------------------------------------------------


class _TimedNvml:
    """Passes every call to the stand-in and adds up the thread CPU spent inside `nvml*`
    calls: the simulated driver's share, which a real driver spends in C (or in the
    kernel), not in the agent's Python."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.seconds = 0.0  # in calls made by the thread that built this wrapper
        self._depth = 0
        self._thread = threading.get_ident()  # not the XID thread, blocked in its wait

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not name.startswith("nvml") or not callable(value) or isinstance(value, type):
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self._thread:
                return value(*args, **kwargs)
            self._depth += 1
            start = time.thread_time()
            try:
                return value(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds += time.thread_time() - start

        return timed


def _thread_cpu_ms(action: Callable[[], object], repeat: int) -> float:
    start = time.thread_time()
    for _ in range(repeat):
        action()
    return (time.thread_time() - start) / repeat * 1000


def attribute_cpu(scenario: str = SCENARIO) -> dict[str, float]:
    """Thread CPU of the agent's recurring work, measured in this process.

    A tick, a /metrics render and a slow pass on a manual clock advanced one simulated
    second per tick (so each tick sees fresh process samples and GPM pairs), and the
    share of a core that the stand-in's `nvmlEventSetWait` spends polling (every
    `stand_in.event_calls._POLL_SECONDS`).
    """
    from prometheus_client.exposition import generate_latest

    from gpuwatch.agent import Agent
    from gpuwatch.config import AgentConfig, Config
    from gpuwatch.core.clock import ManualClock
    from gpuwatch.simulate import SimulatedNvml, load_scenario

    clock = ManualClock()
    nv = _TimedNvml(SimulatedNvml(load_scenario(scenario), clock=clock))
    agent = Agent(Config(agent=AgentConfig(per_process_metrics=True)), nv, clock)
    agent.open()
    try:
        for _ in range(5):  # warm-up
            clock.advance(1.0)
            agent.tick()

        def tick() -> None:
            clock.advance(1.0)
            agent.tick()

        inside = nv.seconds
        tick_ms = _thread_cpu_ms(tick, 60)
        stand_in_tick_ms = (nv.seconds - inside) / 60 * 1000
        render_ms = _thread_cpu_ms(lambda: generate_latest(agent.registry), 60)
        slow_ms = _thread_cpu_ms(agent.nvml.collect_slow, 10)
    finally:
        agent.stop()

    # the stand-in's event wait, as the XID thread calls it: no XID in this scenario
    poll_nv = SimulatedNvml(load_scenario(SCENARIO), clock=clock)
    poll_nv.nvmlInit()
    event_set = poll_nv.nvmlEventSetCreate()
    for index in range(int(poll_nv.nvmlDeviceGetCount())):
        handle = poll_nv.nvmlDeviceGetHandleByIndex(index)
        poll_nv.nvmlDeviceRegisterEvents(handle, poll_nv.nvmlEventTypeXidCriticalError, event_set)
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    while time.perf_counter() - wall0 < 2.0:
        with contextlib.suppress(poll_nv.NVMLError):  # NVMLError_Timeout every 500 ms
            poll_nv.nvmlEventSetWait(event_set, 500)
    poll_fraction = (time.thread_time() - cpu0) / (time.perf_counter() - wall0)
    from gpuwatch.simulate.stand_in import event_calls

    poll_seconds = float(getattr(event_calls, "_POLL_SECONDS", float("nan")))
    poll_nv.nvmlEventSetFree(event_set)
    poll_nv.nvmlShutdown()
    return {
        "tick_cpu_ms": tick_ms,
        "tick_stand_in_cpu_ms": stand_in_tick_ms,
        "render_cpu_ms": render_ms,
        "slow_pass_cpu_ms": slow_ms,
        "xid_poll_cpu_fraction": poll_fraction,
        "xid_poll_period_seconds": poll_seconds,
    }


# -- the whole benchmark ----------------------------------------------------------------------


def run(quick: bool = False) -> dict[str, Any]:
    """Both phases and the attribution; returns the results as plain data."""
    plan = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="gpuwatch-bench-") as name:
        tmp = Path(name)
        cpu = measure_cpu(tmp, plan)
        memory = measure_memory(tmp, Path(cpu.pop("metrics_file")), plan)
    return {
        "scenario": SCENARIO,
        "per_process_metrics": True,
        "quick": quick,
        "cpu": cpu,
        "memory": memory,
        "attribution": attribute_cpu(),
        "attribution_mig": {"scenario": MIG_SCENARIO, **attribute_cpu(MIG_SCENARIO)},
        "targets": {
            "cpu_fraction": CPU_TARGET,
            "rss_bytes": RSS_TARGET,
            "growth_bytes": GROWTH_TARGET,
        },
    }


def report(result: dict[str, Any]) -> str:
    """The printed tables of one run."""
    cpu, memory, attr = result["cpu"], result["memory"], result["attribution"]
    targets = result["targets"]
    labels = {
        "agent": "agent (speed 1)",
        "agent_mig": f"agent, {MIG_SCENARIO} (7 MIG per GPU)",
        "agent_xid_poll": f"agent, stand-in XID poll {cpu['xid_poll_seconds'] * 1000:.0f} ms",
        "baseline": "baseline",
    }
    rows = []
    for key in ("agent", "agent_mig", "agent_xid_poll", "baseline"):
        if key not in cpu["processes"]:
            continue
        entry = cpu["processes"][key]
        within = verdict(entry["cpu_fraction"] <= targets["cpu_fraction"])
        check = {"agent": within, "agent_mig": within}
        check["agent_xid_poll"] = "(diagnostic)"
        rows.append(
            [
                labels[key],
                f"{entry['cpu_seconds']:.2f}",
                f"{entry['cpu_fraction']:.2%}",
                f"{entry['ratio']:.1f}x",
                f"{entry['wakeups_per_second']:.0f}",
                check.get(key, ""),
            ]
        )
    cpu_table = format_table(
        [
            "process",
            "CPU s",
            "% of a core",
            "vs base",
            "wakeups/s",
            f"<= {targets['cpu_fraction']:.0%}",
        ],
        rows,
    )
    first, last = memory["checkpoints_real_seconds"]
    am, bm = memory["agent"], memory["baseline"]

    def mib(value: int) -> str:
        return f"{value / MIB:.1f}"

    memory_table = format_table(
        [
            "process",
            f"RSS @{first:g} min MiB",
            f"RSS @{last:g} min MiB",
            "growth MiB",
            "max MiB",
            f"RSS <= {targets['rss_bytes'] / MIB:.0f} MiB",
            f"growth < {targets['growth_bytes'] / MIB:.0f} MiB",
        ],
        [
            [
                "agent (speed 60)",
                mib(am["rss_first_bytes"]),
                mib(am["rss_last_bytes"]),
                f"{am['growth_bytes'] / MIB:+.2f}",
                mib(am["rss_max_bytes"]),
                verdict(am["rss_last_bytes"] <= targets["rss_bytes"]),
                verdict(am["growth_bytes"] < targets["growth_bytes"]),
            ],
            [
                "baseline",
                mib(bm["rss_first_bytes"]),
                mib(bm["rss_last_bytes"]),
                f"{bm['growth_bytes'] / MIB:+.2f}",
                mib(bm["rss_max_bytes"]),
                "",
                "",
            ],
            ["agent / baseline", "", f"{memory['ratio']:.2f}x", "", "", "", ""],
        ],
    )
    attribution = _attribution_table(attr)
    mig = result["attribution_mig"]
    mig_attribution = _attribution_table(mig)
    return (
        f"Agent CPU, {result['scenario']}, per_process_metrics = true ({cpu['series']} series), "
        f"interval 1 s: {cpu['window_seconds']:.0f} s window after {cpu['warmup_seconds']:.0f} s "
        f"warm-up, {cpu['scrapes_each']} scrapes each (every {SCRAPE_EVERY:.0f} s)\n"
        f"{cpu_table}\n\n"
        f"{MIG_SCENARIO} / {result['scenario']}, same window: {cpu['mig_vs_plain']:.2f}x\n\n"
        f"Where the agent's CPU goes, {result['scenario']}\n{attribution}\n\n"
        f"Where the agent's CPU goes, {mig['scenario']}\n{mig_attribution}\n\n"
        f"Agent memory under --speed {memory['speed']:g}: readings {first:g} s and {last:g} s "
        f"after it answered (simulated {first:g} and {last:g} min; simulated "
        f"{memory['simulated_minutes_at_end']:.1f} min at the end). It samples every "
        f"{memory['real_interval_seconds'] * 1000:.0f} ms real (interval/speed floored at "
        f"50 ms), {1 / memory['real_interval_seconds']:.0f}x the sampling work per real "
        f"second of speed 1: stricter, not looser.\n"
        f"{memory_table}"
    )


def _attribution_table(attr: dict[str, Any]) -> str:
    """The in-process attribution of one scenario's recurring work."""
    per_scrape = attr["render_cpu_ms"] / SCRAPE_EVERY / 1000
    expected = (
        attr["tick_cpu_ms"] / 1000
        + attr["slow_pass_cpu_ms"] / 15 / 1000
        + per_scrape
        + attr["xid_poll_cpu_fraction"]
    )
    return format_table(
        ["recurring work (in-process thread CPU)", "ms each", "% of a core at speed 1"],
        [
            [
                "tick: sample 8 GPUs, 1/s",
                f"{attr['tick_cpu_ms']:.2f}",
                f"{attr['tick_cpu_ms'] / 10:.2f}%",
            ],
            [
                "  of which inside the simulated driver",
                f"{attr['tick_stand_in_cpu_ms']:.2f}",
                f"{attr['tick_stand_in_cpu_ms'] / 10:.2f}%",
            ],
            [
                "  of which the agent's own (tick - driver)",
                f"{attr['tick_cpu_ms'] - attr['tick_stand_in_cpu_ms']:.2f}",
                f"{(attr['tick_cpu_ms'] - attr['tick_stand_in_cpu_ms']) / 10:.2f}%",
            ],
            [
                "render /metrics, 1 per 15 s",
                f"{attr['render_cpu_ms']:.2f}",
                f"{per_scrape:.3%}",
            ],
            [
                "slow pass, 1 per 15 s",
                f"{attr['slow_pass_cpu_ms']:.2f}",
                f"{attr['slow_pass_cpu_ms'] / 15 / 10:.3f}%",
            ],
            [
                f"stand-in XID wait, polls every {attr['xid_poll_period_seconds'] * 1000:.0f} ms",
                "",
                f"{attr['xid_poll_cpu_fraction']:.2%}",
            ],
            ["sum (idle wakeups not included)", "", f"{expected:.2%}"],
        ],
    )


def main() -> int:
    """Command line: `--quick` for the smoke run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter windows (smoke run)")
    args = parser.parse_args()
    print(report(run(quick=args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
