"""Simulated GPUs and MIG devices: what each reports at a scenario time.

Built once from a `Scenario` (`build_devices`); the stand-in turns these plain values
into pynvml structs. Reported values are the noise-free timeline plus a small jitter
redrawn every simulated second; counters (energy, NVLink) integrate the noise-free
values exactly, so they depend only on the time they are read at.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwatch.core.units import MIB
from gpuwatch.simulate.faults import FaultPlan
from gpuwatch.simulate.gpus import GpuConfig, MigInstanceConfig, ProcessConfig
from gpuwatch.simulate.noise import hex_digits, prefix, signed_after, stable_seed, unit
from gpuwatch.simulate.presets import DevicePreset
from gpuwatch.simulate.processes import NO_INSTANCE, SimProcess
from gpuwatch.simulate.scenario import Scenario
from gpuwatch.simulate.timeline import (
    Act,
    ActivitySource,
    Aggregate,
    Timeline,
    average,
    integrate,
)

BASE_USED_BYTES = 1 * MIB
"""v2 `used` of a GPU with nothing on it (what nvidia-smi shows as 1MiB)."""
MIG_BASE_USED_BYTES = 13 * MIB
"""`used` of an empty MIG device."""
UNCORRECTED_ECC_XIDS = frozenset({48, 94, 95})
"""XIDs that count as an uncorrectable ECC error (and a pending row remap)."""
DRIVER_UPTIME_DAYS = (2.0, 30.0)
"""The driver was loaded this long before scenario time 0 (drawn per GPU): energy starts
at the idle power times that uptime, a large non-zero count as on a real host."""
_DGX_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
_IDLE_THRESHOLD = 0.005
_CLOCK_STEP_MHZ = 15


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A device's readings at one instant."""

    act: Act
    """Activity with jitter (fractions 0-1, rates MiB/s)."""
    power_mw: int
    temperature_c: int
    sm_clock_mhz: int
    mem_clock_mhz: int
    clock_event_reasons: int


def _processes(
    configs: tuple[ProcessConfig, ...], usable: int, gi: int = NO_INSTANCE, ci: int = NO_INSTANCE
) -> tuple[SimProcess, ...]:
    return tuple(
        SimProcess(
            pid=p.pid,
            name=p.name,
            kind=p.kind,
            memory_bytes=p.memory_bytes(usable),
            start=p.start,
            end=math.inf if p.end is None else p.end,
            share=p.share,
            memory_visible=p.memory_visible,
            name_encoding=p.name_encoding,
            gpu_instance_id=gi,
            compute_instance_id=ci,
        )
        for p in configs
    )


def _uuid(prefix: str, *parts: str | int) -> str:
    h = hex_digits(32, *parts)
    return f"{prefix}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class _Readable:
    """Shared by GPUs and MIG devices: jittered activity from a source."""

    source: ActivitySource
    seed: int
    jitter: float

    def __init__(self) -> None:
        self._noise: tuple[int, tuple[float, ...]] = (-1, ())

    def factors(self, t: float) -> tuple[float, ...]:
        """Per-second jitter factors: 9 activity metrics, then power and temperature."""
        second = math.floor(t)
        cached_second, cached = self._noise
        if cached_second == second:
            return cached
        j = self.jitter
        state = prefix(self.seed, second)  # the 11 draws share their first two hash steps
        factors = (
            *(1.0 + j * signed_after(state, k) for k in range(10)),
            signed_after(state, 10),
        )
        self._noise = (second, factors)
        return factors

    def noisy(self, act: Act, t: float) -> Act:
        """`act` with the jitter of second floor(t); fractions stay within 0-1."""
        if self.jitter == 0:
            return act
        f = self.factors(t)
        return Act(
            min(act.util * f[0], 1.0),
            min(act.sm * f[1], 1.0),
            min(act.occupancy * f[2], 1.0),
            min(act.tensor * f[3], 1.0),
            min(act.dram * f[4], 1.0),
            act.pcie_tx * f[5],
            act.pcie_rx * f[6],
            act.nvlink_tx * f[7],
            act.nvlink_rx * f[8],
            act.power_w,
        )

    def average(self, t0: float, t1: float) -> Act:
        """Jittered time-average activity over [t0, t1] (the GPM view)."""
        return self.noisy(average(self.source, t0, t1), t1)


