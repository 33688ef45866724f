"""One GPU behind NVML: identity, remembered capabilities, and one tick's reading.

`NvmlDevice` owns everything per device that must survive between ticks: the handle,
the set of calls this device cannot answer (probed once: NotSupported, FunctionNotFound
and NoPermission are remembered), the two GPM sample buffers, the last process-
utilization timestamp and per-process samples (held up to 10 s), the process-name cache
and the slow readings (PCIe, ECC, remapped rows, MIG layout) that a separate job
refreshes.

Its parts live beside it, one job each: the call policy (`calls.DeviceCalls`), GPM
(`gpm.py`), MIG (`mig.py`), processes (`processes.py`), ECC and remapped rows
(`reliability.py`); this module reads the identity and the tick and runs the slow job.
Pure parsing of NVML's structs is `parse.py`'s.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import NamedTuple

from gpuwatch.core.clock import Clock
from gpuwatch.core.snapshot import GpuIdentity, GpuSample
from gpuwatch.nvml import parse
from gpuwatch.nvml.api import NvmlApi
from gpuwatch.nvml.errors import DeviceLostError
from gpuwatch.nvml.gpm import (
    GPM_ANY_TENSOR_UTIL,
    GPM_DRAM_BW_UTIL,
    GPM_METRIC_IDS,
    GPM_PCIE_RX,
    GPM_PCIE_TX,
    GPM_SM_OCCUPANCY,
    GPM_SM_UTIL,
    GpmBuffers,
)
from gpuwatch.nvml.mig import MigReads
from gpuwatch.nvml.processes import ProcessReads
from gpuwatch.nvml.reliability import ReliabilityReads, SlowReadings

log = logging.getLogger(__name__)

ALL_LINKS = 0xFFFFFFFF
"""NVML field-value scopeId that sums a per-link field over every NVLink."""


class _Counters(NamedTuple):
    """What the per-tick field-values call read (None: absent or unsupported)."""

    energy_mj: int | None
    nvlink_tx_bytes: float | None
    nvlink_rx_bytes: float | None
    memory_temperature_c: float | None


class NvmlDevice(MigReads, ProcessReads, ReliabilityReads):
    """A GPU (by index) and its per-device sampling state."""

    def __init__(self, nv: NvmlApi, index: int, clock: Clock) -> None:
        self._nv = nv
        self._clock = clock
        self.index = index
        self.unsupported: set[str] = set()
        self.handle = self._call("handle", nv.nvmlDeviceGetHandleByIndex, index)
        self.identity = self._read_identity()
        self._gpm: GpmBuffers | None = None
        self._mig_gpm: dict[int, GpmBuffers] = {}
        if self.identity.gpm_supported:
            self._gpm = self._guard("gpm", lambda: GpmBuffers(nv, GPM_METRIC_IDS))
        self._process_util_last_us = 0
        self._process_util: dict[int, tuple[float, float]] = {}  # pid: (ratio, received at)
        self._process_names: dict[int, str] = {}
        self._mig_slots: int | None = None  # nvmlDeviceGetMaxMigDeviceCount while MIG is on
        # MIG UUID: (GPU, compute instance id, GPU instance profile id, placement start)
        self._mig_ids: dict[str, tuple[int, int, int | None, int | None]] = {}
        self._process_calls = None
        self._process_calls_known = False
        self._nvlink_last: tuple[float, float] | None = None  # (monotonic s, TX + RX bytes)
        self.slow = SlowReadings()

    def _read_identity(self) -> GpuIdentity:
        nv, h = self._nv, self.handle
        uuid = parse.text(self._call("uuid", nv.nvmlDeviceGetUUID, h))
        name = parse.text(self._call("name", nv.nvmlDeviceGetName, h))
        serial = self._optional("serial", nv.nvmlDeviceGetSerial, h)
        pci = self._optional("pci", nv.nvmlDeviceGetPciInfo, h)
        memory = self._read_memory()
        limit_mw = self._optional("power_limit", nv.nvmlDeviceGetEnforcedPowerLimit, h)
        gpm = self._optional("gpm_support", nv.nvmlGpmQueryDeviceSupport, h)
        minor = self._optional("minor_number", nv.nvmlDeviceGetMinorNumber, h)
        return GpuIdentity(
            index=self.index,
            uuid=uuid,
            name=name,
            serial=None if serial is None else parse.text(serial),
            pci_bus_id=parse.text(pci.busId) if pci is not None else "",
            memory_total_bytes=None if memory is None else memory.total_bytes,
            power_limit_watts=None if limit_mw is None else parse.milliwatts_to_watts(limit_mw),
            gpm_supported=bool(gpm is not None and gpm.isSupportedDevice),
            minor_number=None if minor is None else int(minor),
        )

    def sample(
        self, xid_counts: tuple[tuple[int, int], ...] = (), last_xid: int | None = None
    ) -> GpuSample:
        """Read one tick; a lost GPU gives `up=False` and the others are unaffected.

        Raises DriverError when NVML as a whole has failed.
        """
        try:
            return self._sample(xid_counts, last_xid)
        except DeviceLostError as exc:
            return GpuSample(
                identity=self.identity,
                up=False,
                error=str(exc),
                xid_errors_total=xid_counts,
                last_xid=last_xid,
            )

    def _sample(self, xid_counts: tuple[tuple[int, int], ...], last_xid: int | None) -> GpuSample:
        nv, h = self._nv, self.handle
        now = self._clock.monotonic()
        memory = self._read_memory()
        rates = self._optional("utilization", nv.nvmlDeviceGetUtilizationRates, h)
        power_mw = self._optional("power", nv.nvmlDeviceGetPowerUsage, h)
        counters = self._read_counters()
        nvlink_tx, nvlink_rx = counters.nvlink_tx_bytes, counters.nvlink_rx_bytes
        energy_mj = counters.energy_mj
        temperature = self._read_temperature()
        encoder = self._optional("encoder_utilization", nv.nvmlDeviceGetEncoderUtilization, h)
        decoder = self._optional("decoder_utilization", nv.nvmlDeviceGetDecoderUtilization, h)
        clock_sm = self._optional("clock_sm", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        clock_mem = self._optional("clock_mem", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)
        reasons = self._first_answer(
            ("clock_event_reasons", nv.nvmlDeviceGetCurrentClocksEventReasons),
            ("clock_throttle_reasons", nv.nvmlDeviceGetCurrentClocksThrottleReasons),  # < R535
        )
        gpm = self._read_gpm(self._gpm, now, None)
        processes = self._read_processes()
        slow = self.slow
        pcie_tx, pcie_rx = slow.pcie_tx_bytes_per_second, slow.pcie_rx_bytes_per_second
        if GPM_PCIE_TX in gpm:
            pcie_tx = parse.mebibytes_per_second_to_bytes(gpm[GPM_PCIE_TX])
        if GPM_PCIE_RX in gpm:
            pcie_rx = parse.mebibytes_per_second_to_bytes(gpm[GPM_PCIE_RX])
        return GpuSample(
            identity=self.identity,
            up=True,
            memory_used_bytes=None if memory is None else memory.used_bytes,
            memory_free_bytes=None if memory is None else memory.free_bytes,
            memory_reserved_bytes=None if memory is None else memory.reserved_bytes,
            utilization_ratio=None if rates is None else parse.percent_to_ratio(rates.gpu),
            memory_busy_ratio=None if rates is None else parse.percent_to_ratio(rates.memory),
            sm_active_ratio=parse.percent_to_ratio(gpm.get(GPM_SM_UTIL)),
            sm_occupancy_ratio=parse.percent_to_ratio(gpm.get(GPM_SM_OCCUPANCY)),
            dram_bandwidth_ratio=parse.percent_to_ratio(gpm.get(GPM_DRAM_BW_UTIL)),
            tensor_active_ratio=parse.percent_to_ratio(gpm.get(GPM_ANY_TENSOR_UTIL)),
            power_watts=None if power_mw is None else parse.milliwatts_to_watts(power_mw),
            energy_joules_total=(
                None if energy_mj is None else parse.millijoules_to_joules(energy_mj)
            ),
            temperature_celsius=None if temperature is None else float(temperature),
            clock_sm_hertz=None if clock_sm is None else parse.megahertz_to_hertz(clock_sm),
            clock_memory_hertz=None if clock_mem is None else parse.megahertz_to_hertz(clock_mem),
            throttle_reasons=(
                None if reasons is None else parse.decode_clock_event_reasons(int(reasons))
            ),
            pcie_tx_bytes_per_second=pcie_tx,
            pcie_rx_bytes_per_second=pcie_rx,
            nvlink_tx_bytes_total=nvlink_tx,
            nvlink_rx_bytes_total=nvlink_rx,
            nvlink_bytes_per_second=self._nvlink_rate(now, nvlink_tx, nvlink_rx),
            ecc_uncorrected_errors_total=slow.ecc_uncorrected_errors_total,
            ecc_corrected_errors_total=slow.ecc_corrected_errors_total,
            remapped_rows_correctable=slow.remapped_rows_correctable,
            remapped_rows_uncorrectable=slow.remapped_rows_uncorrectable,
            remapped_rows_pending=slow.remapped_rows_pending,
            remapped_rows_failure=slow.remapped_rows_failure,
            encoder_utilization_ratio=(
                None if encoder is None else parse.percent_to_ratio(encoder[0])
            ),
            decoder_utilization_ratio=(
                None if decoder is None else parse.percent_to_ratio(decoder[0])
            ),
            memory_temperature_celsius=counters.memory_temperature_c,
            pcie_replay_errors_total=slow.pcie_replay_errors_total,
            mig_enabled=slow.mig_enabled,
            power_limit_watts=slow.power_limit_watts,
            mig_instances=self._read_mig(now, slow.mig_devices),
            processes=processes,
            xid_errors_total=xid_counts,
            last_xid=last_xid,
        )

    def _read_temperature(self) -> int | None:
        nv, h = self._nv, self.handle
        value = self._optional(
            "temperature_v", nv.nvmlDeviceGetTemperatureV, h, nv.NVML_TEMPERATURE_GPU
        )
        if value is None and "temperature_v" in self.unsupported:
            value = self._optional(
                "temperature", nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU
            )
        return None if value is None else int(value)

    def _read_counters(self) -> _Counters:
        """Energy (mJ), NVLink data TX/RX (bytes, all links) and the memory temperature
        (°C, `NVML_FI_DEV_MEMORY_TEMP`: HBM parts) in one field-values call.

        Each entry carries its own return code: NotSupported (or NoPermission) for the
        energy entry, the memory temperature, or both NVLink entries, is remembered and
        that field is no longer asked for. Without `nvmlDeviceGetFieldValues` at all,
        energy comes from `nvmlDeviceGetTotalEnergyConsumption`; NVLink and the memory
        temperature (no call of their own answers them) are absent.
        """
        nv = self._nv
        if "field_values" in self.unsupported:
            energy = self._optional("energy", nv.nvmlDeviceGetTotalEnergyConsumption, self.handle)
            return _Counters(energy, None, None, None)
        fields: list[tuple[str, int, int]] = []
        if "energy" not in self.unsupported:
            fields.append(("energy", nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 0))
        if "nvlink" not in self.unsupported:
            # scopeId UINT_MAX: the sum over all links (no scope would be link 0 only)
            fields.append(("nvlink_tx", nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ALL_LINKS))
            fields.append(("nvlink_rx", nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ALL_LINKS))
        if "memory_temperature" not in self.unsupported:
            fields.append(("memory_temperature", nv.NVML_FI_DEV_MEMORY_TEMP, 0))
        got = self._read_fields(fields)
        if "field_values" in self.unsupported:  # just learnt: this tick's energy by its call
            return self._read_counters()
        if {"nvlink_tx", "nvlink_rx"} <= self.unsupported:
            self.unsupported.add("nvlink")
        energy_field = got.get("energy")
        tx, rx = got.get("nvlink_tx"), got.get("nvlink_rx")
        memory_temperature = got.get("memory_temperature")
        return _Counters(
            None if energy_field is None else int(energy_field),
            None if tx is None else parse.kibibytes_to_bytes(tx),
            None if rx is None else parse.kibibytes_to_bytes(rx),
            None if memory_temperature is None else float(memory_temperature),
        )

    def _nvlink_rate(self, now: float, tx: float | None, rx: float | None) -> float | None:
        """NVLink TX + RX data bytes per second since the previous tick's counters.

        None on the first reading, when either counter is missing, when no time passed,
        and when the sum went down (the driver was reloaded: the next tick has a rate).
        """
        if tx is None or rx is None:
            self._nvlink_last = None
            return None
        total = tx + rx
        last, self._nvlink_last = self._nvlink_last, (now, total)
        if last is None or now <= last[0] or total < last[1]:
            return None
        return (total - last[1]) / (now - last[0])

    def sample_slow(self) -> None:
        """Refresh PCIe (a blocking call), its replay counter, ECC, remapped rows, MIG layout."""
        nv, h = self._nv, self.handle
        pcie_tx = pcie_rx = None
        if not self.identity.gpm_supported or "gpm" in self.unsupported:  # no GPM 20/21
            tx = self._optional(
                "pcie", nv.nvmlDeviceGetPcieThroughput, h, nv.NVML_PCIE_UTIL_TX_BYTES
            )
            rx = self._optional(
                "pcie", nv.nvmlDeviceGetPcieThroughput, h, nv.NVML_PCIE_UTIL_RX_BYTES
            )
            pcie_tx = None if tx is None else parse.kilobytes_per_second_to_bytes(tx)
            pcie_rx = None if rx is None else parse.kilobytes_per_second_to_bytes(rx)
        reliability = self._read_reliability()
        mig_mode = self._optional("mig_mode", nv.nvmlDeviceGetMigMode, h)
        limit_mw = self._optional("power_limit", nv.nvmlDeviceGetEnforcedPowerLimit, h)
        mig_enabled = None if mig_mode is None else bool(mig_mode[0])  # current, not pending
        was = self.slow.mig_enabled
        if mig_enabled is not None and was is not None and mig_enabled != was:
            self._mig_mode_changed(mig_enabled)
        if not mig_enabled:
            self._mig_slots = None
            self._mig_ids = {}
        self.slow = replace(
            reliability,
            pcie_tx_bytes_per_second=pcie_tx,
            pcie_rx_bytes_per_second=pcie_rx,
            mig_enabled=mig_enabled,
            mig_devices=self._read_mig_layout() if mig_enabled else (),
            power_limit_watts=None if limit_mw is None else parse.milliwatts_to_watts(limit_mw),
        )

    def mark_slow_failed(self) -> None:
        """Forget slow readings after a failure so no stale value is exported."""
        self.slow = replace(SlowReadings(), mig_enabled=self.slow.mig_enabled)

    def close(self) -> None:
        """Free the GPM buffers."""
        for buffers in [self._gpm, *self._mig_gpm.values()]:
            if buffers is not None:
                buffers.free()
        self._gpm = None
        self._mig_gpm = {}
