"""The stand-in's state: the scenario, the clock, the devices and their handles.

`StandInState` builds the simulated GPUs and their MIG devices, gives each one the
`c_nvmlDevice_t` struct its handles point to, and holds the init refcount, the event
sets, the GPM sample buffers and the log of refused calls. No NVML call lives here:
the checks every call makes are in `checks`, the calls in the `*_calls` modules.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pynvml

from gpuwatch.core.clock import Clock, SystemClock
from gpuwatch.simulate.device import GpuDevice, MigDevice, build_devices
from gpuwatch.simulate.events import EventSets
from gpuwatch.simulate.faults import FaultPlan
from gpuwatch.simulate.gpm import GpmSamples
from gpuwatch.simulate.scenario import Scenario
from gpuwatch.simulate.slurm_node import SlurmNodeProcesses

Target = GpuDevice | MigDevice


@dataclass(frozen=True, slots=True)
class Refusal:
    """A call the stand-in refused as misuse: the caller's bug, not the device's state."""

    function: str
    reason: str


class StandInState:
    """What one simulated driver holds: devices, handles, refcount, event sets, GPM buffers."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        clock: Clock | None = None,
        start_time: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`start_time` (epoch s) is scenario time 0 (default: clock.time() now).

        `sleep(seconds)` is used for slow-call faults and between event-wait polls.
        """
        self.scenario = scenario
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._start = self._clock.time() if start_time is None else start_time
        self._sleep = sleep
        self._faults = FaultPlan(scenario.faults)
        self._init_lock = threading.Lock()
        self._refcount = 0
        self._loaded = False
        self._initialised_at: float | None = None
        self._devices = build_devices(scenario, self._faults)
        self._targets: dict[int, Target] = {}
        self._by_uuid: dict[str, Target] = {}
        for device in self._devices:
            targets: list[Target] = [device, *device.mig]
            for target in targets:
                target.handle_struct = pynvml.struct_c_nvmlDevice_t()
                self._targets[ctypes.addressof(target.handle_struct)] = target
                self._by_uuid[target.uuid] = target
        self._process_names = {p.pid: p for d in self._devices for p in d.every_process()}
        self._slurm: SlurmNodeProcesses | None = None
        if scenario.slurm.enabled:
            node = SlurmNodeProcesses(Path(scenario.slurm.proc_root))
            self._slurm = node
            for device in self._devices:
                device.host_processes = functools.partial(node.on_gpu, device.minor_number)
        self._gpm = GpmSamples()
        self._events = EventSets(self._faults.xids)
        self.refusals: list[Refusal] = []
        """Every call refused as misuse (InvalidArgument, ArgumentVersionMismatch), in order."""

    @property
    def devices(self) -> tuple[GpuDevice, ...]:
        """The simulated GPUs in index order (the simulated cluster names them in its
        device IDs)."""
        return tuple(self._devices)

    def scenario_time(self) -> float:
        """Seconds since scenario start (0 before it)."""
        return max(0.0, self._clock.time() - self._start)

    def _micros(self, t: float) -> int:
        return round((self._start + t) * 1_000_000)

    @staticmethod
    def _handle(target: Target) -> Any:
        return ctypes.pointer(target.handle_struct)