class MigDevice(_Readable):
    """A MIG device: one GPU instance with one compute instance."""

    def __init__(self, parent: GpuDevice, position: int, config: MigInstanceConfig) -> None:
        super().__init__()
        self.parent = parent
        self.position = position
        self.profile = config.profile
        self.slices = config.slices
        self.gpu_instance_id = config.gpu_instance_id or position + 1
        self.compute_instance_id = config.compute_instance_id
        self.gpu_instance_profile_id = 0  # set by the parent, which knows the GPU's memory
        self.placement_start = 0  # and where the instances before this one end
        self.name = f"{parent.preset.name} MIG {config.profile}"
        self.uuid = config.uuid or _uuid("MIG", parent.scenario_name, "mig", parent.index, position)
        self.memory_total = config.memory_bytes()
        self.seed = stable_seed(parent.seed, "mig", position)
        self.source = Timeline(config.activity, self.seed)
        self.jitter = config.activity.jitter
        self.processes = _processes(
            config.processes,
            self.memory_total,
            self.gpu_instance_id,
            self.compute_instance_id,
        )
        self.handle_struct: Any = None

    @property
    def gpu_index(self) -> int:
        """Index of the GPU this MIG device is part of."""
        return self.parent.index

    def memory(self, t: float) -> tuple[int, int, int]:
        """(total, reserved, used) in bytes; v2 semantics (used excludes reserved)."""
        used = MIG_BASE_USED_BYTES + sum(p.memory_bytes for p in self.processes if p.running(t))
        return self.memory_total, 0, used


class GpuDevice(_Readable):
    """A physical GPU."""

    def __init__(
        self, scenario: Scenario, index: int, config: GpuConfig, faults: FaultPlan
    ) -> None:
        super().__init__()
        preset = config.device
        self.index = index
        self.scenario_name = scenario.identity_name
        self.preset: DevicePreset = preset
        self.uuid = config.uuid or _uuid("GPU", self.scenario_name, "gpu", index)
        digits = int(hex_digits(12, self.scenario_name, "serial", index), 16) % 10**9
        self.serial = config.serial or f"1654{digits:09d}"
        self.pci_domain = index // len(_DGX_BUSES)
        self.pci_bus = _DGX_BUSES[index % len(_DGX_BUSES)]
        self.pci_bus_id = config.pci_bus_id or f"{self.pci_domain:08X}:{self.pci_bus:02X}:00.0"
        if config.pci_bus_id:
            self.pci_domain = int(config.pci_bus_id[:8], 16)
            self.pci_bus = int(config.pci_bus_id[9:11], 16)
        self.power_limit_w = config.power_limit_w or preset.power_limit_w
        self.seed = stable_seed(self.scenario_name, scenario.seed, "gpu", index)
        self.jitter = config.activity.jitter
        self.usable_bytes = preset.memory_bytes - preset.reserved_bytes
        reversed_minor = len(scenario.gpus) - 1 - index  # the kernel enumerated in reverse
        self.minor_number = reversed_minor if config.minor_number is None else config.minor_number
        self.mig_changes = config.mig_changes
        self._mig_initial = config.mig_enabled
        self.mig = [MigDevice(self, k, m) for k, m in enumerate(config.mig)]
        start = 0
        for mig, mig_config in zip(self.mig, config.mig, strict=True):
            mig.gpu_instance_profile_id = mig_config.profile_id(preset.memory_bytes)
            mig.placement_start = (
                start if mig_config.placement_start is None else mig_config.placement_start
            )
            start = mig.placement_start + mig_config.memory_slices(preset.memory_bytes)
        self.processes = _processes(config.processes, self.usable_bytes)
        self.host_processes: Callable[[], tuple[SimProcess, ...]] = tuple  # a Slurm node's
        mig_source = Aggregate([(m.source, m.slices / 7) for m in self.mig])
        plain_source = Timeline(config.activity, self.seed)
        self.source: ActivitySource = (
            _MigSwitch(self, plain_source, mig_source)
            if self.mig_changes
            else (mig_source if self._mig_initial else plain_source)
        )
        self.ecc_base = config.ecc_errors
        self.ecc_xid_times = sorted(
            x.at for x in faults.xids if x.gpu == index and x.xid in UNCORRECTED_ECC_XIDS
        )
        self.handle_struct: Any = None
        self._lock = threading.Lock()
        self._snapshot: tuple[float, Snapshot | None] = (-1.0, None)
        low, high = DRIVER_UPTIME_DAYS
        uptime_s = (low + (high - low) * unit(self.seed, 0xE4E)) * 86_400
        self.energy_at_start_mj = int(preset.idle_power_w * uptime_s * 1000)
        self._acc_t = 0.0
        self._acc = [0.0, 0.0, 0.0]  # J, NVLink TX MiB, NVLink RX MiB

    @property
    def gpu_index(self) -> int:
        """This GPU's index."""
        return self.index

    def mig_current(self, t: float) -> bool:
        """The MIG mode in force at `t`: the initial one, then each change once applied."""
        mode = self._mig_initial
        for change in self.mig_changes:
            if change.applied is not None and change.applied <= t:
                mode = change.enabled
        return mode

    def mig_pending(self, t: float) -> bool:
        """The MIG mode last set at or before `t` (the current one when none was set)."""
        mode = self.mig_current(t)
        for change in self.mig_changes:
            if change.at <= t and (change.applied is None or change.applied > t):
                mode = change.enabled
        return mode

    def mig_change_times(self) -> list[float]:
        """Times at which the current MIG mode may flip."""
        return sorted(c.applied for c in self.mig_changes if c.applied is not None)

    # -- power, temperature, clocks ----------------------------------------------------

    def raw_power_w(self, act: Act) -> float:
        """Power the activity asks for (W), before the power cap."""
        if act.power_w is not None:
            return act.power_w
        p = self.preset
        load = 0.7 * act.sm + 0.3 * act.tensor + 0.25 * act.dram
        return p.idle_power_w + (p.power_limit_w - p.idle_power_w) * load

    def power_w(self, act: Act) -> float:
        """Board power (W): the raw power capped at the enforced limit."""
        return min(self.raw_power_w(act), self.power_limit_w)

    def snapshot(self, t: float) -> Snapshot:
        """Readings at scenario time `t` (cached for repeated calls at the same t)."""
        cached_t, cached = self._snapshot
        if cached is not None and cached_t == t:
            return cached
        snap = self._compute(t)
        self._snapshot = (t, snap)
        return snap

    def _compute(self, t: float) -> Snapshot:
        p = self.preset
        act = self.source.at(t)
        factors = self.factors(t)
        raw = self.raw_power_w(act)
        capped = raw >= 0.98 * self.power_limit_w
        power = min(raw * (1.0 + (factors[9] - 1.0) / 2.0), self.power_limit_w)
        span = max(p.power_limit_w - p.idle_power_w, 1.0)
        heat = min(max((min(raw, self.power_limit_w) - p.idle_power_w) / span, 0.0), 1.0)
        temperature = p.temp_idle_c + (p.temp_load_c - p.temp_idle_c) * heat + 0.5 * factors[10]
        idle = act.util < _IDLE_THRESHOLD and act.sm < _IDLE_THRESHOLD
        if idle:
            sm_clock, mem_clock = p.idle_sm_clock_mhz, p.idle_mem_clock_mhz
            reasons = 0x1  # nvmlClocksEventReasonGpuIdle
        else:
            scale = math.sqrt(self.power_limit_w / raw) if raw > self.power_limit_w else 1.0
            sm_clock = _step(p.max_sm_clock_mhz * scale, p.max_sm_clock_mhz)
            mem_clock = p.max_mem_clock_mhz
            reasons = 0x0
        if capped:
            reasons |= 0x4  # nvmlClocksEventReasonSwPowerCap
        return Snapshot(
            act=self.noisy(act, t),
            power_mw=round(power * 1000),
            temperature_c=round(temperature),
            sm_clock_mhz=sm_clock,
            mem_clock_mhz=mem_clock,
            clock_event_reasons=reasons,
        )

    # -- counters --------------------------------------------------------------------

    def counters(self, t: float) -> tuple[int, int, int]:
        """(energy mJ since driver load, NVLink TX KiB, NVLink RX KiB from t = 0) at `t`."""
        with self._lock:
            if t > self._acc_t:
                step = integrate(
                    self.source,
                    self._acc_t,
                    t,
                    lambda act: (self.power_w(act), act.nvlink_tx, act.nvlink_rx),
                )
                for i in range(3):
                    self._acc[i] += step[i]
                self._acc_t = t
            joules, tx_mib, rx_mib = self._acc
        energy = self.energy_at_start_mj + int(joules * 1000)
        return energy, int(tx_mib * 1024), int(rx_mib * 1024)

    # -- memory and processes ------------------------------------------------------------

    def memory(self, t: float) -> tuple[int, int, int]:
        """(total, reserved, used) in bytes of the whole GPU; v2 semantics.

        `used` excludes reserved; with MIG on it is every MIG device's used memory.
        """
        if self.mig_current(t):
            used = BASE_USED_BYTES + sum(m.memory(t)[2] for m in self.mig)
        else:
            running = (*self.processes, *self.host_processes())
            used = BASE_USED_BYTES + sum(p.memory_bytes for p in running if p.running(t))
        return self.preset.memory_bytes, self.preset.reserved_bytes, used

    def all_processes(self, t: float) -> tuple[SimProcess, ...]:
        """Every process of this GPU at `t`: the MIG devices' with MIG on, else the GPU's."""
        if not self.mig_current(t):
            return (*self.processes, *self.host_processes())
        return tuple(p for m in self.mig for p in m.processes)

    def every_process(self) -> tuple[SimProcess, ...]:
        """Every process this GPU ever has, in either MIG mode."""
        return (*self.processes, *(p for m in self.mig for p in m.processes))

    def ecc_errors(self, t: float) -> tuple[int, int]:
        """(uncorrected since t = 0, corrected since t = 0) from the scenario's XIDs."""
        return sum(1 for at in self.ecc_xid_times if at <= t), 0


class _MigSwitch:
    """A GPU's activity when its MIG mode changes: its own timeline or its instances'."""

    def __init__(self, gpu: GpuDevice, plain: ActivitySource, mig: ActivitySource) -> None:
        self._gpu = gpu
        self._plain = plain
        self._mig = mig
        self._times = gpu.mig_change_times()

    def _source(self, t: float) -> ActivitySource:
        return self._mig if self._gpu.mig_current(t) else self._plain

    def at(self, t: float) -> Act:
        """The activity of whichever source the mode at `t` selects."""
        return self._source(t).at(t)

    def next_change(self, t: float) -> float:
        """The selected source's next change, or the next mode flip if sooner."""
        flips = [x for x in self._times if x > t]
        return min(self._source(t).next_change(t), *flips, math.inf)


def _step(mhz: float, maximum: int) -> int:
    return min(round(mhz / _CLOCK_STEP_MHZ) * _CLOCK_STEP_MHZ, maximum)


def build_devices(scenario: Scenario, faults: FaultPlan) -> list[GpuDevice]:
    """The scenario's GPUs, in index order."""
    return [GpuDevice(scenario, i, gpu, faults) for i, gpu in enumerate(scenario.gpus)]
